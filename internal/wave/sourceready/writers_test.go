package sourceready

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestCertificateNotDone(t *testing.T) {
	ready := Condition{Type: "Ready", Status: "True", Reason: "Ready", ObservedGeneration: 2}
	for _, tc := range []struct {
		name string
		s    CertificateStatus
		want string
	}{
		{"Ready, of its current spec: done", CertificateStatus{Generation: 2, Conditions: []Condition{ready}}, ""},
		{"a renewal triggered: Issuing beside the old Ready", CertificateStatus{Generation: 2, Conditions: []Condition{ready, {Type: "Issuing", Status: "True", Reason: "Renewing", ObservedGeneration: 2}}}, "its issuance is under way (Issuing: Renewing)"},
		{"issued: Issuing set False (cert-manager's server-side apply), Ready stays", CertificateStatus{Generation: 2, Conditions: []Condition{ready, {Type: "Issuing", Status: "False", Reason: "Issued"}}}, ""},
		{"a new Certificate, not judged yet", CertificateStatus{Generation: 1}, "it has not been judged yet (no Ready condition)"},
		{"Ready False and no issuance under way: cert-manager writes nothing (a duplicate that does not own the Secret, a failed issuance in backoff)",
			CertificateStatus{Generation: 2, Conditions: []Condition{{Type: "Ready", Status: "False", Reason: "SecretMismatch", ObservedGeneration: 2}, {Type: "Issuing", Status: "False", Reason: "Failed"}}}, ""},
		{"a reason that is not one word is left out: it could be a message", CertificateStatus{Generation: 2, Conditions: []Condition{{Type: "Issuing", Status: "True", Reason: "the vault said: s3cr3t"}}}, "its issuance is under way (Issuing)"},
		{"a reason with digits is left out: it could be a token", CertificateStatus{Generation: 2, Conditions: []Condition{{Type: "Issuing", Status: "True", Reason: "Hunter2Hunter2"}}}, "its issuance is under way (Issuing)"},
		{"the spec changed since Ready was judged: the trigger has not run on it yet", CertificateStatus{Generation: 3, Conditions: []Condition{ready}}, "its Ready is of its spec of generation 2, not of the current 3"},
		{"a Ready without observedGeneration (older cert-manager) is taken as it is", CertificateStatus{Generation: 3, Conditions: []Condition{{Type: "Ready", Status: "True"}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, CertificateNotDone(tc.s)) })
	}
}

func TestExternalSecretNotDone(t *testing.T) {
	synced := Condition{Type: "Ready", Status: "True", Reason: "SecretSynced"}
	failed := Condition{Type: "Ready", Status: "False", Reason: "SecretSyncedError"}
	for _, tc := range []struct {
		name string
		s    ExternalSecretStatus
		want string
	}{
		{"synced its current spec: done", ExternalSecretStatus{Generation: 2, Conditions: []Condition{synced}, SyncedResourceVersion: "2-4f1c0e9a"}, ""},
		{"its spec changed, the sync not done yet", ExternalSecretStatus{Generation: 3, Conditions: []Condition{synced}, SyncedResourceVersion: "2-4f1c0e9a"}, "it has synced its spec of generation 2, not the current 3 yet"},
		{"its spec changed, and its sync fails", ExternalSecretStatus{Generation: 3, Conditions: []Condition{failed}, SyncedResourceVersion: "2-4f1c0e9a"}, "it has synced its spec of generation 2, not the current 3 yet (Ready False: SecretSyncedError)"},
		{"a Ready status that is none of the API's words is not repeated", ExternalSecretStatus{Generation: 3, Conditions: []Condition{{Type: "Ready", Status: "password=hunter2"}}, SyncedResourceVersion: "2-x"}, "it has synced its spec of generation 2, not the current 3 yet (Ready Unknown)"},
		{"a new ExternalSecret: no condition yet", ExternalSecretStatus{Generation: 1}, "it has not synced yet"},
		{"Ready without a sync recorded", ExternalSecretStatus{Generation: 1, Conditions: []Condition{synced}}, "it has not synced yet"},
		{"a provider's outage after the sync of the current spec: the Secret is as that sync wrote it", ExternalSecretStatus{Generation: 2, Conditions: []Condition{failed}, SyncedResourceVersion: "2-4f1c0e9a"}, ""},
		{"failing before it ever synced (a second Owner of a Secret another owns): it writes nothing", ExternalSecretStatus{Generation: 1, Conditions: []Condition{failed}}, ""},
		{"refused for good after a sync (pointed at a Secret another ExternalSecret owns): it writes nothing", ExternalSecretStatus{Generation: 3, Conditions: []Condition{{Type: "Ready", Status: "False", Reason: "SecretSyncedError", Refused: true}}, SyncedResourceVersion: "2-x"}, ""},
		{"a syncedResourceVersion wave cannot read: not waited for", ExternalSecretStatus{Generation: 2, Conditions: []Condition{synced}, SyncedResourceVersion: "opaque"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, ExternalSecretNotDone(tc.s)) })
	}
}

