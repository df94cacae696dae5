package coreclient

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// The API server's protobuf, made by k8s.io/api's generated code as the API server makes it.
func apiProtobuf(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	codecs := serializer.NewCodecFactory(scheme.Scheme)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	require.True(t, ok)
	var b bytes.Buffer
	require.NoError(t, codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion).Encode(obj, &b))
	return b.Bytes()
}

var managed = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
	FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:data":{".":{},"f:a":{}}}`)}}

func TestProtobufObjectsDecodeAsTheAPIServerSendsThem(t *testing.T) {
	immutable := true
	meta := metav1.ObjectMeta{Name: "nginx", Namespace: "web", ResourceVersion: "42", UID: "u-1",
		Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"configwave.io/folder": "conf.d"}, ManagedFields: managed}
	for name, tt := range map[string]struct {
		sent runtime.Object // what the API server holds
		into runtime.Object
		want runtime.Object
	}{
		"ConfigMap with data, binary data and fields the reloader does not know": {
			sent: &corev1.ConfigMap{ObjectMeta: meta, Immutable: &immutable,
				Data: map[string]string{"nginx.conf": "events {}", "empty": ""}, BinaryData: map[string][]byte{"logo.png": {0x89, 'P', 0}, "none": {}}},
			into: &ConfigMap{},
			want: &ConfigMap{ObjectMeta: meta, Data: map[string]string{"nginx.conf": "events {}", "empty": ""}, BinaryData: map[string][]byte{"logo.png": {0x89, 'P', 0}, "none": {}}},
		},
		"ConfigMap without data": {
			sent: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "b", ResourceVersion: "1"}},
			into: &ConfigMap{},
			want: &ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "b", ResourceVersion: "1"}},
		},
		"Secret with its type, and stringData (never sent back, but skipped if it were)": {
			sent: &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeTLS, Immutable: &immutable,
				Data: map[string][]byte{"tls.crt": []byte("cert"), "tls.key": {}}, StringData: map[string]string{"x": "y"}},
			into: &Secret{},
			want: &Secret{ObjectMeta: meta, Type: "kubernetes.io/tls", Data: map[string][]byte{"tls.crt": []byte("cert"), "tls.key": {}}},
		},
		"ConfigMapList": {
			sent: &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "7", Continue: "c"}, Items: []corev1.ConfigMap{
				{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"k": "1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "b"}}}},
			into: &ConfigMapList{},
			want: &ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "7", Continue: "c"}, Items: []ConfigMap{
				{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"k": "1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "b"}}}},
		},
		"SecretList": {
			sent: &corev1.SecretList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}, Items: []corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": {1}}}}},
			into: &SecretList{},
			want: &SecretList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}, Items: []Secret{{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Type: "Opaque", Data: map[string][]byte{"k": {1}}}}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			body := apiProtobuf(t, tt.sent)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
				_, _ = w.Write(body)
			}))
			defer srv.Close()
			client, err := New(&rest.Config{Host: srv.URL})
			require.NoError(t, err)
			require.NoError(t, client.Get().Namespace("web").Resource("configmaps").Do(context.Background()).Into(tt.into))
			assert.Equal(t, tt.want, tt.into)
		})
	}
}

// The path every change takes: a watch stream of protobuf events (length-delimited frames).
func TestProtobufWatchEventsDecode(t *testing.T) {
	var stream bytes.Buffer
	for _, ev := range []struct {
		typ watch.EventType
		obj runtime.Object
	}{
		{watch.Added, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", ResourceVersion: "1", ManagedFields: managed}, Data: map[string]string{"n": "1"}}},
		{watch.Modified, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", ResourceVersion: "2"}, Data: map[string]string{"n": "2"}}},
		{watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "3", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}},
	} {
		// A frame is a bare WatchEvent; the object in it has the envelope that names its kind.
		frame, err := (&metav1.WatchEvent{Type: string(ev.typ), Object: runtime.RawExtension{Raw: apiProtobuf(t, ev.obj)}}).Marshal()
		require.NoError(t, err)
		require.NoError(t, binary.Write(&stream, binary.BigEndian, uint32(len(frame))))
		stream.Write(frame)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "true", r.URL.Query().Get("watch"))
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf+";stream=watch")
		_, _ = w.Write(stream.Bytes())
	}))
	defer srv.Close()
	client, err := New(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	w, err := client.Get().Namespace("web").Resource("configmaps").VersionedParams(&metav1.ListOptions{Watch: true}, metav1.ParameterCodec).Watch(context.Background())
	require.NoError(t, err)
	defer w.Stop()

	var got []string
	for len(got) < 3 {
		select {
		case ev := <-w.ResultChan():
			require.NotEqual(t, watch.Error, ev.Type, "%v", ev.Object)
			cm := ev.Object.(*ConfigMap)
			got = append(got, string(ev.Type)+" "+cm.ResourceVersion+" "+cm.Data["n"]+" "+cm.Annotations[metav1.InitialEventsAnnotationKey])
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of 3 events came: %v", len(got), got)
		}
	}
	assert.Equal(t, []string{"ADDED 1 1 ", "MODIFIED 2 2 ", "BOOKMARK 3  true"}, got)
}

func TestProtobufErrorsNameTheObject(t *testing.T) {
	full, err := (&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"k": "v"}}).Marshal()
	require.NoError(t, err)
	for name, b := range map[string][]byte{
		"cut inside a field":    full[:len(full)-2],
		"a length past the end": {0x12, 0x7f},
		"a bad tag":             {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		err := (&ConfigMap{}).Unmarshal(b)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "decode ConfigMap", name)
	}
}

// Whatever the bytes, decoding returns an error or an object, never a panic; and what the
// generated code of core/v1 reads from valid bytes, this reads the same.
func FuzzDecodeProtobuf(f *testing.F) {
	for _, obj := range []interface{ Marshal() ([]byte, error) }{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", ManagedFields: managed}, Data: map[string]string{"k": "v"}, BinaryData: map[string][]byte{"b": {0}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Type: "Opaque", Data: map[string][]byte{"k": {1}}},
		&corev1.ConfigMapList{Items: []corev1.ConfigMap{{Data: map[string]string{"x": "y"}}}},
	} {
		b, err := obj.Marshal()
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var cm ConfigMap
		if cm.Unmarshal(b) == nil {
			var want corev1.ConfigMap
			if want.Unmarshal(b) == nil {
				assert.Equal(t, want.ObjectMeta, cm.ObjectMeta)
				assert.Equal(t, len(want.Data), len(cm.Data))
				for k, v := range want.Data {
					assert.Equal(t, v, cm.Data[k])
				}
				assert.Equal(t, len(want.BinaryData), len(cm.BinaryData))
			}
		}
		_ = (&Secret{}).Unmarshal(b)
		_ = (&ConfigMapList{}).Unmarshal(b)
		_ = (&SecretList{}).Unmarshal(b)
	})
}
