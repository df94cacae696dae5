package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// forbidden is the API server's RBAC refusal: `User "x" cannot list resource "replicasets" in
// API group "apps" in the namespace "shop"`.
var forbidden = regexp.MustCompile(`cannot ([a-z]+) resource "([a-z0-9.-]+)" in API group "([a-z0-9.-]*)"(?: in the namespace "([a-z0-9-]+)")?`)

// explain says what was being done when err came, and for an RBAC refusal the rule that
// allows it, as a line to give whoever grants access.
func explain(err error, doing string) error {
	if apierrors.IsNotFound(err) && strings.Contains(err.Error(), "the server could not find the requested resource") {
		return fmt.Errorf("%s: %w (the API server serves no such kind here: for a Rollout, Argo Rollouts is not installed)", doing, err)
	}
	if !apierrors.IsForbidden(err) {
		return fmt.Errorf("%s: %w", doing, err)
	}
	// The refusal's own message, also where a Secret's error was shortened on the way (it
	// quotes no value: only who may not do what).
	message := err.Error()
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		message = status.Status().Message
	}
	m := forbidden.FindStringSubmatch(message)
	if m == nil {
		return fmt.Errorf("%s: %w (your RBAC does not allow it)", doing, err)
	}
	verb, resource, group, ns := m[1], m[2], m[3], m[4]
	qualified := resource
	if group != "" {
		qualified += "." + group
	}
	scope := "a ClusterRole"
	line := fmt.Sprintf("kubectl create clusterrole configwave-%s-%s --verb=%s --resource=%s", verb, resource, verb, qualified)
	if ns != "" {
		scope = "a Role"
		line = fmt.Sprintf("kubectl create role configwave-%s-%s --verb=%s --resource=%s -n %s", verb, resource, verb, qualified, ns)
	}
	return fmt.Errorf("%s: %w\nYour RBAC does not allow %s on %s; %s with this rule does (bind it to you with kubectl create rolebinding): %s",
		doing, err, verb, qualified, scope, line)
}
