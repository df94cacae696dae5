package coreclient

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// An API server that answers JSON only (a proxy in between may) is still read.
func TestClientReadsCoreV1(t *testing.T) {
	want := &ConfigMapList{Items: []ConfigMap{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "nginx"},
		Data:       map[string]string{"nginx.conf": "events {}"},
		BinaryData: map[string][]byte{"logo.png": {0x89, 'P', 'N', 'G'}},
	}}}
	var gotPath, gotAccept, gotQuery string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotAccept, gotQuery = r.URL.Path, r.Header.Get("Accept"), r.URL.RawQuery
		// What the API server sends: more fields than the reloader declares.
		w.Header().Set("Content-Type", runtime.ContentTypeJSON)
		_, _ = io.WriteString(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[`+
			`{"metadata":{"name":"nginx","namespace":"web","resourceVersion":"7","managedFields":[{"manager":"kubectl"}]},`+
			`"data":{"nginx.conf":"events {}"},"binaryData":{"logo.png":"iVBORw=="},"immutable":false}]}`)
	}))
	defer srv.Close()

	client, err := New(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	got := &ConfigMapList{}
	err = client.Get().Namespace("web").Resource("configmaps").
		VersionedParams(&metav1.ListOptions{FieldSelector: "metadata.name=nginx"}, metav1.ParameterCodec).
		Do(context.Background()).Into(got)
	require.NoError(t, err)

	assert.Equal(t, "/api/v1/namespaces/web/configmaps", gotPath)
	assert.Equal(t, "fieldSelector=metadata.name%3Dnginx", gotQuery)
	assert.Equal(t, runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON, gotAccept)
	assert.Equal(t, "7", got.ResourceVersion)
	require.Len(t, got.Items, 1)
	assert.Equal(t, "7", got.Items[0].ResourceVersion)
	assert.Equal(t, want.Items[0].Data, got.Items[0].Data)
	assert.Equal(t, want.Items[0].BinaryData, got.Items[0].BinaryData)
}

func TestSchemeKnowsOnlyWhatTheReloaderUses(t *testing.T) {
	for _, kind := range []string{"ConfigMap", "ConfigMapList", "Secret", "SecretList", "Event", "WatchEvent", "Status"} {
		assert.True(t, Scheme.Recognizes(GroupVersion.WithKind(kind)), kind)
	}
	assert.False(t, Scheme.Recognizes(GroupVersion.WithKind("Pod")))
}

func TestDeepCopySharesNoData(t *testing.T) {
	cm := &ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"l": "1"}},
		Data: map[string]string{"k": "v"}, BinaryData: map[string][]byte{"b": {1}}}
	cp := cm.DeepCopyObject().(*ConfigMap)
	cp.Data["k"], cp.BinaryData["b"][0], cp.Labels["l"] = "changed", 2, "2"
	assert.Equal(t, "v", cm.Data["k"])
	assert.Equal(t, byte(1), cm.BinaryData["b"][0])
	assert.Equal(t, "1", cm.Labels["l"])

	s := &SecretList{Items: []Secret{{Data: map[string][]byte{"k": {1}}}}}
	scp := s.DeepCopyObject().(*SecretList)
	scp.Items[0].Data["k"][0] = 2
	assert.Equal(t, byte(1), s.Items[0].Data["k"][0])
}
