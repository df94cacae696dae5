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
		{name: "a typo rolls as without", a: map[string]string{Annotation: "Manual"}, problem: `configwave.io/approval: "Manual" is not "manual" or "auto"; rollouts are not gated`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problem := Of(tc.a)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.problem, problem)
		})
	}
}

func TestIDNamesOneChange(t *testing.T) {
	assert.Equal(t, ID("key=a,configmap/app=1"), ID("key=a,configmap/app=1"))
	assert.NotEqual(t, ID("key=a,configmap/app=1"), ID("key=a,configmap/app=2"))
	assert.Regexp(t, `^c-[0-9a-f]{16}$`, ID(""))
}
