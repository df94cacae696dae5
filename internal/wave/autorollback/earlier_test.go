package autorollback

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func TestAtEarlierRevision(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	// template is a pod template running image, with wave's inputs hash when hash is set and
	// a ReplicaSet's own hash label when rsHash is.
	template := func(image, hash, rsHash string) corev1.PodTemplateSpec {
		t := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}
		if hash != "" {
			t.Annotations = map[string]string{hashKey: hash}
		}
		if rsHash != "" {
			t.Labels = map[string]string{"pod-template-hash": rsHash}
		}
		return t
	}
	preWave := Made{Template: template("app:1", "", "aaa"), Created: t0}
	turnedOn := Made{Template: template("app:1", revA, "bbb"), Created: t0.Add(time.Minute)}
	replaced := Made{Template: template("app:2", "", "ccc"), Created: t0.Add(2 * time.Minute)}
	now := template("app:1", "", "")
	tests := []struct {
		name     string
		template corev1.PodTemplateSpec
		revs     []Made
		want     bool
	}{
		{"an undo to the revision from before revisions were on: earlier", now, []Made{preWave, turnedOn}, true},
		{"just restarted: the same objects, the same answer", now, []Made{turnedOn, preWave}, true},
		{"kubectl replace with a new image, its ReplicaSet not made yet: no undo", template("app:2", "", ""), []Made{preWave, turnedOn}, false},
		{"kubectl replace with a new image, its ReplicaSet made after the newest revision: no undo", template("app:2", "", ""), []Made{preWave, turnedOn, replaced}, false},
		{"made in the same second as the newest revision: taken as earlier (held, as before)", template("app:2", "", ""),
			[]Made{preWave, turnedOn, {Template: template("app:2", "", "ccc"), Created: turnedOn.Created}}, true},
		{"no revision of the newest left to compare with: held, as before", template("app:2", "", ""), []Made{preWave}, true},
		{"an Argo Rollout's ReplicaSet: its own hash label is no difference", now,
			[]Made{{Template: func() corev1.PodTemplateSpec {
				t := template("app:1", "", "")
				t.Labels = map[string]string{"rollouts-pod-template-hash": "ddd"}
				return t
			}(), Created: t0}, turnedOn}, true},
		{"another container's image differs: not that revision", template("app:3", "", ""), []Made{preWave, turnedOn}, false},
		// ReplicaSets: their numbers tell the order within a second.
		{"a replace's new ReplicaSet made in the same second as the newest: a higher number, no undo", template("app:2", "", ""),
			[]Made{{template("app:1", "", "aaa"), t0, 1, false}, {template("app:1", revA, "bbb"), t0, 2, false}, {template("app:2", "", "ccc"), t0, 3, false}}, false},
		{"an undo, before the Deployment's controller numbered it again: a lower number", now,
			[]Made{{template("app:1", "", "aaa"), t0, 1, false}, {template("app:1", revA, "bbb"), t0, 2, false}}, true},
		{"an undo, numbered again: it came back", now,
			[]Made{{template("app:1", "", "aaa"), t0, 3, true}, {template("app:1", revA, "bbb"), t0, 2, false}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, AtEarlierRevision(&tt.template, tt.revs, hashKey, revA))
		})
	}
}
