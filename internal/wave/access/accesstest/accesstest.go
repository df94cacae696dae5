// Package accesstest answers SelfSubjectAccessReviews on a fake clientset, for unit tests of
// code that asks what it may do (internal/wave/access).
package accesstest

import (
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/configwave/configwave/internal/wave/access"
)

// Answer makes client allow what allow allows.
func Answer(client *fake.Clientset, allow func(access.Check) bool) {
	client.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		at := r.Spec.ResourceAttributes
		r.Status.Allowed = allow(access.Check{Verb: at.Verb, Group: at.Group, Resource: at.Resource, Namespace: at.Namespace, Name: at.Name})
		return true, r, nil
	})
}
