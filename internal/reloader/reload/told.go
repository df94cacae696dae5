package reload

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/configwave/configwave/internal/reloader/atomicfile"
	"github.com/configwave/configwave/internal/reloader/unpack"
)

// ToldRecord is where the reloader remembers, beside the config, which set the app last took:
// a file in the same volume as the config, so that it outlives a restart of the reloader's
// container (kubelet restarts it after --unhealthy-after, exactly when the app did not take the
// last set). Without it, a restarted reloader that finds the files equal to their source would
// assume the app runs them and tell nobody.
//
// The file holds a random key and the keyed hash of the told set under it; the key lives only
// beside the config, so the record says nothing about the values anywhere else.
type ToldRecord struct {
	Path string
	key  []byte
	told []byte // keyed hash of the set last told; nil: none recorded
	// garbled: a record was there and could not be read (a node that crashed while it was
	// written before records were synced): what the app took is unknown, so it is told again.
	garbled bool
}

// ToldRecordName is the record's name in the folder it is kept in: ".." names are never config
// keys (Kubernetes refuses them) and are what kubelet's own bookkeeping in a volume looks like.
const ToldRecordName = "..configwave-told"

const toldVersion = "configwave-told v1"

// Load reads the record. A missing file is no record (a first start, or an older reloader);
// an unreadable or garbled one is reported and treated as none, with a new key.
func (t *ToldRecord) Load() error {
	t.told, t.garbled = nil, false
	_ = atomicfile.Clean(t.Path) // what a crash mid-write left; the record itself is whole
	b, err := os.ReadFile(t.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return t.newKey()
	}
	if err == nil {
		var key, told []byte
		if key, told, err = parseTold(b); err == nil {
			t.key, t.told = key, told
			return nil
		}
	}
	if kerr := t.newKey(); kerr != nil {
		return kerr
	}
	t.garbled = true
	return fmt.Errorf("read what the app was last told from %s: %w; the app is told again, and the record written again", t.Path, err)
}

func parseTold(b []byte) (key, told []byte, err error) {
	f := bytes.Fields(b)
	if len(f) != 4 || string(f[0])+" "+string(f[1]) != toldVersion {
		return nil, nil, errors.New("not a record this reloader wrote")
	}
	if key, err = hex.DecodeString(string(f[2])); err != nil || len(key) != 32 {
		return nil, nil, errors.New("its key is not 32 bytes of hex")
	}
	if told, err = hex.DecodeString(string(f[3])); err != nil || len(told) != 32 {
		return nil, nil, errors.New("its hash is not 32 bytes of hex")
	}
	return key, told, nil
}

func (t *ToldRecord) newKey() error {
	t.key = make([]byte, 32)
	if _, err := rand.Read(t.key); err != nil {
		return fmt.Errorf("make a key for %s: %w", t.Path, err)
	}
	return nil
}

// Sum is the keyed hash of a file set under the record's key. Load first.
func (t *ToldRecord) Sum(files map[string]unpack.File) []byte {
	b, _ := hex.DecodeString(KeyedHash(t.key, files))
	return b
}

// Recorded reports whether Load found a record (a garbled one too), or Save wrote one.
func (t *ToldRecord) Recorded() bool { return t.told != nil || t.garbled }

// Untold reports whether a record exists and names another set than sum, or could not be read:
// the last reloader did not get sum to the app, or it is not known that it did.
func (t *ToldRecord) Untold(sum []byte) bool {
	return t.garbled || t.told != nil && !hmac.Equal(t.told, sum)
}

// Save records that the app took the set whose Sum is sum, atomically and durably
// (atomicfile.Write): a crash, of the container or the node, leaves the old record or the new.
func (t *ToldRecord) Save(sum []byte) error {
	if _, err := atomicfile.Write(t.Path, []byte(fmt.Sprintf("%s %x %x\n", toldVersion, t.key, sum)), 0o600); err != nil {
		return fmt.Errorf("record what the app was told: %w", err)
	}
	t.told, t.garbled = sum, false
	return nil
}
