package rollout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/refs"
)

// fullObjects reads the few whole ConfigMaps and Secrets Wave's hash needs, from the API, only
// when a workload's inputs changed. A short-lived cache keyed by resourceVersion means a
// ConfigMap shared by a thousand workloads is read once per change, not a thousand times.
type fullObjects struct {
	client kubernetes.Interface
	inf    *Informers

	mu      sync.Mutex
	entries map[refs.ObjectRef]fullEntry
}

type fullEntry struct {
	rv  string
	obj any
	at  time.Time
}

// fullTTL bounds how long a whole object stays in memory after it was read.
const fullTTL = 30 * time.Second

// errStale: the API server has a newer version than the cache the decision was made on. The
// workload is reconciled again once the informer caught up (milliseconds).
var errStale = errors.New("the config cache is behind the API server; retrying")

func newFullObjects(client kubernetes.Interface, inf *Informers) *fullObjects {
	return &fullObjects{client: client, inf: inf, entries: map[refs.ObjectRef]fullEntry{}}
}

// get returns the whole object at the resourceVersion the cache holds, or nil when the cache
// says it does not exist.
func (f *fullObjects) get(ref refs.ObjectRef) (any, error) {
	cached, ok := f.inf.config(ref)
	if !ok {
		return nil, nil
	}
	rv := cached.(metav1.Object).GetResourceVersion()
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

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var obj metav1.Object
	var err error
	if ref.Kind == refs.ConfigMap {
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
	if obj.GetResourceVersion() != rv {
		return nil, errStale
	}
	f.mu.Lock()
	f.entries[ref] = fullEntry{rv: rv, obj: obj, at: now}
	f.mu.Unlock()
	return obj, nil
}