func object(kind string, gen int64, spec, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "x/v1", "kind": kind, "spec": spec, "status": status}}
	u.SetNamespace("ns")
	u.SetName("web")
	u.SetGeneration(gen)
	u.SetResourceVersion("7")
	return u
}

func TestTransform(t *testing.T) {
	issuing := map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "observedGeneration": int64(1), "message": "Certificate is up to date and has not expired"},
		map[string]any{"type": "Issuing", "status": "True", "reason": "Renewing", "observedGeneration": int64(1), "message": "Renewing certificate as renewal was scheduled at 2026-12-06"},
	}}
	synced := map[string]any{"syncedResourceVersion": "1-abc", "conditions": []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "SecretSynced", "message": "secret synced"},
	}}
	for _, tc := range []struct {
		name string
		kind WriterKind
		obj  *unstructured.Unstructured
		want *Writer
	}{
		{"a Certificate renewing", Certificate, object("Certificate", 1, map[string]any{"secretName": "web-tls"}, issuing),
			&Writer{Kind: Certificate, Secret: "web-tls", NotDone: "its issuance is under way (Issuing: Renewing)"}},
		{"an ExternalSecret writes the Secret its target names", ExternalSecret, object("ExternalSecret", 1, map[string]any{"target": map[string]any{"name": "db"}}, synced),
			&Writer{Kind: ExternalSecret, Secret: "db"}},
		{"an ExternalSecret with no target name writes a Secret of its own name", ExternalSecret, object("ExternalSecret", 2, map[string]any{}, synced),
			&Writer{Kind: ExternalSecret, Secret: "web", NotDone: "it has synced its spec of generation 1, not the current 2 yet"}},
		{"an ExternalSecret External Secrets refused for good: only that is kept of the message", ExternalSecret, object("ExternalSecret", 3, map[string]any{},
			map[string]any{"syncedResourceVersion": "2-x", "conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "SecretSyncedError", "message": "target is owned by another ExternalSecret"}}}),
			&Writer{Kind: ExternalSecret, Secret: "web"}},
		{"the same failure with another message (the provider down for the new spec) is waited for", ExternalSecret, object("ExternalSecret", 3, map[string]any{},
			map[string]any{"syncedResourceVersion": "2-x", "conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "SecretSyncedError", "message": "could not get secret data from provider"}}}),
			&Writer{Kind: ExternalSecret, Secret: "web", NotDone: "it has synced its spec of generation 2, not the current 3 yet (Ready False: SecretSyncedError)"}},
		{"an ExternalSecret of creationPolicy None writes none", ExternalSecret, object("ExternalSecret", 1, map[string]any{"target": map[string]any{"creationPolicy": "None"}}, nil),
			&Writer{Kind: ExternalSecret}},
		{"a field of the wrong type is named, and not waited for", Certificate, object("Certificate", 1, map[string]any{"secretName": int64(3)}, issuing),
			&Writer{Kind: Certificate, UnreadableField: "spec.secretName"}},
		{"a condition that is no object", ExternalSecret, object("ExternalSecret", 1, map[string]any{}, map[string]any{"conditions": []any{"Ready"}}),
			&Writer{Kind: ExternalSecret, Secret: "web", UnreadableField: "status.conditions[0]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Transform(tc.kind)(tc.obj)
			require.NoError(t, err, "never an error: client-go would fail the whole list on it")
			tc.want.Namespace, tc.want.Name, tc.want.ResourceVersion = "ns", "web", "7"
			assert.Equal(t, tc.want, got)
			again, err := Transform(tc.kind)(got)
			require.NoError(t, err)
			assert.Same(t, got, again, "a transformed object passes through (client-go transforms a relist's objects again)")
		})
	}
}

func TestTransformKeepsNoMessage(t *testing.T) {
	u := object("ExternalSecret", 1, map[string]any{}, map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "False", "reason": "SecretSyncedError", "message": "could not get secret data from provider: value hunter2 rejected"},
	}})
	got, err := Transform(ExternalSecret)(u)
	require.NoError(t, err)
	assert.NotContains(t, got.(*Writer).NotDone, "hunter2")
}

