package revisionhook

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/waveclient"
)

// APILook reads from the API server. An index is immutable and named from its content, so
// one read is kept (up to maxIndexes): a scale-up of a hundred pods reads it once.
type APILook struct {
	Core waveclient.CoreV1

	mu      sync.Mutex
	indexes map[string]map[string]string
	seen    map[configref.Ref]time.Time // snapshots the API server answered with, and when
}

const maxIndexes = 1024

// A snapshot is immutable and named by its content, so one the API server answered with is
// taken as there for seenFor, without another read: a scale-up of a hundred pods of one
// revision reads each snapshot once, not a hundred times. Bounded: past maxSeen all are
// forgotten.
const (
	seenFor = time.Minute
	maxSeen = 4096
)

func (l *APILook) Index(ctx context.Context, namespace, name string) (map[string]string, bool, error) {
	key := namespace + "/" + name
	l.mu.Lock()
	data, ok := l.indexes[key]
	l.mu.Unlock()
	if ok {
		return data, true, nil
	}
	cm, err := l.Core.ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if cm.Immutable == nil || !*cm.Immutable {
		return cm.Data, true, nil // not wave's: read, never kept (ParseIndex judges it)
	}
	l.mu.Lock()
	if l.indexes == nil || len(l.indexes) >= maxIndexes {
		l.indexes = map[string]map[string]string{}
	}
	l.indexes[key] = cm.Data
	l.mu.Unlock()
	return cm.Data, true, nil
}

// Exists says a snapshot is there only when the API server has answered with it: a pod given
// a snapshot that is gone waits in ContainerCreating for a volume that never comes, so on a
// timeout or any other error the pod reads that source live instead, and the Event says so.
func (l *APILook) Exists(ctx context.Context, ref configref.Ref) bool {
	l.mu.Lock()
	at, ok := l.seen[ref]
	l.mu.Unlock()
	if ok && time.Since(at) < seenFor {
		return true
	}
	var err error
	switch ref.Kind {
	case configref.ConfigMap:
		_, err = l.Core.ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case configref.Secret:
		_, err = l.Core.Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	default:
		return false
	}
	if err != nil && !apierrors.IsNotFound(err) {
		klog.InfoS("warning: cannot tell whether a snapshot is there; the pod reads its source live", "snapshot", ref.String(), "err", err.Error())
	}
	if err == nil {
		l.mu.Lock()
		if l.seen == nil || len(l.seen) >= maxSeen {
			l.seen = map[configref.Ref]time.Time{}
		}
		l.seen[ref] = time.Now()
		l.mu.Unlock()
	}
	return err == nil
}

// EnforcesMountableSecrets says whether the ServiceAccount carries
// kubernetes.io/enforce-mountable-secrets: "true". One that cannot be read is taken as not:
// the API server then admits the pod or says why not itself.
func (l *APILook) EnforcesMountableSecrets(ctx context.Context, namespace, serviceAccount string) bool {
	sa, err := l.Core.ServiceAccounts(namespace).Get(ctx, serviceAccount, metav1.GetOptions{})
	return err == nil && sa.Annotations[revisions.EnforceMountableSecretsAnnotation] == "true"
}
