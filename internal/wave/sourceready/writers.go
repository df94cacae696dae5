package sourceready

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configwave/configwave/internal/wave/slimcache"
)

// A writer is a controller's object that writes a Secret and says in its own status whether
// what it wrote is done: cert-manager's Certificate (its spec.secretName) and External Secrets'
// ExternalSecret (its spec.target.name, else its own name). Between the Secret's update and the
// status that says it is done, or while a second writer of the same Secret has not synced yet
// (an ExternalSecret of creationPolicy Merge beside an Orphan one), the Secret is not the one the
// controller is making: wave waits for the status, as for a half-written TLS pair.
//
// The Secrets Store CSI driver is not a writer here: it writes a synced Secret whole, in one
// request, from the files of a mount that already succeeded, and its SecretProviderClassPodStatus
// says what a pod mounted, not whether the Secret is complete; a synced kubernetes.io/tls Secret
// is judged as a pair like any other (Incomplete).
type WriterKind string

const (
	Certificate    WriterKind = "Certificate"
	ExternalSecret WriterKind = "ExternalSecret"
)

// Lower is the kind as a kubectl user names it: certificate/web-tls.
func (k WriterKind) Lower() string { return strings.ToLower(string(k)) }

// Writers are the kinds wave reads, each with the versions it understands, newest first; the
// first the API server serves is used.
var Writers = []struct {
	Kind     WriterKind
	Group    string
	Versions []string
	Resource string
}{
	{Certificate, "cert-manager.io", []string{"v1"}, "certificates"},
	{ExternalSecret, "external-secrets.io", []string{"v1", "v1beta1"}, "externalsecrets"},
}

// GroupResource is where a writer kind lives, for RBAC and messages.
func GroupResource(kind WriterKind) schema.GroupResource {
	for _, w := range Writers {
		if w.Kind == kind {
			return schema.GroupResource{Group: w.Group, Resource: w.Resource}
		}
	}
	return schema.GroupResource{}
}

// Writer is what wave keeps of one writer: who it is, which Secret of its namespace it writes
// ("" when it writes none: an ExternalSecret of creationPolicy None), and why its status says
// that Secret is not done yet ("" when done). Only the verdict is kept: never a condition's
// message, which may quote a provider's answer. UnreadableField names the field that was not of the
// type its CRD gives it ("" when all were), and then NotDone is "": wave does not wait for a
// writer it cannot read.
type Writer struct {
	slimcache.Identity
	Kind            WriterKind
	Secret          string
	NotDone         string
	UnreadableField string
}

var _ metav1.Object = &Writer{}

// SecretKey is the cache key of the Secret a writer writes, for the index that finds a
// Secret's writers; "" when it writes none.
func (w *Writer) SecretKey() string {
	if w.Secret == "" {
		return ""
	}
	return w.Namespace + "/" + w.Secret
}

// Transform is the writers' informer transform for kind: an unstructured object becomes a
// *Writer of about a hundred bytes. It never fails: client-go fails a whole list on one
// object's transform error (the informer would never sync, and wave never start) and keeps the
// old object on a watch's; a field of the wrong type is named in UnreadableField instead, with
// nothing of its value.
func Transform(kind WriterKind) func(obj any) (any, error) {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil // a *Writer again, or a tombstone
		}
		w := &Writer{Identity: slimcache.Identity{Namespace: u.GetNamespace(), Name: u.GetName(), ResourceVersion: u.GetResourceVersion()}, Kind: kind}
		var bad string
		switch kind {
		case Certificate:
			w.Secret, w.NotDone, bad = certificate(u)
		case ExternalSecret:
			w.Secret, w.NotDone, bad = externalSecret(u)
		}
		if bad != "" {
			w.NotDone, w.UnreadableField = "", bad
		}
		return w, nil
	}
}

// Condition is one of a status's conditions, as both controllers write them (metav1.Condition's
// fields). Of the message only Refused is kept: whether it is one of External Secrets' fixed
// messages of a refusal for good.
type Condition struct {
	Type, Status, Reason string
	ObservedGeneration   int64
	Refused              bool
}

