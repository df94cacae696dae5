package revisions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/kube/refusal"
	"github.com/configwave/configwave/internal/wave/confighash"
)

// API is what Ensure needs of the API server: a source read whole (wave's caches keep digests
// only), and a snapshot or an index created.
type API interface {
	Get(ctx context.Context, ref configref.Ref) (metav1.Object, error)
	Create(ctx context.Context, kind configref.Kind, obj metav1.Object) (metav1.Object, error)
}

// Source is one source a revision uses, at the resourceVersion the decision to roll saw.
type Source struct {
	Ref             configref.Ref
	ResourceVersion string
}

// ErrSourceChanged: a source was written after the decision to roll was made; the snapshot
// would not hold what the revision records, so nothing is rolled and the next look decides
// again on the new content.
var ErrSourceChanged = errors.New("changed since the decision to roll")

// Ensure makes the snapshots of sources and the index of the revision whose pods carry
// inputsHash, before the template is written, so that the first pod of the revision finds
// them. Each is created once and never written again: one that exists already is checked to
// be this feature's, with the same content. dg is the Digester of wave's caches, so a
// snapshot's name tells no more than the inputs record does. It returns the snapshots, for
// the index and for owner references.
func Ensure(ctx context.Context, api API, dg confighash.Digester, namespace, inputsHash string, sources []Source) (Snapshots, error) {
	index := IndexName(inputsHash)
	if index == "" {
		return nil, fmt.Errorf("revision %q: the inputs hash cannot name an index", inputsHash)
	}
	if len(sources) == 0 {
		return Snapshots{}, nil // a revision of no source needs no index
	}
	dg.Whole = nil // these reads are not the informers': nothing of them is kept whole
	snaps := make(Snapshots, len(sources))
	for _, s := range sources {
		if s.Ref.Namespace != namespace {
			// Only an extra-* annotation names another namespace's object, and pods never read it.
			return nil, fmt.Errorf("%s: a pod in %s cannot read it, so it has no snapshot", s.Ref, namespace)
		}
		obj, err := api.Get(ctx, s.Ref)
		if err != nil {
			return nil, fmt.Errorf("read %s to snapshot it: %w", s.Ref, Redact(s.Ref.Kind, err))
		}
		if obj.GetResourceVersion() != s.ResourceVersion {
			return nil, fmt.Errorf("%s: %w (resourceVersion %s, decided on %s)", s.Ref, ErrSourceChanged, obj.GetResourceVersion(), s.ResourceVersion)
		}
		digested, err := dg.Transform(obj)
		if err != nil {
			return nil, fmt.Errorf("digest %s: %w", s.Ref, err)
		}
		secretType := ""
		if sec, ok := obj.(*corev1.Secret); ok {
			secretType = string(sec.Type)
			if !copyable(sec.Type) {
				continue // the API server makes these itself: the pods read it live
			}
		}
		id := ContentID(confighash.KeyDigests(digested), secretType)
		snap, err := SnapshotOf(obj, id)
		if err != nil {
			return nil, err
		}
		if err := create(ctx, api, s.Ref.Kind, snap, id); err != nil {
			return nil, err
		}
		snaps[s.Ref] = snap.GetName()
	}
	immutable := true
	idx := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: index, Namespace: namespace,
			Labels:      map[string]string{ManagedByLabel: ManagedBy},
			Annotations: map[string]string{ContentAnnotation: inputsHash}},
		Immutable: &immutable,
		Data:      IndexData(snaps),
	}
	if err := create(ctx, api, configref.ConfigMap, idx, inputsHash); err != nil {
		return nil, err
	}
	return snaps, nil
}

