package revisionhook

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/waveclient"
)

// APILook reads from the API server. An index and a snapshot are used only when they are
// wave's (revisions.Ours: immutable, labelled as wave's, annotated with the content their name
// gives): a ConfigMap that someone who may write ConfigMaps made under an index's or a
// snapshot's name points no pod anywhere. An index is immutable and named from its content, so
// one read is kept for a while: a scale-up of a hundred pods reads it once.
type APILook struct {
	Core waveclient.CoreV1

	mu      sync.Mutex
	indexes map[string]keptIndex
	seen    map[configref.Ref]time.Time // snapshots the API server answered with, and when
}

type keptIndex struct {
	data map[string]string
	at   time.Time
}

// Kept reads are bounded by number and by time: past maxKept entries, only the expired ones
// make room, so that whoever makes many indexes cannot flush what the webhook relies on, only
// keep it from keeping more. A snapshot is immutable and named by its content, so one seen is
// taken as there for seenFor, without another read.
const (
	maxKept   = 1024
	indexFor  = 10 * time.Minute
	seenFor   = time.Minute
	maxSeen   = 4096
	notOurs   = "is not a snapshot index wave made (it must be immutable, labelled app.kubernetes.io/managed-by: configwave, and annotated configwave.io/content with its revision): delete it; the next change of the workload's config makes the revision's again"
	notOursSn = "is not a snapshot wave made"
)

func (l *APILook) Index(ctx context.Context, namespace, name string) (map[string]string, bool, error) {
	key := namespace + "/" + name
	now := time.Now()
	l.mu.Lock()
	kept, ok := l.indexes[key]
	l.mu.Unlock()
	if ok && now.Sub(kept.at) < indexFor {
		return kept.data, true, nil
	}
	cm, err := l.Core.ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if !revisions.Ours(cm, strings.TrimPrefix(name, "configwave-")) {
		return nil, true, fmt.Errorf("configmap %s/%s %s", namespace, name, notOurs)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.indexes == nil {
		l.indexes = map[string]keptIndex{}
	}
	if len(l.indexes) >= maxKept {
		for k, v := range l.indexes {
			if now.Sub(v.at) >= indexFor {
				delete(l.indexes, k)
			}
		}
	}
	if len(l.indexes) < maxKept {
		l.indexes[key] = keptIndex{data: cm.Data, at: now}
	}
	return cm.Data, true, nil
}

// Exists says a snapshot is there only when the API server has answered with it, and it is
// wave's: a pod given a snapshot that is gone waits in ContainerCreating for a volume that
// never comes, so on a timeout or any other error the pod reads that source live instead, and
// the Event says so.
func (l *APILook) Exists(ctx context.Context, ref configref.Ref) bool {
	l.mu.Lock()
	at, ok := l.seen[ref]
	l.mu.Unlock()
	if ok && time.Since(at) < seenFor {
		return true
	}
	var obj metav1.Object
	var err error
	switch ref.Kind {
	case configref.ConfigMap:
		obj, err = l.Core.ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case configref.Secret:
		obj, err = l.Core.Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	default:
		return false
	}
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		klog.InfoS("warning: cannot tell whether a snapshot is there; the pod reads its source live", "snapshot", ref.String(), "err", err.Error())
		return false
	case err != nil:
		return false
	case !revisions.Ours(obj, revisions.SnapshotContent(ref.Name)):
		klog.InfoS("warning: an object under a snapshot's name "+notOursSn+"; the pod reads its source live", "object", ref.String())
		return false
	}
	l.mu.Lock()
	if l.seen == nil || len(l.seen) >= maxSeen {
		l.seen = map[configref.Ref]time.Time{}
	}
	l.seen[ref] = time.Now()
	l.mu.Unlock()
	return true
}

// EnforcesMountableSecrets says whether the ServiceAccount carries
// kubernetes.io/enforce-mountable-secrets: "true". One that cannot be read is taken as not:
// the API server then admits the pod or says why not itself.
func (l *APILook) EnforcesMountableSecrets(ctx context.Context, namespace, serviceAccount string) bool {
	sa, err := l.Core.ServiceAccounts(namespace).Get(ctx, serviceAccount, metav1.GetOptions{})
	return err == nil && sa.Annotations[revisions.EnforceMountableSecretsAnnotation] == "true"
}