// refusedForGood are External Secrets' own condition messages (v0.16, msgErrorIsOwned,
// msgErrorUpdateImmutable, msgErrorBecomeOwner) of a sync it will not try again: the target is
// another ExternalSecret's, immutable, or cannot be taken over. Compared whole, never repeated.
var refusedForGood = map[string]bool{
	"target is owned by another ExternalSecret":    true,
	"could not update secret, target is immutable": true,
	"failed to take ownership of target secret":    true,
}

// CertificateStatus is what decides whether a Certificate's Secret is done.
type CertificateStatus struct {
	Generation int64
	Conditions []Condition
}

// CertificateNotDone says why a Certificate's status says its Secret is not done, or "": as
// cert-manager writes it, Issuing is True from the moment a (re)issuance is triggered until the
// issuing controller has written the Secret (whole, in one update) and, in a second update,
// taken the condition away (or set it False); Ready is judged by the readiness controller for
// the generation it observed. So a Secret is in flight while Issuing is True, and before the
// Certificate's current spec was judged at all (no condition yet, or Ready of an older
// generation: the trigger has not run on it). A Ready False with no issuance under way waits for
// nothing: cert-manager is not writing (a Certificate that does not own its Secret, beside the
// one that does, stays so; one whose issuance failed retries later, with Issuing again).
func CertificateNotDone(s CertificateStatus) string {
	if c, ok := find(s.Conditions, "Issuing"); ok && c.Status == string(metav1.ConditionTrue) {
		return "its issuance is under way (Issuing" + reason(c) + ")"
	}
	ready, ok := find(s.Conditions, "Ready")
	switch {
	case !ok:
		return "it has not been judged yet (no Ready condition)"
	case ready.ObservedGeneration > 0 && ready.ObservedGeneration < s.Generation:
		return fmt.Sprintf("its Ready is of its spec of generation %d, not of the current %d", ready.ObservedGeneration, s.Generation)
	}
	return ""
}

func certificate(u *unstructured.Unstructured) (secret, notDone, unreadable string) {
	secret, _, err := unstructured.NestedString(u.Object, "spec", "secretName")
	if err != nil {
		return "", "", "spec.secretName"
	}
	conds, bad := conditions(u)
	if bad != "" {
		return secret, "", bad
	}
	return secret, CertificateNotDone(CertificateStatus{Generation: u.GetGeneration(), Conditions: conds}), ""
}

// ExternalSecretStatus is what decides whether an ExternalSecret's Secret is done.
type ExternalSecretStatus struct {
	Generation int64
	Conditions []Condition
	// SyncedResourceVersion is what External Secrets wrote when it last synced:
	// "GENERATION-HASH", the generation of the spec it synced and a hash of the ExternalSecret's
	// labels and annotations (its util.GetResourceVersion).
	SyncedResourceVersion string
}

// ExternalSecretNotDone says why an ExternalSecret's status says its Secret is not done, or "":
// as External Secrets writes it, a sync writes the Secret (whole, in one update) and then
// records the generation of the spec it synced in syncedResourceVersion, with Ready True
// (SecretSynced); a failed sync sets Ready False and leaves syncedResourceVersion as it was. So
// the Secret is in flight while the current spec is not synced (a new remote key, a second
// ExternalSecret merged into the same Secret), and before the first reconcile (no Ready yet).
// One that synced its current spec waits for nothing, Ready or not (a provider's outage after
// the sync leaves the Secret as that sync wrote it), and neither does one that External Secrets
// refused for good (pointed at a Secret another ExternalSecret owns, or an immutable one) or
// one that failed before it ever synced.
func ExternalSecretNotDone(s ExternalSecretStatus) string {
	ready, ok := find(s.Conditions, "Ready")
	if !ok {
		return "it has not synced yet"
	}
	gen, _, _ := strings.Cut(s.SyncedResourceVersion, "-")
	synced, err := strconv.ParseInt(gen, 10, 64)
	switch {
	case ready.Status == string(metav1.ConditionFalse) && ready.Refused:
		return "" // refused for good (the Secret is another's, or immutable): it writes nothing
	case s.SyncedResourceVersion == "" && ready.Status != string(metav1.ConditionTrue):
		return "" // never synced, and failing: it writes nothing
	case s.SyncedResourceVersion == "":
		return "it has not synced yet"
	case err == nil && synced < s.Generation && ready.Status == string(metav1.ConditionTrue):
		return fmt.Sprintf("it has synced its spec of generation %d, not the current %d yet", synced, s.Generation)
	case err == nil && synced < s.Generation:
		return fmt.Sprintf("it has synced its spec of generation %d, not the current %d yet (Ready %s%s)", synced, s.Generation, status(ready), reason(ready))
	}
	return ""
}

