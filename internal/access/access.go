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

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Check is one question: may this client Verb Group/Resource in Namespace ("" for every one)?
type Check struct {
	Verb, Group, Resource, Namespace string
}

func (c Check) String() string {
	where := "in every namespace"
	if c.Namespace != "" {
		where = "in namespace " + c.Namespace
	}
	r := c.Resource
	if c.Group != "" {
		r += "." + c.Group
	}
	return fmt.Sprintf("%s %s %s", c.Verb, r, where)
}

// Allowed asks the API server with a SelfSubjectAccessReview, which every authenticated user
// may create.
func Allowed(ctx context.Context, client kubernetes.Interface, c Check) (bool, error) {
	r, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: c.Verb, Group: c.Group, Resource: c.Resource, Namespace: c.Namespace,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("ask the API server whether wave may %s: %w", c, err)
	}
	return r.Status.Allowed, nil
}