type discovery map[string][]string

func (d discovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	names, ok := d[gv]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	list := &metav1.APIResourceList{GroupVersion: gv}
	for _, n := range names {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: n})
	}
	return list, nil
}

func TestServedWriters(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    discovery
		want map[WriterKind]string
	}{
		{"neither installed", discovery{}, map[WriterKind]string{}},
		{"cert-manager, and External Secrets serving v1 and v1beta1: v1", discovery{
			"cert-manager.io/v1":          {"certificates", "issuers"},
			"external-secrets.io/v1":      {"externalsecrets"},
			"external-secrets.io/v1beta1": {"externalsecrets"},
		}, map[WriterKind]string{Certificate: "cert-manager.io/v1", ExternalSecret: "external-secrets.io/v1"}},
		{"an older External Secrets, v1beta1 only", discovery{"external-secrets.io/v1beta1": {"externalsecrets", "secretstores"}},
			map[WriterKind]string{ExternalSecret: "external-secrets.io/v1beta1"}},
		{"the group served without the resource", discovery{"cert-manager.io/v1": {"issuers"}}, map[WriterKind]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ServedWriters(tc.d)
			require.NoError(t, err)
			gvs := map[WriterKind]string{}
			for k, gvr := range got {
				gvs[k] = gvr.GroupVersion().String()
			}
			assert.Equal(t, tc.want, gvs)
		})
	}
}

// FuzzWriterTransform: any status a controller (or anyone who may write it) puts in is read
// without a panic, and what is kept of a condition is a fixed phrase and a reason word, never
// free text.
func FuzzWriterTransform(f *testing.F) {
	f.Add([]byte(`{"spec":{"secretName":"web-tls"},"status":{"conditions":[{"type":"Issuing","status":"True","reason":"Renewing","observedGeneration":1}]}}`), true)
	f.Add([]byte(`{"spec":{"target":{"name":"db","creationPolicy":"Merge"}},"status":{"syncedResourceVersion":"1-x","conditions":[{"type":"Ready","status":"False","reason":"SecretSyncedError","message":"m"}]}}`), false)
	f.Add([]byte(`{"status":{"conditions":[{"type":"Ready","observedGeneration":"x"},null,3]}}`), true)
	f.Fuzz(func(t *testing.T, doc []byte, cert bool) {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(append([]byte(`{"apiVersion":"x/v1","kind":"K","metadata":{"name":"n"},`), doc[min(1, len(doc)):]...)); err != nil {
			return
		}
		kind := ExternalSecret
		if cert {
			kind = Certificate
		}
		got, err := Transform(kind)(u)
		if err != nil {
			t.Fatalf("an error fails the informer's whole list: %v", err)
		}
		w := got.(*Writer)
		if len(w.NotDone) > 200 {
			t.Fatalf("a verdict of %d bytes: free text got in: %q", len(w.NotDone), w.NotDone)
		}
	})
}
