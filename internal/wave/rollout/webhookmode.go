package rollout

import (
	"context"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/csi"
)

// ChangeHook is Stakater Reloader's --webhook-url mode: instead of rolling workloads, every
// change of a ConfigMap's or Secret's data in the watched namespaces is told to a webhook, and
// no workload is ever written. Reloader's controller filters apply, as in its webhook mode:
// the kinds and namespaces it ignores, its label selectors, and creations and deletions only
// with --reload-on-create and --reload-on-delete; the objects' ignore annotation does not,
// since that mode never asks Reloader's ShouldReload. With --enable-csi-integration, a
// SecretProviderClass whose pods' mounted versions changed (its SecretProviderClassPodStatus
// updated) is told too, as Reloader tells it. Only the leader tells.
type ChangeHook struct {
	Informers *Informers
	Reloader  StakaterOptions
	// Send is told one line naming the object; the webhook's body is Reloader's, whatever
	// the line (alert.StakaterWebhook).
	Send    func(text string)
	leading atomic.Bool
}

// Register adds the hook to the config informers. Call it before they start.
func (h *ChangeHook) Register() error {
	for _, inf := range h.Informers.csiStatuses {
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, obj any) { h.tell(statusChange(old, obj, h.Reloader, h.Informers.namespaceLabels)) },
		})
		if err != nil {
			return err
		}
	}
	for kind, list := range h.Informers.configs {
		if kind == configref.SecretProviderClass {
			continue // the classes themselves: their pods' statuses tell (above)
		}
		for _, inf := range list {
			_, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
				AddFunc: func(obj any, initialList bool) {
					if !initialList {
						h.tell(hookChange(kind, "create", nil, obj, h.Reloader, h.Informers.namespaceLabels))
					}
				},
				UpdateFunc: func(old, obj any) {
					h.tell(hookChange(kind, "update", old, obj, h.Reloader, h.Informers.namespaceLabels))
				},
				DeleteFunc: func(obj any) { h.tell(hookChange(kind, "delete", nil, obj, h.Reloader, h.Informers.namespaceLabels)) },
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (h *ChangeHook) tell(ref configref.Ref, event string) {
	if event == "" || !h.leading.Load() {
		return
	}
	klog.InfoS("config changed; telling the webhook (Reloader's --webhook-url: nothing rolls)", "object", ref.String(), "event", event)
	h.Send(ref.String() + " " + event)
}

// Run tells the webhook of changes until ctx ends: the leader's work in this mode.
func (h *ChangeHook) Run(ctx context.Context) error {
	h.leading.Store(true)
	defer h.leading.Store(false)
	<-ctx.Done()
	return nil
}

// Leading reports whether the hook tells now.
func (h *ChangeHook) Leading() bool { return h.leading.Load() }

// hookChange decides whether a notification about a config object is a change the webhook is
// told of, as Reloader decides: which object, and "update", "create" or "delete"; "" for
// none.
func hookChange(kind configref.Kind, event string, old, obj any, o StakaterOptions, nsLabels func(string) map[string]string) (configref.Ref, string) {
	m, ok := metaOf(obj)
	if !ok {
		return configref.Ref{}, ""
	}
	ref := configref.Ref{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()}
	switch {
	case o.ignores(kind), o.Namespaces[ref.Namespace]:
		return ref, ""
	case o.ResourceSelector != nil && !o.ResourceSelector.Matches(labels.Set(m.GetLabels())):
		return ref, ""
	case o.NamespaceSelector != nil && !o.NamespaceSelector.Matches(labels.Set(nsLabels(ref.Namespace))):
		return ref, ""
	}
	switch event {
	case "create":
		if !o.RollOnCreate {
			return ref, ""
		}
	case "delete":
		if !o.RollOnDelete {
			return ref, ""
		}
	case "update":
		before, ok1 := old.(*confighash.Digested)
		after, ok2 := obj.(*confighash.Digested)
		if ok1 && ok2 && before.SameKeys(after) {
			return ref, "" // metadata only: Reloader compares the data's hash
		}
	}
	return ref, event
}

// statusChange decides whether an update of a SecretProviderClassPodStatus is told, as Reloader
// tells it: when the versions its pod mounted changed (Reloader's hash of them), in a namespace
// its filters keep. A status's coming and going is never told.
func statusChange(old, obj any, o StakaterOptions, nsLabels func(string) map[string]string) (configref.Ref, string) {
	before, ok1 := old.(*csi.Status)
	after, ok2 := obj.(*csi.Status)
	if !ok1 || !ok2 || after.Class == "" || before.Hash == after.Hash && before.Class == after.Class {
		return configref.Ref{}, ""
	}
	ref := after.Ref()
	switch {
	case o.Namespaces[ref.Namespace]:
		return ref, ""
	case o.NamespaceSelector != nil && !o.NamespaceSelector.Matches(labels.Set(nsLabels(ref.Namespace))):
		return ref, ""
	}
	return ref, "update"
}
