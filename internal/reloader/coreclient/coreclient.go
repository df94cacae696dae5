// Package coreclient is the reloader's API client: a REST client for the core/v1 ConfigMaps,
// Secrets and Events it reads and writes, and nothing else.
//
// An idle sidecar's memory is mostly the pages of its own binary, so what it links is what it
// costs. The generated clientset links and registers the types of every API group; this
// client's scheme knows the five types the reloader sends or receives, declared here with only
// the fields it uses. It reads protobuf, decoded by hand for those fields (proto.go), and
// writes JSON (only Events, off any path that is timed).
package coreclient

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// GroupVersion is core/v1.
var GroupVersion = schema.GroupVersion{Version: "v1"}

// Scheme holds the only types this client sends or decodes.
var Scheme = newScheme()

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypes(GroupVersion, &ConfigMap{}, &ConfigMapList{}, &Secret{}, &SecretList{}, &Event{})
	metav1.AddToGroupVersion(s, GroupVersion) // ListOptions, WatchEvent, Status
	return s
}

// New returns a client for the core/v1 API ("/api/v1") with cfg's server, credentials and
// rate limits.
func New(cfg *rest.Config) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &GroupVersion
	c.NegotiatedSerializer = serializer.NewCodecFactory(Scheme).WithoutConversion()
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	client, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("create the API client for %s: %w", c.Host, err)
	}
	return client, nil
}
