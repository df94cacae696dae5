package kubeclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestCountWatchRestarts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	var opened, restarted []string
	CountWatchRestarts(cfg, func(resource string, again bool) {
		if again {
			restarted = append(restarted, resource)
		} else {
			opened = append(opened, resource)
		}
	})
	client, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)

	for _, path := range []string{
		"/api/v1/namespaces/a/configmaps?watch=true",                   // first watch: not a restart
		"/api/v1/namespaces/a/configmaps?watch=true&resourceVersion=5", // same watch again
		"/api/v1/namespaces/b/configmaps?watch=true",                   // another namespace: first
		"/apis/apps/v1/deployments?watch=1&labelSelector=x%3Dy",        // first, with a selector
		"/apis/apps/v1/deployments?watch=1&labelSelector=x%3Dz",        // another selector: first
		"/apis/apps/v1/deployments?watch=1&labelSelector=x%3Dy",        // again
		"/api/v1/namespaces/a/configmaps",                              // a list is not a watch
	} {
		resp, err := client.Get(srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, []string{"configmaps", "deployments"}, restarted)
	assert.Equal(t, []string{"configmaps", "configmaps", "deployments", "deployments"}, opened)
}

// client-go's Event writes, as its recorder sends them, are hand-written and speak JSON unless
// the config says otherwise; PreferProtobuf makes them speak protobuf, as the generated clients
// do by default.
func TestPreferProtobufReachesEvents(t *testing.T) {
	for _, prefer := range []bool{false, true} {
		var sent, accepted string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sent, accepted = r.Header.Get("Content-Type"), r.Header.Get("Accept")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"kind":"Event","apiVersion":"v1","metadata":{"name":"e","namespace":"ns"}}`))
		}))
		cfg := &rest.Config{Host: srv.URL}
		if prefer {
			PreferProtobuf(cfg)
		}
		client, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		// What client-go's Event recorder calls (its EventSinkImpl).
		_, err = client.CoreV1().Events("").CreateWithEventNamespaceWithContext(context.Background(), &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}})
		srv.Close()
		require.NoError(t, err)
		if prefer {
			assert.Equal(t, runtime.ContentTypeProtobuf, sent)
			assert.Contains(t, accepted, runtime.ContentTypeProtobuf)
		} else {
			assert.Equal(t, runtime.ContentTypeJSON, sent, "client-go's default, which PreferProtobuf is for")
		}
	}
}

// Uncompressed: the client no longer offers gzip, so the API server sends watch events plain.
// Over TLS, as to every API server (client-go ignores DisableCompression on a plain-HTTP config:
// it then uses Go's default transport).
func TestUncompressedOffersNoGzip(t *testing.T) {
	for _, off := range []bool{false, true} {
		var offered string
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			offered = r.Header.Get("Accept-Encoding")
		}))
		cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
		if off {
			Uncompressed(cfg)
		}
		client, err := rest.HTTPClientFor(cfg)
		require.NoError(t, err)
		resp, err := client.Get(srv.URL + "/api/v1/namespaces/a/configmaps?watch=true&sendInitialEvents=true")
		require.NoError(t, err)
		_ = resp.Body.Close()
		srv.Close()
		if off {
			assert.Empty(t, offered)
		} else {
			assert.Equal(t, "gzip", offered, "Go's default, which Uncompressed is for")
		}
	}
}