func externalSecret(u *unstructured.Unstructured) (secret, notDone, unreadable string) {
	policy, _, err := unstructured.NestedString(u.Object, "spec", "target", "creationPolicy")
	if err != nil {
		return "", "", "spec.target.creationPolicy"
	}
	if policy == "None" {
		return "", "", "" // writes no Secret
	}
	if secret, _, err = unstructured.NestedString(u.Object, "spec", "target", "name"); err != nil {
		return "", "", "spec.target.name"
	}
	if secret == "" {
		secret = u.GetName() // External Secrets' default
	}
	synced, _, err := unstructured.NestedString(u.Object, "status", "syncedResourceVersion")
	if err != nil {
		return secret, "", "status.syncedResourceVersion"
	}
	conds, bad := conditions(u)
	if bad != "" {
		return secret, "", bad
	}
	return secret, ExternalSecretNotDone(ExternalSecretStatus{Generation: u.GetGeneration(), Conditions: conds, SyncedResourceVersion: synced}), ""
}

// conditions reads status.conditions, or names the first field that is not of its type.
func conditions(u *unstructured.Unstructured) ([]Condition, string) {
	list, _, err := unstructured.NestedSlice(u.Object, "status", "conditions")
	if err != nil {
		return nil, "status.conditions"
	}
	out := make([]Condition, 0, len(list))
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Sprintf("status.conditions[%d]", i)
		}
		c := Condition{}
		c.Type, _ = m["type"].(string)
		c.Status, _ = m["status"].(string)
		c.Reason, _ = m["reason"].(string)
		message, _ := m["message"].(string)
		c.Refused = refusedForGood[message]
		switch g := m["observedGeneration"].(type) {
		case int64:
			c.ObservedGeneration = g
		case float64:
			c.ObservedGeneration = int64(g)
		}
		out = append(out, c)
	}
	return out, ""
}

func find(conds []Condition, typ string) (Condition, bool) {
	for _, c := range conds {
		if c.Type == typ {
			return c, true
		}
	}
	return Condition{}, false
}

// A reason is a controller's CamelCase word of letters (Renewing, SecretSyncedError); anything
// else (free text, or what could be a token) is left out, so that nothing a provider answered,
// nor anything written into a status by hand, reaches an Event.
var reasonWord = regexp.MustCompile(`^[A-Z][A-Za-z]{0,47}$`)

func reason(c Condition) string {
	if reasonWord.MatchString(c.Reason) {
		return ": " + c.Reason
	}
	return ""
}

// status is a condition's status as one of the three words the API allows, else "Unknown".
func status(c Condition) string {
	switch c.Status {
	case string(metav1.ConditionTrue), string(metav1.ConditionFalse):
		return c.Status
	}
	return string(metav1.ConditionUnknown)
}

// Discovery is the one question ServedWriters asks the API server.
type Discovery interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// ServedWriters are the writer kinds the API server serves, each at the newest version wave
// understands: their controllers are installed.
func ServedWriters(d Discovery) (map[WriterKind]schema.GroupVersionResource, error) {
	out := map[WriterKind]schema.GroupVersionResource{}
	for _, w := range Writers {
		for _, v := range w.Versions {
			gvr := schema.GroupVersionResource{Group: w.Group, Version: v, Resource: w.Resource}
			list, err := d.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("discover whether %s are served: %w", gvr.GroupResource(), err)
			}
			if slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == w.Resource }) {
				out[w.Kind] = gvr
				break
			}
		}
	}
	return out, nil
}
