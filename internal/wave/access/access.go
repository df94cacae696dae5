// Package access asks the API server, once at start, what this client may do: wave runs under
// whatever RBAC it is given, its own or a peer's (Stakater Reloader's chart grants no watch on
// workloads; Wave's chart nothing on CronJobs), and a cache it may not fill must be said at
// start, never waited for in silence.
//
//	ok, err := access.Allowed(ctx, client, access.Check{Verb: "watch", Group: "apps", Resource: "deployments", Namespace: ns})
package access

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/wave/waveclient"
)

// Check is one question: may this client Verb Group/Resource in Namespace ("" for every one)?
// Cluster marks a resource that has no namespace, such as namespaces themselves. Name, when
// set, asks about that one object (RBAC's resourceNames).
type Check struct {
	Verb, Group, Resource, Namespace string
	Cluster                          bool
	Name                             string
}

func (c Check) String() string {
	where := "in every namespace"
	switch {
	case c.Cluster:
		where = "at cluster scope"
	case c.Namespace != "":
		where = "in namespace " + c.Namespace
	}
	r := c.Resource
	if c.Group != "" {
		r += "." + c.Group
	}
	if c.Name != "" {
		r += " " + c.Name
	}
	return fmt.Sprintf("%s %s %s", c.Verb, r, where)
}

// Allowed asks the API server with a SelfSubjectAccessReview, which every authenticated user
// may create.
func Allowed(ctx context.Context, client waveclient.Interface, c Check) (bool, error) {
	r, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: c.Verb, Group: c.Group, Resource: c.Resource, Namespace: c.Namespace, Name: c.Name,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("ask the API server whether wave may %s: %w", c, err)
	}
	return r.Status.Allowed, nil
}

// Each is the checks of every verb on group/resource in each namespace, or in every namespace
// when none is listed.
func Each(namespaces []string, group, resource string, verbs ...string) []Check {
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var out []Check
	for _, ns := range namespaces {
		for _, v := range verbs {
			out = append(out, Check{Verb: v, Group: group, Resource: resource, Namespace: ns})
		}
	}
	return out
}

// Missing asks every check, in order, and returns those the API server denies.
func Missing(ctx context.Context, client waveclient.Interface, checks ...Check) ([]Check, error) {
	var missing []Check
	for _, c := range checks {
		ok, err := Allowed(ctx, client, c)
		if err != nil {
			return nil, err
		}
		if !ok {
			missing = append(missing, c)
		}
	}
	return missing, nil
}

// Require is the pre-flight of a feature whose informers would otherwise never sync, leaving
// wave never ready and saying nothing: nil when every check is allowed, else an error that
// says what the feature reads (needs), what wave may not do, and what to grant (fix).
func Require(ctx context.Context, client waveclient.Interface, needs, fix string, checks ...Check) error {
	missing, err := Missing(ctx, client, checks...)
	if err != nil {
		return fmt.Errorf("%s: %w", needs, err)
	}
	if len(missing) == 0 {
		return nil
	}
	denied := make([]string, len(missing))
	for i, c := range missing {
		denied[i] = c.String()
	}
	return fmt.Errorf("%s, and wave may not %s: %s", needs, strings.Join(denied, ", nor "), fix)
}
