package rollout

import (
	"context"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/revisionhook"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/workload"
)

// livePods finds the pods of a config revision that read a source live although the revision
// has a snapshot of it, because wave's webhook did not answer when they were made (wave down,
// or the call failed: failurePolicy Ignore admits them unchanged). Nobody can say so at that
// moment, so the leader looks once its caches synced and every Config.LivePodsEvery, and says
// it once per pod in a ConfigRevisionLive Event on its workload.
type livePods struct {
	told map[types.UID]bool // pods already said, of the last look
}

// readsLive is the pure part: the sources pod names by their live names although snaps (its
// revision's index) holds a snapshot of each, as kind/name; nil when it reads its snapshots.
func readsLive(pod *corev1.Pod, snaps revisions.Snapshots) []string {
	seen := map[configref.Ref]bool{}
	var out []string
	for _, ref := range revisions.SourcesOf(pod.Namespace, &pod.Spec) {
		if _, ok := snaps[ref]; ok && !seen[ref] {
			seen[ref] = true
			out = append(out, strings.ToLower(string(ref.Kind))+"/"+ref.Name)
		}
	}
	sort.Strings(out)
	return out
}

// lookForLivePods lists the pods of the namespaces wave watches, page by page, and says once
// per pod which ones run a revision on live objects.
func (c *Controller) lookForLivePods(ctx context.Context) {
	if c.live.told == nil {
		c.live.told = map[types.UID]bool{}
	}
	indexes := map[string]revisions.Snapshots{} // namespace/inputs hash -> its index; nil: none
	seen := map[types.UID]bool{}
	for ns := range c.Informers.watched {
		opts := metav1.ListOptions{Limit: 500}
		for {
			list, err := c.Client.CoreV1().Pods(ns).List(ctx, opts)
			if err != nil {
				klog.V(2).InfoS("could not look for pods that run a revision on live objects", "namespace", ns, "err", err)
				break
			}
			for i := range list.Items {
				pod := &list.Items[i]
				hash := pod.Annotations[InputsHashAnnotation]
				if pod.DeletionTimestamp != nil || !revisions.IsRevision(hash) {
					continue
				}
				seen[pod.UID] = true
				if c.live.told[pod.UID] {
					continue
				}
				key := pod.Namespace + "/" + hash
				snaps, ok := indexes[key]
				if !ok {
					snaps = c.readIndex(ctx, pod.Namespace, hash)
					indexes[key] = snaps
				}
				live := readsLive(pod, snaps)
				if len(live) == 0 {
					continue
				}
				c.live.told[pod.UID] = true
				kind, name := revisionhook.WorkloadOf(pod)
				w, ok := c.Informers.Workload(workload.Kind(kind), pod.Namespace, name)
				if !ok {
					continue
				}
				c.Recorder.Eventf(w.Object, corev1.EventTypeWarning, "ConfigRevisionLive",
					"pod %s of revision %s reads %s live, not its snapshots: wave's webhook did not answer when the pod was made (wave down, or the call failed; failurePolicy Ignore admitted it), or a snapshot was gone then. It keeps the live config until it is replaced (kubectl rollout restart)",
					pod.Name, hash, strings.Join(live, ", "))
			}
			if list.Continue == "" {
				break
			}
			opts.Continue = list.Continue
		}
	}
	for uid := range c.live.told {
		if !seen[uid] {
			delete(c.live.told, uid)
		}
	}
}

func (c *Controller) readIndex(ctx context.Context, namespace, hash string) revisions.Snapshots {
	cm, err := c.Client.CoreV1().ConfigMaps(namespace).Get(ctx, revisions.IndexName(hash), metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			klog.V(2).InfoS("could not read a revision's index", "namespace", namespace, "revision", hash, "err", err)
		}
		return nil
	}
	snaps, err := revisions.ParseIndex(namespace, cm.Data)
	if err != nil {
		return nil
	}
	return snaps
}

// watchLivePods looks after the caches synced, then every period.
func (c *Controller) watchLivePods(ctx context.Context, period time.Duration) {
	for {
		c.lookForLivePods(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}
