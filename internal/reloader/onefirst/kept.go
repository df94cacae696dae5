package onefirst

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/configwave/configwave/internal/reloader/atomicfile"
	"github.com/configwave/configwave/internal/reloader/source"
)

// Kept is what a sidecar keeps beside the config it lays out: the content laid out and the last
// good one, each with its objects as read, so that a restart of its container (an OOM kill, a
// failed liveness probe, a node's reboot that keeps the emptyDir) resumes where it stood. Without
// it a restarted sidecar would lay out the newest content, untried or rejected, over the good
// set, call it good, and never put it back.
type Kept struct {
	// Lease names the record the state belongs to (workload and sources): a state kept for
	// other sources (the pod's flags changed) is not resumed.
	Lease string   `json:"lease"`
	Laid  *KeptSet `json:"laid,omitempty"`
	// Good is nil when none is known; its Snapshot is nil when it is the content laid out.
	Good *KeptSet `json:"good,omitempty"`
	// Before is the good content before Good (Record.Before), with its objects; nil when none.
	Before *KeptSet `json:"before,omitempty"`
	// Rejected are the contents this pod rejected and put back whose rejection the record may
	// not hold yet, with why: a restart must not lay them out again.
	Rejected map[string]string `json:"rejected,omitempty"`
}

// KeptSet is one content: its ContentID and the objects it was read from.
type KeptSet struct {
	ID       string           `json:"id"`
	Snapshot *source.Snapshot `json:"snapshot,omitempty"`
}

// KeptName is the state's name in the config's folder: ".." names are never config keys, as
// for the reload loop's record of what the app was told.
const KeptName = "..configwave-onefirst"

// keptVersion opens the file, so that a later format is told from this one.
const keptVersion = "configwave-onefirst v1\n"

// KeptFile keeps a Kept in a file, written atomically and durably (atomicfile): a crash
// leaves the old state or the new. Mode 0600: it holds what the config's files hold.
type KeptFile struct{ Path string }

// Load reads the state; false when there is none (a first start). A garbled state is an error,
// and the caller starts over as on a first start.
func (f KeptFile) Load() (Kept, bool, error) {
	_ = atomicfile.Clean(f.Path)
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return Kept{}, false, nil
	}
	if err != nil {
		return Kept{}, false, fmt.Errorf("read the one-first state %s: %w", f.Path, err)
	}
	k, err := parseKept(b)
	if err != nil {
		return Kept{}, false, fmt.Errorf("read the one-first state %s: %w", f.Path, err)
	}
	return k, true, nil
}

func parseKept(b []byte) (Kept, error) {
	rest, ok := cutPrefix(b, keptVersion)
	if !ok {
		return Kept{}, errors.New("not a state this reloader wrote")
	}
	var k Kept
	if err := json.Unmarshal(rest, &k); err != nil {
		return Kept{}, err
	}
	if k.Lease == "" || k.Laid == nil || k.Laid.Snapshot == nil {
		return Kept{}, errors.New("it names no content laid out")
	}
	if g := k.Good; g != nil && g.Snapshot == nil {
		if g.ID != k.Laid.ID {
			return Kept{}, fmt.Errorf("its good content %s has no objects", g.ID)
		}
		g.Snapshot = k.Laid.Snapshot
	}
	if b := k.Before; b != nil && b.Snapshot == nil {
		return Kept{}, fmt.Errorf("its content before the good one, %s, has no objects", b.ID)
	}
	for _, set := range []*KeptSet{k.Laid, k.Good, k.Before} {
		if set != nil && SnapshotID(*set.Snapshot) != set.ID {
			return Kept{}, fmt.Errorf("content %q does not match the objects kept for it", set.ID)
		}
	}
	return k, nil
}

func cutPrefix(b []byte, prefix string) ([]byte, bool) {
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return nil, false
	}
	return b[len(prefix):], true
}

// Save writes k; a good content that is the one laid out is written once.
func (f KeptFile) Save(k Kept) error {
	if k.Good != nil && k.Laid != nil && k.Good.ID == k.Laid.ID {
		k.Good = &KeptSet{ID: k.Good.ID}
	}
	b, err := json.Marshal(k)
	if err != nil {
		return err
	}
	if _, err := atomicfile.Write(f.Path, append([]byte(keptVersion), b...), 0o600); err != nil {
		return fmt.Errorf("keep the one-first state beside the config: %w", err)
	}
	return nil
}
