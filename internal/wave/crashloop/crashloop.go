// Package crashloop finds the new pods of a config rollout that crash-loop, from the pods'
// own status, so that a config the app cannot start with fails the rollout in seconds.
//
//	f := crashloop.New(podClient, lookup, rollout.InputsHashAnnotation, wake)
//	go f.Run(ctx); f.Ask(key, time.Now()); found, ok := f.Of(key, template)
package crashloop

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/wave/waveclient"
	"github.com/configwave/configwave/internal/wave/workload"
)

// Finder finds the new pods of a config rollout that crash-loop, so that a config the app
// cannot start with fails the rollout in seconds, not when the Deployment's progress deadline
// passes (10 minutes by default) or never (StatefulSets, DaemonSets). It lists pods only of
// workloads under a config rollout, on a client with a rate limit of its own, and off the
// workers, so that it never slows a rollout; with a thousand rollouts at once, each workload's
// pods are simply looked at less often.
type Finder struct {
	client     waveclient.Interface
	lookup     Lookup
	annotation string           // the template annotation that tells one rollout's pods from another's
	wake       func(key string) // the controller looks at the workload again
	queue      workqueue.TypedInterface[string]

	noAccessOnce sync.Once // said once: wave may not list the revisions

	mu    sync.Mutex
	found map[string]Found     // workload key -> the crash loop, on the template it was seen on
	asked map[string]time.Time // workload key -> when its pods were last asked for
}

// Lookup returns a workload from the controller's cache, by its work queue key.
type Lookup func(key string) (workload.Workload, bool)

// Found is a crash loop among the pods of one rollout.
type Found struct {
	template string // the template's annotation: which rollout's pods
	Reason   string // names the pod, the container and the restarts: never a message
	At       time.Time
}

// CheckEvery is how often the pods of a workload under a config rollout are looked at;
// kubelet reports CrashLoopBackOff after the second failed start (about 10 s).
const CheckEvery = 10 * time.Second

// New finds crash loops with client (a rate limit of its own); annotation is the template
// annotation that changes with each rollout and that the pods carry; wake is called when one
// is found.
func New(client waveclient.Interface, lookup Lookup, annotation string, wake func(string)) *Finder {
	return &Finder{client: client, lookup: lookup, annotation: annotation, wake: wake, queue: workqueue.NewTyped[string](),
		found: map[string]Found{}, asked: map[string]time.Time{}}
}

// Ask queues a look at the pods of the workload key, unless one was asked for recently.
func (c *Finder) Ask(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.asked[key]) < CheckEvery {
		return
	}
	c.asked[key] = now
	c.queue.Add(key)
}

// Of returns the crash loop found among the pods of template, if any.
func (c *Finder) Of(key, template string) (Found, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, ok := c.found[key]
	return cl, ok && cl.template == template
}

// Forget drops what is known of the workload key.
func (c *Finder) Forget(key string) {
	c.mu.Lock()
	delete(c.found, key)
	delete(c.asked, key)
	c.mu.Unlock()
}

// Run looks at pods until ctx ends.
func (c *Finder) Run(ctx context.Context) {
	go func() { <-ctx.Done(); c.queue.ShutDown() }()
	for {
		key, shutdown := c.queue.Get()
		if shutdown {
			return
		}
		if err := c.check(ctx, key); err != nil && ctx.Err() == nil {
			klog.V(2).InfoS("could not look at the pods of a rollout; looking again later", "workload", key, "err", err)
		}
		c.queue.Done(key)
	}
}

func (c *Finder) check(ctx context.Context, key string) error {
	w, ok := c.lookup(key)
	if !ok || w.Selector == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(w.Selector)
	if err != nil || sel.Empty() {
		return nil // an empty selector would list every pod of the namespace
	}
	if !w.Progress.Observed {
		return nil // its controller has not made the newest revision yet: asked again later
	}
	template := w.Template.Annotations[c.annotation]
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	revs, listed, err := c.revisions(ctx, w, sel)
	if err != nil {
		return err
	}
	// ResourceVersion "0": served from the API server's watch cache, not etcd.
	pods, err := c.client.CoreV1().Pods(w.Meta.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String(), ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("list the pods of %s: %w", w, err)
	}
	judged := controlledBy(w, pods.Items)
	if listed {
		judged = ofNewestRevision(w, revs, judged)
	}
	reason := crashLooping(judged, c.annotation, template)
	if reason == "" {
		return nil
	}
	c.mu.Lock()
	prev, had := c.found[key]
	if !had || prev.template != template {
		c.found[key] = Found{template: template, Reason: reason, At: time.Now()}
	}
	c.mu.Unlock()
	if !had || prev.template != template {
		c.wake(key)
	}
	return nil
}

