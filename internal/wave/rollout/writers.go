package rollout

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/informer"
	"github.com/configwave/configwave/internal/wave/sourceready"
)

// bySecret indexes the writers of Secrets (sourceready) by the Secret each writes.
const bySecret = "bySecret"

func writerSecretIndex(obj any) ([]string, error) {
	if w, ok := obj.(*sourceready.Writer); ok && w.SecretKey() != "" {
		return []string{w.SecretKey()}, nil
	}
	return nil, nil
}

// WatchSecretWriters follows the objects of one kind of Secret writer (cert-manager's
// Certificates, External Secrets' ExternalSecrets) at version gvr in namespaces (of those wave
// watches: metav1.NamespaceAll for all), so that a rollout of a change of a Secret they write
// waits until their status says it is done (sourceready). Call it, where the kind is served
// and wave may list and watch it there, before Start.
func (inf *Informers) WatchSecretWriters(client dynamic.Interface, kind sourceready.WriterKind, gvr schema.GroupVersionResource, namespaces []string) {
	for _, ns := range namespaces {
		indexers := informer.NamespaceIndex()
		indexers[bySecret] = writerSecretIndex
		writers := informer.New[*unstructured.UnstructuredList](client.Resource(gvr).Namespace(ns), client, &unstructured.Unstructured{},
			informer.Options{Indexers: indexers, Transform: sourceready.Transform(kind)})
		inf.writers = append(inf.writers, writers)
		inf.all = append(inf.all, writers)
	}
}

// writersNotDone says which writers of a Secret say it is not done yet, and why, joined with
// ", and ";
// "" when none does (or none is followed).
func (inf *Informers) writersNotDone(ref configref.Ref) string {
	var out []string
	for _, i := range inf.writers {
		objs, _ := i.GetIndexer().ByIndex(bySecret, ref.Namespace+"/"+ref.Name)
		for _, obj := range objs {
			if w, ok := obj.(*sourceready.Writer); ok && w.NotDone != "" {
				out = append(out, w.Kind.Lower()+"/"+w.Name+" says "+w.NotDone)
			}
		}
	}
	slices.Sort(out) // the index's order is a map's: the Event and the record say it alike every time
	return strings.Join(out, ", and ")
}

// watchSecretWriters looks again at the users of a Secret whenever one of its writers' verdict
// changes: its status says done, or no longer, or it writes another Secret now.
func (c *Controller) watchSecretWriters() error {
	secretOf := func(obj any) (configref.Ref, string, bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		w, ok := obj.(*sourceready.Writer)
		if !ok || w.Secret == "" {
			return configref.Ref{}, "", false
		}
		return configref.Ref{Kind: configref.Secret, Namespace: w.Namespace, Name: w.Secret}, w.NotDone, true
	}
	for _, i := range c.Informers.writers {
		if _, err := i.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initialList bool) {
				logUnreadable(nil, obj)
				if ref, _, ok := secretOf(obj); ok && !initialList {
					c.enqueueRef(ref)
				}
			},
			UpdateFunc: func(old, obj any) {
				logUnreadable(old, obj)
				was, wasNotDone, ok1 := secretOf(old)
				now, notDone, ok2 := secretOf(obj)
				if ok1 && ok2 && was == now && wasNotDone == notDone {
					return
				}
				if ok1 {
					c.enqueueRef(was)
				}
				if ok2 && (!ok1 || was != now) {
					c.enqueueRef(now)
				}
			},
			DeleteFunc: func(obj any) {
				if ref, _, ok := secretOf(obj); ok {
					c.enqueueRef(ref)
				}
			},
		}); err != nil {
			return err
		}
	}
	return nil
}

// logUnreadable says once, when a writer becomes so, which of its fields wave could not read
// (it then does not wait for it): never the field's value.
func logUnreadable(old, obj any) {
	w, ok := obj.(*sourceready.Writer)
	if !ok || w.UnreadableField == "" {
		return
	}
	if o, ok := old.(*sourceready.Writer); ok && o.UnreadableField == w.UnreadableField {
		return
	}
	klog.InfoS("a Secret's writer has a field wave cannot read, so a change of that Secret does not wait for it: fix the field (is it what the CRD says?)",
		"kind", w.Kind, "object", klog.KRef(w.Namespace, w.Name), "field", w.UnreadableField)
}
