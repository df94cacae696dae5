package revisionhook

import (
	"context"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/waveclient"
)

// Adopter gives each snapshot and index that a new pod reads an owner reference to the pod's
// revision object (revisions.OwnerOf), off the admission's path: the webhook answers at once,
// and the references are added a moment later, in the order pods were admitted. It patches
// only objects this feature made (the managed-by label), and each (object, owner) once.
type Adopter struct {
	Client waveclient.Interface
	// Failed, when set, counts references that could not be added.
	Failed func()
	// Dropped, when set, counts adoptions dropped with too many waiting (the revision's next
	// pod asks again; a revision whose pods are all made meanwhile keeps its snapshots
	// unowned).
	Dropped func()

	once    sync.Once
	queue   chan adoption
	mu      sync.Mutex
	done    map[string]bool
	pending map[string]bool // owners queued: the pods of one scale-up ask once
}

type adoption struct {
	owner    revisions.Owner
	revision string // the pod's: its owner must be a revision of it
	objects  []configref.Ref
}

// adoptQueue bounds the adoptions waiting; past it, one is dropped and said: the next pod of
// the same revision asks again.
const adoptQueue = 1024

// maxDone bounds what Adopter remembers having done; past it, it forgets all and checks again
// (a check is one read).
const maxDone = 16384

func (a *Adopter) init() {
	a.once.Do(func() {
		a.queue, a.done, a.pending = make(chan adoption, adoptQueue), map[string]bool{}, map[string]bool{}
	})
}

// Add asks for the objects (in owner's namespace) to live as long as owner, a revision object
// of revision. It never blocks; false says the ask was not queued (too many waiting, or one for
// the same owner waits already), for the caller to ask again later.
func (a *Adopter) Add(namespace string, owner revisions.Owner, revision string, objects []configref.Ref) bool {
	a.init()
	var todo []configref.Ref
	key := ownerKey(owner)
	a.mu.Lock()
	for _, ref := range objects {
		if !a.done[doneKey(ref, owner)] {
			todo = append(todo, ref)
		}
	}
	queued := a.pending[key]
	if len(todo) > 0 && !queued {
		a.pending[key] = true
	}
	a.mu.Unlock()
	if len(todo) == 0 {
		return true
	}
	if queued {
		return false // an ask for the owner waits, maybe for fewer objects: ask again later
	}
	select {
	case a.queue <- adoption{owner: owner, revision: revision, objects: todo}:
		return true
	default:
		a.mu.Lock()
		delete(a.pending, key)
		a.mu.Unlock()
		klog.InfoS("config revisions: too many owner references waiting; this one is left for the revision's next pod", "namespace", namespace, "owner", owner.Kind+"/"+owner.Name)
		if a.Dropped != nil {
			a.Dropped()
		}
		return false
	}
}

// Forget drops what Adopter remembers having done for objects, so that the next Add for them
// reads them again: they were made again (wave's repair of a revision), without the owner
// references the old ones had.
func (a *Adopter) Forget(objects []configref.Ref) {
	a.init()
	a.mu.Lock()
	defer a.mu.Unlock()
	for key := range a.done {
		for _, ref := range objects {
			if strings.HasPrefix(key, ref.String()+"\x00") {
				delete(a.done, key)
			}
		}
	}
}

func ownerKey(owner revisions.Owner) string {
	return owner.Kind + "/" + owner.Name + "\x00" + string(owner.UID) + "\x00" + string(owner.Parent)
}

func doneKey(ref configref.Ref, owner revisions.Owner) string {
	return ref.String() + "\x00" + ownerKey(owner)
}

// Run adds the references until ctx ends.
func (a *Adopter) Run(ctx context.Context) error {
	a.init()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ad := <-a.queue:
			a.mu.Lock()
			delete(a.pending, ownerKey(ad.owner))
			a.mu.Unlock()
			owner, err := a.verify(ctx, ad.objects[0].Namespace, ad.owner, ad.revision)
			if err != nil {
				klog.ErrorS(err, "config revisions: a pod names an owner that is no revision of its config; no owner reference added", "namespace", ad.objects[0].Namespace, "owner", ad.owner.Kind+"/"+ad.owner.Name)
				if a.Failed != nil {
					a.Failed()
				}
				continue
			}
			for _, ref := range ad.objects {
				if err := a.adopt(ctx, ref, owner); err != nil {
					klog.ErrorS(err, "config revisions: could not make a snapshot live as long as its revision; it stays until deleted by hand", "object", ref.String(), "owner", ad.owner.Kind+"/"+ad.owner.Name)
					if a.Failed != nil {
						a.Failed()
					}
					continue
				}
				a.mu.Lock()
				if len(a.done) >= maxDone {
					a.done = map[string]bool{}
				}
				a.done[doneKey(ref, ad.owner)] = true
				a.mu.Unlock()
			}
		}
	}
}

