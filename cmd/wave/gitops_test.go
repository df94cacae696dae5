package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
)

// A GitOps controller (Argo CD with server-side apply, Flux) applies the Git version of a
// Deployment as its own field manager; wave writes three annotations as another. Re-applying
// the Git version, as every sync does, leaves wave's fields in place and changes nothing, so
// there is no rollout loop (docs/gitops.md).
func TestGitOpsReapplyKeepsWavesFields(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	git := deployment(ns, "app", withEnvKey("cm", "a"))
	git.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	manifest, err := json.Marshal(git)
	require.NoError(t, err)
	apply := func() *appsv1.Deployment {
		d, err := client.AppsV1().Deployments(ns).Patch(ctx(t), "app", types.ApplyPatchType, manifest,
			metav1.PatchOptions{FieldManager: "argocd-controller", Force: ptr(true)})
		require.NoError(t, err)
		return d
	}
	apply()
	p := startWave(t, ns)
	before := inputsHash(waitRecorded(t, client, ns, "app"))
	patchCM(t, client, ns, "cm", `{"data":{"a":"2"}}`)
	rolled := waitTemplateHashChange(t, client, ns, "app", before)
	settle(t, p)
	require.Len(t, replicaSets(t, client, ns, "app"), 2)
	rolls := p.Metric(`configwave_wave_reconciles_total{result="rolled"}`)

	again := apply() // the next sync of the unchanged Git version
	assert.Equal(t, rolled.Generation, again.Generation, "the re-apply changed nothing in the spec")
	for _, k := range []string{podrefs.ConfigHashAnnotation, rollout.InputsHashAnnotation} {
		assert.Equal(t, rolled.Spec.Template.Annotations[k], again.Spec.Template.Annotations[k], "%s survives the re-apply", k)
	}
	for _, k := range []string{rollout.InputsAnnotation, rolloutrecord.Annotation} {
		assert.NotEmpty(t, again.Annotations[k], k)
		assert.Equal(t, rolled.Annotations[k], again.Annotations[k], "%s survives the re-apply", k)
	}
	settle(t, p)
	assert.Len(t, replicaSets(t, client, ns, "app"), 2, "no rollout after the re-apply")
	assert.Equal(t, rolls, p.Metric(`configwave_wave_reconciles_total{result="rolled"}`), "no rollout loop")

	var owners []string
	for _, mf := range again.ManagedFields {
		if mf.FieldsV1 != nil && strings.Contains(mf.FieldsV1.GetRawString(), podrefs.ConfigHashAnnotation) {
			owners = append(owners, mf.Manager)
		}
	}
	assert.Equal(t, []string{"configwave-wave"}, owners, "wave's field manager, named in docs/gitops.md, owns the hash")
}
