package revisions

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/kube/configref"
)

func TestIndexName(t *testing.T) {
	h := InputsHash("configmap.app=0123")
	assert.Equal(t, "rev-6818fe0fa06bc821", h, "golden: a change of the formula rolls every workload with revisions")
	assert.Equal(t, "configwave-"+h, IndexName(h))
	assert.Empty(t, IndexName(""), "a pod of no revision has no index")
	assert.Empty(t, IndexName("0123456789abcdef"), "nor one of a workload without revisions")
	assert.Empty(t, IndexName("rev-../x"), "a value that is no name part is not looked up")
	assert.Empty(t, IndexName("rev-"+strings.Repeat("a", 17)), "nor one of another length")
	assert.Empty(t, IndexName("rev-0123456789ABCDEF"), "nor one in capitals")
}

func TestIndexDataRoundTrips(t *testing.T) {
	data := IndexData(onShop)
	assert.Equal(t, map[string]string{"configmap.app": "app-0123456789", "secret.db": "db-abcdef0123"}, data)
	back, err := ParseIndex("shop", data)
	require.NoError(t, err)
	assert.Equal(t, onShop, back)
	dotted := Snapshots{{Kind: configref.ConfigMap, Namespace: "shop", Name: "app.example.com"}: SnapshotName("app.example.com", "0123456789")}
	back, err = ParseIndex("shop", IndexData(dotted))
	require.NoError(t, err)
	assert.Equal(t, dotted, back, "a name with dots")
}

func TestParseIndexRefusesEntriesNotWaves(t *testing.T) {
	for _, tc := range []struct {
		name string
		data map[string]string
		want string
	}{
		{"an unknown kind", map[string]string{"pod.app": "app-0123456789"}, `index entry "pod.app": want configmap.NAME or secret.NAME`},
		{"no kind", map[string]string{"app": "app-0123456789"}, `index entry "app": want`},
		{"a bad source name", map[string]string{"configmap.App": "app-0123456789"}, `index entry "configmap.App": the source's name is not valid`},
		{"a bad snapshot name", map[string]string{"configmap.app": "App-0123456789"}, `the snapshot's name is not valid`},
		{"another object than a snapshot of the source", map[string]string{"secret.db": "admin-token"}, `"admin-token" is not a name of a snapshot of db`},
		{"a snapshot of another source", map[string]string{"secret.db": "other-0123456789"}, `is not a name of a snapshot of db`},
		{"an ID that is not hex", map[string]string{"secret.db": "db-012345678z"}, `is not a name of a snapshot of db`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseIndex("shop", tc.data)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func FuzzParseIndex(f *testing.F) {
	f.Add("configmap.app", "app-0123456789")
	f.Add("secret.db", "db-abcdef0123")
	f.Add("secret.a.b", "a.b-abcdef0123")
	f.Fuzz(func(t *testing.T, key, value string) {
		got, err := ParseIndex("shop", map[string]string{key: value})
		if err != nil {
			return
		}
		require.Len(t, got, 1)
		for ref, snap := range got {
			// Whatever it takes, it names a snapshot of the source, in the pod's namespace.
			assert.Equal(t, "shop", ref.Namespace)
			assert.True(t, isSnapshotOf(snap, ref.Name))
			assert.Equal(t, map[string]string{key: value}, IndexData(got))
		}
	})
}

func TestDecide(t *testing.T) {
	abc := InputsHash("abc")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop"},
		Spec: corev1.PodSpec{
			Volumes:    []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}},
			Containers: []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}}},
		},
	}
	all := func(configref.Kind, string) bool { return true }
	both := []Op{{"replace", "/spec/volumes/0/configMap/name", "app-0123456789"}, {"replace", "/spec/containers/0/envFrom/0/secretRef/name", "db-abcdef0123"}}
	for _, tc := range []struct {
		name   string
		in     Admission
		ops    []Op
		live   []configref.Ref
		whyHas string
	}{
		{"a pod of a workload without revisions is left alone",
			Admission{Pod: pod, InputsHash: "0123456789abcdef", Index: onShop, IndexFound: true, SnapshotExists: all}, nil, nil, ""},
		{"a pod of no revision is left alone",
			Admission{Pod: pod, Index: onShop, IndexFound: true, SnapshotExists: all}, nil, nil, ""},
		{"a pod of a revision reads its snapshots",
			Admission{Pod: pod, InputsHash: abc, Index: onShop, IndexFound: true, SnapshotExists: all}, both, nil, ""},
		{"no index: the pod starts on the live objects, and says so",
			Admission{Pod: pod, InputsHash: abc, SnapshotExists: all}, nil, []configref.Ref{cmApp, secDB}, "revision " + abc + " has no snapshot index (configwave-" + abc + ")"},
		{"an index that cannot be read: live, and says why",
			Admission{Pod: pod, InputsHash: abc, IndexFound: true, IndexErr: assert.AnError, SnapshotExists: all}, nil, []configref.Ref{cmApp, secDB}, "cannot be used: " + assert.AnError.Error()},
		{"a snapshot deleted by hand: that source live, the other from its snapshot",
			Admission{Pod: pod, InputsHash: abc, Index: onShop, IndexFound: true, SnapshotExists: func(k configref.Kind, name string) bool { return k != configref.Secret }},
			both[:1], []configref.Ref{secDB}, "the snapshots secret/db-abcdef0123 of revision " + abc + " are gone"},
		{"its ServiceAccount enforces mountable secrets: its Secrets live (a snapshot would be refused, and no pod made), its ConfigMaps from their snapshots",
			Admission{Pod: pod, InputsHash: abc, Index: onShop, IndexFound: true, SnapshotExists: all, MountableSecretsOnly: true},
			both[:1], []configref.Ref{secDB}, "the pod's ServiceAccount default enforces mountable secrets (kubernetes.io/enforce-mountable-secrets), which a snapshot is not among: the pod reads secret/db live"},
		{"no index, and a pod that names no source: nothing to say",
			Admission{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop"}}, InputsHash: abc}, nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.in)
			assert.Equal(t, tc.ops, d.Ops)
			assert.Equal(t, tc.live, d.Live)
			if tc.whyHas == "" {
				assert.Empty(t, d.Why)
			} else {
				assert.Contains(t, d.Why, tc.whyHas)
			}
		})
	}
}
