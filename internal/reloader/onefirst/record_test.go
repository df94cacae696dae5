package onefirst

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/reloader/source"
)

func TestRecordRoundTrip(t *testing.T) {
	since := time.UnixMilli(1_800_000_000_000).UTC()
	for _, r := range []Record{
		{Content: "c1", State: Soaking, First: "web-0", Since: since, Renewed: since.Add(time.Second)},
		{Content: "c1", State: Promoted, First: "web-0", Since: since, Renewed: since, Good: "c1", Before: "c0",
			Batch: map[string]time.Time{"web-1": since.Add(time.Minute), "web-2": since.Add(2 * time.Minute)}},
		{Content: "c2", State: Rejected, First: "web-1", Since: since, Renewed: since, Reason: "the pod was not Ready for 12s", Good: "c1"},
	} {
		got, err := ParseRecord(r.Annotations(), r.First, r.Since, r.Renewed)
		require.NoError(t, err)
		for p, at := range got.Batch {
			got.Batch[p] = at.UTC()
		}
		assert.Equal(t, &r, got)
	}
}

func TestRecordReasonIsBounded(t *testing.T) {
	a := Record{Content: "c", State: Rejected, Reason: strings.Repeat("x", 10_000)}.Annotations()
	assert.Len(t, a[ReasonAnnotation], maxReason)
}

func TestParseRecordErrorsNameTheAnnotation(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    map[string]string
		want string
	}{
		{"no content", map[string]string{StateAnnotation: "Soaking"}, ContentAnnotation + " is missing"},
		{"no state", map[string]string{ContentAnnotation: "c"}, StateAnnotation + " is missing"},
		{"a batch entry without a time", map[string]string{ContentAnnotation: "c", StateAnnotation: "Promoted", BatchAnnotation: "web-1"}, BatchAnnotation + `: "web-1" is not POD@UNIX_MILLISECONDS`},
		{"a batch time that is no number", map[string]string{ContentAnnotation: "c", StateAnnotation: "Promoted", BatchAnnotation: "web-1@soon"}, `"web-1@soon"`},
		{"a pod listed twice", map[string]string{ContentAnnotation: "c", StateAnnotation: "Promoted", BatchAnnotation: "a@1,a@2"}, `pod "a" is listed twice`},
		{"an empty pod name", map[string]string{ContentAnnotation: "c", StateAnnotation: "Promoted", BatchAnnotation: "@1"}, `"@1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRecord(tc.a, "web-0", time.Time{}, time.Time{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// FuzzParseRecord: annotations anyone may write never panic the parse, and what parses is
// written back the same.
func FuzzParseRecord(f *testing.F) {
	f.Add("c1", "Promoted", "", "c1", "web-1@1800000000000,web-2@1800000060000")
	f.Add("c2", "Rejected", "not Ready", "c1", "")
	f.Add("c", "Soaking", "", "", "a@-1")
	f.Fuzz(func(t *testing.T, content, state, reason, good, batch string) {
		a := map[string]string{ContentAnnotation: content, StateAnnotation: state, ReasonAnnotation: reason, GoodAnnotation: good, BatchAnnotation: batch}
		r, err := ParseRecord(a, "web-0", time.Time{}, time.Time{})
		if err != nil {
			return
		}
		again, err := ParseRecord(r.Annotations(), "web-0", time.Time{}, time.Time{})
		require.NoError(t, err)
		assert.Equal(t, len(r.Batch), len(again.Batch))
		for p, at := range r.Batch {
			assert.True(t, at.Equal(again.Batch[p]), "pod %q", p)
		}
		_ = Decide(View{Pod: "web-0", Want: content, Have: good, Record: r, Now: time.Now(), Soak: time.Second, Expiry: 2 * time.Second, MaxBusy: 1})
	})
}

func TestContentID(t *testing.T) {
	a := Version{Kind: "ConfigMap", Namespace: "web", Name: "nginx", UID: "u1", ResourceVersion: "10"}
	b := Version{Kind: "Secret", Namespace: "web", Name: "tls", UID: "u2", ResourceVersion: "11"}
	assert.Equal(t, ContentID([]Version{a, b}), ContentID([]Version{b, a}), "the order the sources are listed in does not matter")
	changed := a
	changed.ResourceVersion = "12"
	assert.NotEqual(t, ContentID([]Version{a, b}), ContentID([]Version{changed, b}), "a new resourceVersion is a new content")
	recreated := a
	recreated.UID = "u3"
	assert.NotEqual(t, ContentID([]Version{a}), ContentID([]Version{recreated}), "an object made again is a new content")
	assert.Len(t, ContentID([]Version{a}), 32)
}

func TestContentOf(t *testing.T) {
	snap := source.Snapshot{
		Objects: []source.Object{
			{Ref: configref.Ref{Kind: configref.ConfigMap, Namespace: "web", Name: "app"}, Version: "uid-1/123", Data: map[string][]byte{"k": []byte("secret value")}},
			{Ref: configref.Ref{Kind: configref.Secret, Namespace: "web", Name: "tls"}, Version: "uid-2/456"},
		},
		Missing: []configref.Ref{{Kind: configref.ConfigMap, Namespace: "web", Name: "extra"}},
	}
	c := ContentOf(snap)
	assert.Equal(t, SnapshotID(snap), c.ID)
	assert.Equal(t, "configmap web/app@123, secret web/tls@456, configmap web/extra (missing)", c.Name, "kubectl's names at their resourceVersions; never a value")
	assert.Equal(t, map[configref.Ref]types.UID{snap.Objects[0].Ref: "uid-1", snap.Objects[1].Ref: "uid-2"}, c.UIDs)
	assert.Equal(t, "no objects", ContentOf(source.Snapshot{}).Name)
	assert.Contains(t, Describe(c, "503"), "config configmap web/app@123, secret web/tls@456, configmap web/extra (missing) (content "+c.ID+") was rejected")
	assert.Contains(t, Describe(c, "503"), "change the object in any way")
}