// revisions lists w's ReplicaSets or ControllerRevisions, so that only the newest revision's
// pods are judged; listed is false where wave may not list them (no
// config/wave-revisions or revisions.enabled): then every pod of the current config counts, as
// before, and the automatic undo, which needs that access, is not made anyway.
func (c *Finder) revisions(ctx context.Context, w workload.Workload, sel labels.Selector) (revs Revisions, listed bool, err error) {
	// A consistent read, not the watch cache's ("0"), which may lag: the workload was seen
	// Observed, so its controller had made the newest revision before, and a list that lacks
	// it would take the revision before (the same config, an image since fixed) for the newest.
	opts := metav1.ListOptions{LabelSelector: sel.String()}
	ns := w.Meta.Namespace
	switch w.Kind {
	case workload.Deployment, workload.ArgoRollout:
		list, err := c.client.AppsV1().ReplicaSets(ns).List(ctx, opts)
		if apierrors.IsForbidden(err) {
			c.noAccessOnce.Do(func() {
				klog.InfoS("crash loops judged among every pod of the new config, not only its newest ReplicaSet's: wave may not list ReplicaSets", "err", err)
			})
			return revs, false, nil
		}
		if err != nil {
			return revs, false, fmt.Errorf("list the ReplicaSets of %s: %w", w, err)
		}
		revs.ReplicaSets = list.Items
	case workload.StatefulSet, workload.DaemonSet:
		list, err := c.client.AppsV1().ControllerRevisions(ns).List(ctx, opts)
		if apierrors.IsForbidden(err) {
			c.noAccessOnce.Do(func() {
				klog.InfoS("crash loops judged among every pod of the new config, not only its newest revision's: wave may not list ControllerRevisions", "err", err)
			})
			return revs, false, nil
		}
		if err != nil {
			return revs, false, fmt.Errorf("list the ControllerRevisions of %s: %w", w, err)
		}
		revs.ControllerRevisions = list.Items
	default:
		return revs, false, nil
	}
	return revs, true, nil
}

// controlledBy keeps the pods that w's own controller made: a StatefulSet's or DaemonSet's by
// its UID, a Deployment's or Rollout's by a controlling ReplicaSet named after it and the pod's
// template hash. A pod that someone who may only create pods made with the workload's labels
// and hash annotation is not judged: it cannot make wave undo a rollout.
func controlledBy(w workload.Workload, pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		owner := metav1.GetControllerOfNoCopy(&p)
		if owner == nil {
			continue
		}
		switch w.Kind {
		case workload.StatefulSet, workload.DaemonSet:
			if owner.Kind != string(w.Kind) || owner.UID != w.Meta.UID {
				continue
			}
		case workload.Deployment, workload.ArgoRollout:
			hash := cmp.Or(p.Labels["pod-template-hash"], p.Labels["rollouts-pod-template-hash"])
			if owner.Kind != "ReplicaSet" || hash == "" || owner.Name != w.Meta.Name+"-"+hash {
				continue
			}
		default:
			if owner.Kind != "Job" { // a CronJob's Jobs
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

// crashLooping names the first pod of the rollout's template (by wave's own template
// annotation) with a container in CrashLoopBackOff, or "". Only names and counts: a
// container's last message may be the app's own output, and that may hold config.
func crashLooping(pods []corev1.Pod, annotation, template string) string {
	for _, p := range pods {
		if template == "" || p.Annotations[annotation] != template || p.DeletionTimestamp != nil {
			continue
		}
		for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
			for _, cs := range statuses {
				if cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" {
					return fmt.Sprintf("pod %s of the new config: container %q is in CrashLoopBackOff (%d restarts)", p.Name, cs.Name, cs.RestartCount)
				}
			}
		}
	}
	return ""
}
