package rollout

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/waveclient"
)

// fullObjects gives the whole ConfigMaps and Secrets Wave's hash needs: from the data the
// informers keep of the objects opted-in workloads use (wholeObjects), so that a change costs
// no read; else, as when a workload starts to use an object, from the API. A short-lived cache
// keyed by resourceVersion means an object read from the API for a thousand workloads is read
// once, not a thousand times.
type fullObjects struct {
	client waveclient.Interface
	inf    *Informers

	mu      sync.Mutex
	entries map[configref.Ref]fullEntry
}

type fullEntry struct {
	rv  string
	obj any
	at  time.Time
}

// fullTTL: a whole object read longer ago than this is not used again, and is dropped by the
// next read of any object (not on a timer: an idle controller keeps what it last read).
const fullTTL = 30 * time.Second

// errStale: the cache the decision was made on holds other content than the API server. The
// workload is reconciled again once the informer caught up (milliseconds).
var errStale = errors.New("the config cache is behind the API server; retrying")

func newFullObjects(client waveclient.Interface, inf *Informers) *fullObjects {
	return &fullObjects{client: client, inf: inf, entries: map[configref.Ref]fullEntry{}}
}

// get returns the whole object as the cache knows it, or nil when the cache says it does not
// exist. It reads with the worker's ctx, so a shutdown cancels the read.
//
// The API may already hold a newer version than the cache. If its content is the same, key
// for key, as the digests the decision was made on, it is used: a ConfigMap rewritten many
// times a second with the same data (or only new metadata) would otherwise never be read at
// the cache's resourceVersion, and the workload would be retried forever.
func (f *fullObjects) get(ctx context.Context, ref configref.Ref) (any, error) {
	if ref.Kind != configref.ConfigMap && ref.Kind != configref.Secret {
		return nil, fmt.Errorf("read %s whole: only ConfigMaps and Secrets have data to read", ref)
	}
	cached, ok := f.inf.config(ref)
	if !ok {
		return nil, nil
	}
	rv := cached.(metav1.Object).GetResourceVersion()
	if obj, ok := f.inf.whole.Get(ref, rv); ok {
		return obj, nil
	}
	return f.read(ctx, ref, cached, rv)
}

// getFromAPI is get without the whole objects kept in memory, which hold data and no other
// metadata: for a Secret's uid. The object carries the cache's resourceVersion: read accepts a
// newer version only with the same content, which then stands for the one decided on.
func (f *fullObjects) getFromAPI(ctx context.Context, ref configref.Ref) (any, error) {
	if ref.Kind != configref.ConfigMap && ref.Kind != configref.Secret {
		return nil, fmt.Errorf("read %s whole: only ConfigMaps and Secrets have data to read", ref)
	}
	cached, ok := f.inf.config(ref)
	if !ok {
		return nil, nil
	}
	rv := cached.(metav1.Object).GetResourceVersion()
	obj, err := f.read(ctx, ref, cached, rv)
	if o, ok := obj.(runtime.Object); ok && err == nil && obj.(metav1.Object).GetResourceVersion() != rv {
		c := o.DeepCopyObject()
		c.(metav1.Object).SetResourceVersion(rv)
		return c, nil
	}
	return obj, err
}

// read returns the object from the short-lived cache of API reads, else from the API.
func (f *fullObjects) read(ctx context.Context, ref configref.Ref, cached any, rv string) (any, error) {
	now := time.Now()
	f.mu.Lock()
	for r, e := range f.entries {
		if now.Sub(e.at) > fullTTL {
			delete(f.entries, r)
		}
	}
	if e, ok := f.entries[ref]; ok && e.rv == rv {
		f.mu.Unlock()
		return e.obj, nil
	}
	f.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var obj metav1.Object
	var err error
	if ref.Kind == configref.ConfigMap {
		obj, err = f.client.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	} else {
		obj, err = f.client.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, errStale
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ref, err)
	}
	if obj.GetResourceVersion() != rv && !f.sameContent(obj, cached) {
		return nil, errStale
	}
	f.mu.Lock()
	f.entries[ref] = fullEntry{rv: rv, obj: obj, at: now}
	f.mu.Unlock()
	return obj, nil
}

// sameContent reports whether a whole object read from the API has, key for key, the digests
// the cache holds.
func (f *fullObjects) sameContent(fresh metav1.Object, cached any) bool {
	digested, err := f.inf.digester.Transform(fresh) // builds a new object; fresh is not changed
	if err != nil {
		return false
	}
	return maps.Equal(confighash.KeyDigests(digested), confighash.KeyDigests(cached))
}