// create makes obj, or finds it made: by this feature (the managed-by label), for the same
// content (the content annotation). Anything else under that name is an error that says what
// to do, never overwritten. The API server's own message is repeated for ConfigMaps only: for
// a Secret, a webhook's or a validation's text may quote the value.
func create(ctx context.Context, api API, kind configref.Kind, obj metav1.Object, content string) error {
	ref := configref.Ref{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	_, err := api.Create(ctx, kind, obj)
	if err == nil {
		return nil
	}
	if apierrors.IsAlreadyExists(err) {
		have, err := api.Get(ctx, ref)
		if err != nil {
			return fmt.Errorf("read %s, which exists already: %w", ref, Redact(kind, err))
		}
		// Its labels alone prove nothing: whoever may create ConfigMaps in the namespace may
		// write them. It must hold, immutably, exactly what wave would have written.
		if !Ours(have, content) || !sameContent(have, obj) {
			return fmt.Errorf("%s exists and is not configwave's snapshot of this content: delete it (kubectl -n %s delete %s %s), so that wave can keep the revision's config under that name", ref, ref.Namespace, kind.Lower(), ref.Name)
		}
		return nil
	}
	if apierrors.IsForbidden(err) {
		if r := refusal.Of(err); r.Quota {
			return fmt.Errorf("create %s: refused by %s: %w: raise the quota's count/%s (kubectl -n %s describe resourcequota), or turn revisions off for the workload (%s: \"false\")",
				ref, r.By, Redact(kind, err), kind.Resource(), ref.Namespace, OptInAnnotation)
		}
		if r := refusal.Of(err); !strings.Contains(err.Error(), "cannot create resource") { // not RBAC's wording
			return fmt.Errorf("create %s: refused by %s: %w: have it admit wave's snapshots (labelled %s=%s), or turn revisions off for the workload (%s: \"false\")",
				ref, r.By, Redact(kind, err), ManagedByLabel, ManagedBy, OptInAnnotation)
		}
		return fmt.Errorf("create %s: %w: give wave's ServiceAccount create on %s in %s (a Role rule: apiGroups [\"\"], resources [%s], verbs [create])",
			ref, Redact(kind, err), kind.Resource(), ref.Namespace, kind.Resource())
	}
	return fmt.Errorf("create %s: %w", ref, Redact(kind, err))
}

// Ours says whether obj is a snapshot or an index that wave made for content (a snapshot's
// content ID, the ID its name ends with; an index's inputs hash): immutable, labelled
// app.kubernetes.io/managed-by: configwave, and annotated with that content. The one test of
// "is this ours", used where wave finds one under its name (create), where the webhook points
// a pod at one, and where an undo checks that a revision's config is there: a ConfigMap that
// anyone who may write ConfigMaps made under the name is none of them.
func Ours(obj metav1.Object, content string) bool {
	var immutable *bool
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		immutable = o.Immutable
	case *corev1.Secret:
		immutable = o.Immutable
	}
	return immutable != nil && *immutable && content != "" &&
		obj.GetLabels()[ManagedByLabel] == ManagedBy && obj.GetAnnotations()[ContentAnnotation] == content
}

// SnapshotContent is the content ID a snapshot's name ends with ("" for a name that has none).
func SnapshotContent(name string) string {
	i := strings.LastIndex(name, "-")
	if i < 0 {
		return ""
	}
	return name[i+1:]
}

// copyable tells whether a Secret of this type can be created as a copy: a ServiceAccount's
// token is made by the API server for the account it names, and a copy would be refused; a
// bootstrap token's copy would be one more token (the admission policy refuses both).
func copyable(t corev1.SecretType) bool {
	return t != corev1.SecretTypeServiceAccountToken && t != corev1.SecretTypeBootstrapToken
}

// sameContent: have is immutable and holds want's data, binary data and type, byte for byte.
func sameContent(have, want metav1.Object) bool {
	switch h := have.(type) {
	case *corev1.ConfigMap:
		w, ok := want.(*corev1.ConfigMap)
		return ok && h.Immutable != nil && *h.Immutable && maps.Equal(h.Data, w.Data) && maps.EqualFunc(h.BinaryData, w.BinaryData, bytes.Equal)
	case *corev1.Secret:
		w, ok := want.(*corev1.Secret)
		return ok && h.Immutable != nil && *h.Immutable && h.Type == w.Type && maps.EqualFunc(h.Data, w.Data, bytes.Equal)
	}
	return false
}

// Redact keeps an API error of a Secret's write to its reason and code, still matched by
// apierrors and errors.Is through Unwrap: a webhook's or a validation's text may quote the value.
func Redact(kind configref.Kind, err error) error {
	if kind != configref.Secret {
		return err
	}
	return redacted{err}
}

type redacted struct{ err error }

func (r redacted) Error() string {
	return fmt.Sprintf("%s (HTTP %d; the API server's message is not repeated for a Secret)", apierrors.ReasonForError(r.err), codeOf(r.err))
}
func (r redacted) Unwrap() error { return r.err }

func codeOf(err error) int32 {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Code
	}
	return 0
}