// verify reads the owner a pod names and checks it is a revision of the pod's config
// (revisions.CheckOwner): the AdmissionReview came over a port anyone who reaches it may send
// to. It returns the owner with its uid.
func (a *Adopter) verify(ctx context.Context, namespace string, owner revisions.Owner, revision string) (revisions.Owner, error) {
	var uid types.UID
	var template map[string]string
	var data []byte
	switch owner.Kind {
	case "ReplicaSet":
		rs, err := a.Client.AppsV1().ReplicaSets(namespace).Get(ctx, owner.Name, metav1.GetOptions{})
		if err != nil {
			return owner, fmt.Errorf("read replicaset %s/%s: %w", namespace, owner.Name, err)
		}
		uid, template = rs.UID, rs.Spec.Template.Annotations
	case "Job":
		job, err := a.Client.BatchV1().Jobs(namespace).Get(ctx, owner.Name, metav1.GetOptions{})
		if err != nil {
			return owner, fmt.Errorf("read job %s/%s: %w", namespace, owner.Name, err)
		}
		uid, template = job.UID, job.Spec.Template.Annotations
	case "ControllerRevision":
		cr, err := a.Client.AppsV1().ControllerRevisions(namespace).Get(ctx, owner.Name, metav1.GetOptions{})
		if err != nil {
			return owner, fmt.Errorf("read controllerrevision %s/%s: %w", namespace, owner.Name, err)
		}
		uid, data = cr.UID, cr.Data.Raw
		if c := metav1.GetControllerOfNoCopy(cr); owner.Parent != "" && (c == nil || c.UID != owner.Parent) {
			return owner, fmt.Errorf("controllerrevision %s/%s is not a revision of the set the pod names (uid %s)", namespace, owner.Name, owner.Parent)
		}
	default:
		return owner, fmt.Errorf("%s %s: not a kind of revision", owner.Kind, owner.Name)
	}
	if err := revisions.CheckOwner(owner, uid, template, data, revision, InputsHashAnnotation); err != nil {
		return owner, err
	}
	owner.UID = uid
	return owner, nil
}

func (a *Adopter) adopt(ctx context.Context, ref configref.Ref, owner revisions.Owner) error {
	var have metav1.Object
	var err error
	switch ref.Kind {
	case configref.ConfigMap:
		have, err = a.Client.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case configref.Secret:
		have, err = a.Client.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	default:
		return fmt.Errorf("%s: not a ConfigMap or Secret", ref)
	}
	if apierrors.IsNotFound(err) {
		return nil // gone: nothing to keep
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", ref, revisions.Redact(ref.Kind, err))
	}
	if have.GetLabels()[revisions.ManagedByLabel] != revisions.ManagedBy {
		return fmt.Errorf("%s is not configwave's snapshot (no %s=%s label): left as it is", ref, revisions.ManagedByLabel, revisions.ManagedBy)
	}
	patch, err := revisions.OwnerPatch(have.GetOwnerReferences(), owner)
	if err != nil || patch == nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: "configwave-wave"}
	switch ref.Kind {
	case configref.ConfigMap:
		_, err = a.Client.CoreV1().ConfigMaps(ref.Namespace).Patch(ctx, ref.Name, types.StrategicMergePatchType, patch, opts)
	case configref.Secret:
		_, err = a.Client.CoreV1().Secrets(ref.Namespace).Patch(ctx, ref.Name, types.StrategicMergePatchType, patch, opts)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("add the owner reference to %s: %w: give wave patch on %s (config/wave-revisions)", ref, revisions.Redact(ref.Kind, err), ref.Kind.Resource())
	}
	return nil
}
