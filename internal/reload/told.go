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
	"path/filepath"

	"github.com/configwave/configwave/internal/unpack"
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
}

// ToldRecordName is the record's name in the folder it is kept in: ".." names are never config
// keys (Kubernetes refuses them) and are what kubelet's own bookkeeping in a volume looks like.
const ToldRecordName = "..configwave-told"

const toldVersion = "configwave-told v1"

// Load reads the record. A missing file is no record (a first start, or an older reloader);
// an unreadable or garbled one is reported and treated as none, with a new key.
func (t *ToldRecord) Load() error {
	t.told = nil
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
	return fmt.Errorf("read what the app was last told from %s: %w; it is written again at the next reload", t.Path, err)
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

// Recorded reports whether Load found a record, or Save wrote one.
func (t *ToldRecord) Recorded() bool { return t.told != nil }

// Untold reports whether a record exists and names another set than sum: the last reloader
// did not get sum to the app.
func (t *ToldRecord) Untold(sum []byte) bool { return t.told != nil && !hmac.Equal(t.told, sum) }

// Save records that the app took the set whose Sum is sum. It is written to a new file and
// renamed into place, so a crash leaves the old record or the new one.
func (t *ToldRecord) Save(sum []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(t.Path), ToldRecordName+".tmp*")
	if err != nil {
		return fmt.Errorf("record what the app was told in %s: %w", filepath.Dir(t.Path), err)
	}
	_, err = fmt.Fprintf(tmp, "%s %x %x\n", toldVersion, t.key, sum)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), t.Path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("record what the app was told in %s: %w", t.Path, err)
	}
	t.told = sum
	return nil
}
