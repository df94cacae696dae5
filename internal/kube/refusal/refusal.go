// Package refusal names what refused a create that RBAC allows, from the API server's own
// wording: a ResourceQuota (and why), or an admission webhook. The rest of the message is never
// repeated: a webhook's text may quote the object, and wave's objects may hold a Secret's
// values (its install key, a revision's snapshot of a Secret).
//
//	if r := refusal.Of(err); r.Quota { ... r.By ... }
package refusal

import (
	"fmt"
	"regexp"
)

// quotaRefusal is the API server's wording when a ResourceQuota refuses an object: exceeded
// (no room left), status unknown (the quota controller has not computed it yet, as in a new
// namespace), or failed (the quota needs something the object lacks).
var quotaRefusal = regexp.MustCompile(`(exceeded quota|status unknown for quota|failed quota): ([a-z0-9]([-a-z0-9.]*[a-z0-9])?)`)

// webhookRefusal names the admission webhook that refused it.
var webhookRefusal = regexp.MustCompile(`admission webhook "([a-z0-9.-]{1,253})" denied`)

// Refusal is what refused a create.
type Refusal struct {
	By    string // "ResourceQuota NAME (exceeded quota)", "admission webhook NAME", ...
	Quota bool
}

// Of names what refused a create that RBAC allows (a 403 that an access review said would
// not come).
func Of(err error) Refusal {
	msg := err.Error()
	if m := quotaRefusal.FindStringSubmatch(msg); m != nil {
		return Refusal{By: fmt.Sprintf("ResourceQuota %s (%s)", m[2], m[1]), Quota: true}
	}
	if m := webhookRefusal.FindStringSubmatch(msg); m != nil {
		return Refusal{By: "admission webhook " + m[1]}
	}
	return Refusal{By: "an admission policy (403 where RBAC allows the create)"}
}
