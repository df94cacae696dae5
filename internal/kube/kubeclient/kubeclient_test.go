package kubeclient

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
