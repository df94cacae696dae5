package approval

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a       map[string]string
		want    Gate
		problem string
	}{
		{name: "none", a: nil},
		{name: "auto", a: map[string]string{Annotation: "auto"}},
		{name: "manual, approved", a: map[string]string{Annotation: "manual", ApproveAnnotation: "c-1"}, want: Gate{Manual: true, Approved: "c-1"}},
		{name: "manual, rejected", a: map[string]string{Annotation: "manual", RejectAnnotation: "c-2"}, want: Gate{Manual: true, Rejected: "c-2"}},
		{name: "written another way", a: map[string]string{Annotation: " Manual "}, want: Gate{Manual: true}},
		{name: "a value it does not take gates, and says so", a: map[string]string{Annotation: "true"}, want: Gate{Manual: true},
			problem: `configwave.io/approval: "true" is not "manual" or "auto"; taken as "manual": each config change waits for approval`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problem := Of(tc.a)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.problem, problem)
		})
	}
}

func TestIDNamesOneChange(t *testing.T) {
	assert.Equal(t, ID("configmap/app=1", "configmap/app=2"), ID("configmap/app=1", "configmap/app=2"))
	assert.NotEqual(t, ID("configmap/app=1", "configmap/app=2"), ID("configmap/app=1", "configmap/app=3"), "another content")
	assert.NotEqual(t, ID("configmap/app=1", "configmap/app=2"), ID("configmap/app=3", "configmap/app=2"), "the same content from another")
	assert.Regexp(t, `^c-[0-9a-f]{16}$`, ID("", ""))
}
