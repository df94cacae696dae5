package autorollback

import (
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ErrAbortedAlready: the Rollout is aborted already (Argo Rollouts aborts one itself when an
// analysis fails): the undo is made, with no write.
var ErrAbortedAlready = errors.New("aborted already")

// RolloutStillFailed says whether an Argo Rollout read afresh still runs the template whose
// rollout was judged to have failed: of the failed config revision, at the generation judged.
// A change since (an image fixed, another change) is not aborted, as a Deployment's undo is
// not made over one (StillFailed); one already aborted needs no second abort
// (ErrAbortedAlready).
func RolloutStillFailed(r *unstructured.Unstructured, inputsHashAnnotation, failed string, judgedGeneration int64) error {
	what := "rollout " + r.GetNamespace() + "/" + r.GetName()
	hash, _, _ := unstructured.NestedString(r.Object, "spec", "template", "metadata", "annotations", inputsHashAnnotation)
	switch aborted, _, _ := unstructured.NestedBool(r.Object, "status", "abort"); {
	case hash != failed:
		return fmt.Errorf("%s: its pod template is no longer of the failed config: left as it is", what)
	case r.GetGeneration() != judgedGeneration:
		return fmt.Errorf("%s: its spec changed since the rollout was judged to have failed (a fix, another change: generation %d, judged at %d): left as it is",
			what, r.GetGeneration(), judgedGeneration)
	case aborted:
		return fmt.Errorf("%s: %w", what, ErrAbortedAlready)
	}
	return nil
}

// AbortPatchAt is `kubectl argo rollouts abort` (a merge patch of the Rollout's status),
// tested against the resourceVersion read: a Rollout changed since is answered 409, read again
// and decided again.
func AbortPatchAt(resourceVersion string) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": resourceVersion}, "status": map[string]any{"abort": true}})
}
