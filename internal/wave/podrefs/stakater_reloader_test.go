package podrefs

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/configwave/configwave/internal/kube/configref"
)

// Stakater Reloader's own test cases (v1.4.21: pkg/common/common_test.go, the handler tests of
// internal/pkg/handler/upgrade_test.go at v1.4.17, the end-to-end tests of test/e2e), and the
// edges of its ShouldReload no test of its covers, read from its code: whether a change of an
// object rolls a workload, decided as Reloader decides it.
func TestStakaterDialectMatchesReloader(t *testing.T) {
	const (
		cmReload  = StakaterConfigMapReload
		secReload = StakaterSecretReload
		spcReload = StakaterSecretProviderClassReload
		auto      = StakaterAuto
		cmAuto    = StakaterConfigMapAuto
		secAuto   = StakaterSecretAuto
		spcAuto   = StakaterSecretProviderClassAuto
		search    = StakaterSearch
		match     = StakaterMatch
		ignore    = StakaterIgnore
		cmExcl    = StakaterConfigMapsExclude
		secExcl   = StakaterSecretsExclude
		spcExcl   = StakaterSecretProviderClassesExclude
	)
	type m = map[string]string
	cm, sec, spc := configref.ConfigMap, configref.Secret, configref.SecretProviderClass
	for _, tt := range []struct {
		name       string
		workload   m // metadata
		template   m
		object     m // the changed object's own annotations
		kind       configref.Kind
		changed    string
		referenced bool
		all        bool // --auto-reload-all
		want       bool
	}{
		// the handler tests (v1.4.17)
		{"#16 named in the reload list", m{cmReload: "x", secReload: "x", spcReload: "x"}, nil, nil, cm, "x", true, false, true},
		{"#17 no annotation, no auto-reload-all", m{}, m{}, nil, cm, "x", true, false, false},
		{"#18 no annotation, auto-reload-all", m{}, m{}, nil, cm, "x", true, true, true},
		{"#19 search and match", m{search: "true"}, m{}, m{match: "true"}, cm, "x", true, false, true},
		{"#20 search, match false", m{search: "true"}, m{}, m{match: "false"}, cm, "x", true, false, false},
		{"#21 search, not referenced", m{search: "true"}, m{}, m{match: "true"}, cm, "x", false, false, false},
		{"#22 configmap auto", m{cmAuto: "true"}, m{}, nil, cm, "x", true, false, true},
		{"#23 secret auto", m{secAuto: "true"}, m{}, nil, sec, "x", true, false, true},
		{"#24 secretproviderclass auto", m{spcAuto: "true"}, m{}, nil, spc, "x", true, false, true},
		{"#25 configmap excluded", m{cmExcl: "x"}, m{}, nil, cm, "x", true, false, false},
		{"#26 secret excluded", m{secExcl: "x"}, m{}, nil, sec, "x", true, false, false},
		{"#27 secretproviderclass excluded", m{spcExcl: "x"}, m{}, nil, spc, "x", true, false, false},
		{"#28 nothing on the workload, auto on the template: the template's", nil, m{auto: "true"}, nil, cm, "p", true, false, true},
		{"#29 the workload's reload list, auto on the template: no fallback", m{cmReload: "b", secReload: "b", spcReload: "b"}, m{auto: "true"}, nil, cm, "p", false, false, false},
		{"#30 the object says ignore", m{cmReload: "x"}, nil, m{ignore: "true"}, cm, "x", true, false, false},
		// the end-to-end tests (v1.4.21)
		{"#31 auto, a ConfigMap", m{auto: "true"}, nil, nil, cm, "cm1", true, false, true},
		{"#32 auto, a Secret", m{auto: "true"}, nil, nil, sec, "s1", true, false, true},
		{"#33 configmap auto: its ConfigMap", m{cmAuto: "true"}, nil, nil, cm, "cm1", true, false, true},
		{"#34 secret auto: its Secret", m{secAuto: "true"}, nil, nil, sec, "s1", true, false, true},
		{"#35 secretproviderclass auto: not a ConfigMap", m{spcAuto: "true"}, nil, nil, cm, "cm1", true, false, false},
		{"#36 auto with a reload list: the other used ConfigMap too", m{auto: "true", cmReload: "cm1"}, nil, nil, cm, "cm2", true, false, true},
		{"#37 auto false", m{auto: "false"}, nil, nil, cm, "cm1", true, false, false},
		{"#38 nothing anywhere", m{}, m{}, nil, cm, "cm1", true, false, false},
		{"#39 the reload list on the template only", m{}, m{cmReload: "cm1"}, nil, cm, "cm1", true, false, true},
		{"#40 the Secret list on the template only", m{}, m{secReload: "s1"}, nil, sec, "s1", true, false, true},
		{"#41 auto on the template only", m{}, m{auto: "true"}, nil, cm, "cm1", true, false, true},
		{"#42 the class list on the template only", m{}, m{spcReload: "spc"}, nil, spc, "spc", true, false, true},
		{"#43 class auto on the template only", m{}, m{spcAuto: "true"}, nil, spc, "spc", true, false, true},
		{"#44 on both", m{cmReload: "cm1"}, m{cmReload: "cm1"}, nil, cm, "cm1", true, false, true},
		{"#45 a ConfigMap list on the template, a Secret changes", m{}, m{cmReload: "cm1"}, nil, sec, "s1", true, false, false},
		{"#46 a list of two", m{cmReload: "cm1,cm2"}, nil, nil, cm, "cm2", true, false, true},
		{"#47 auto, the ConfigMap excluded", m{auto: "true", cmExcl: "cm1"}, nil, nil, cm, "cm1", true, false, false},
		{"#48 auto, another excluded", m{auto: "true", cmExcl: "cm1"}, nil, nil, cm, "cm2", true, false, true},
		{"#49 auto, the Secret excluded", m{auto: "true", secExcl: "s1"}, nil, nil, sec, "s1", true, false, false},
		{"#50 auto, another Secret excluded", m{auto: "true", secExcl: "s1"}, nil, nil, sec, "s2", true, false, true},
		{"#51 auto, the class excluded", m{auto: "true", spcExcl: "spc"}, nil, nil, spc, "spc", true, false, false},
		{"#52 an exclusion on the template is not read (its code; the pending test disagrees)", m{}, m{auto: "true", cmExcl: "cm1"}, nil, cm, "cm1", true, false, true},
		{"#53 search and match", m{search: "true"}, nil, m{match: "true"}, cm, "cm1", true, false, true},
		{"#54 search, no match", m{search: "true"}, nil, m{}, cm, "cm1", true, false, false},
		{"#55 match, no search", m{}, nil, m{match: "true"}, cm, "cm1", true, false, false},
		{"#56 search on the template only (its code)", m{}, m{search: "true"}, m{match: "true"}, cm, "cm1", true, false, true},
		{"#57 ignore, a ConfigMap", m{cmReload: "cm1"}, nil, m{ignore: "true"}, cm, "cm1", true, false, false},
		{"#58 ignore, a Secret", m{secReload: "s1"}, nil, m{ignore: "true"}, sec, "s1", true, false, false},
		{"#59 named, not used: rolls", m{auto: "true", cmReload: "cm2"}, nil, nil, cm, "cm2", false, false, true},
		{"#60 auto, excluded", m{auto: "true", cmExcl: "cm2"}, nil, nil, cm, "cm2", true, false, false},
		{"#61 both lists, the Secret changes", m{cmReload: "cm1", secReload: "s1"}, nil, nil, sec, "s1", false, false, true},
		{"#62 a pattern that matches", m{cmReload: "app-config-.*"}, nil, nil, cm, "app-config-7f3k", true, false, true},
		{"#63 a pattern that does not", m{cmReload: "app-config-.*"}, nil, nil, cm, "other-7f3k", false, false, false},
		{"#64 a Secret pattern", m{secReload: "app-secret-.*"}, nil, nil, sec, "app-secret-9x", false, false, true},
		{"#65 auto-reload-all, no annotation", m{}, m{}, nil, cm, "cm1", true, true, true},
		{"#66 auto-reload-all, auto false", m{auto: "false"}, nil, nil, cm, "cm1", true, true, false},
		// the edges of ShouldReload, from its code
		{"a|b is ^a or b$: a-x", m{cmReload: "a|b"}, nil, nil, cm, "a-x", false, false, true},
		{"a|b is ^a or b$: x-b", m{cmReload: "a|b"}, nil, nil, cm, "x-b", false, false, true},
		{"a|b: x", m{cmReload: "a|b"}, nil, nil, cm, "x", false, false, false},
		{"(a|b) is whole: a-x", m{cmReload: "(a|b)"}, nil, nil, cm, "a-x", false, false, false},
		{"a.b: the dot is any character", m{cmReload: "a.b"}, nil, nil, cm, "aXb", false, false, true},
		{"entries trimmed", m{cmReload: " a , b "}, nil, nil, cm, "b", false, false, true},
		{"auto True", m{auto: "True"}, nil, nil, cm, "c", true, false, true},
		{"auto 1", m{auto: "1"}, nil, nil, cm, "c", true, false, true},
		{"auto with blanks is not true", m{auto: " true "}, nil, nil, cm, "c", true, false, false},
		{"auto tRUE is not true", m{auto: "tRUE"}, nil, nil, cm, "c", true, false, false},
		{"search True is not true", m{search: "True"}, nil, m{match: "true"}, cm, "c", true, false, false},
		{"match True is not true", m{search: "true"}, nil, m{match: "True"}, cm, "c", true, false, false},
		{"ignore True is not ignore", m{auto: "true"}, nil, m{ignore: "True"}, cm, "c", true, false, true},
		{"auto false on the workload: no fallback", m{auto: "false"}, m{auto: "true"}, nil, cm, "c", true, false, false},
		{"auto empty on the workload: no fallback", m{auto: ""}, m{cmReload: "c"}, nil, cm, "c", true, false, false},
		{"a Secret list on the workload: a ConfigMap falls back to the template", m{secReload: "s"}, m{cmReload: "c"}, nil, cm, "c", false, false, true},
		{"excluded on the workload, auto on the template", m{cmExcl: "c"}, m{auto: "true"}, nil, cm, "c", true, false, false},
		{"excluded and named: excluded", m{cmReload: "c", cmExcl: "c"}, nil, nil, cm, "c", true, false, false},
		{"an exclusion is an exact name", m{auto: "true", cmExcl: "c.*"}, nil, nil, cm, "c1", true, false, true},
		{"auto-reload-all, auto yes: out", m{auto: "yes"}, nil, nil, cm, "c", true, true, false},
		{"auto-reload-all with another ConfigMap named", m{cmReload: "other"}, nil, nil, cm, "c", true, true, true},
		{"secret auto: not a ConfigMap", m{secAuto: "true"}, nil, nil, cm, "c", true, false, false},
		{"auto false, configmap auto true", m{auto: "false", cmAuto: "true"}, nil, nil, cm, "c", true, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := StakaterDialect{AutoReloadAll: tt.all, SecretProviderClasses: true}.Parse(tt.workload, tt.template)
			got := r != nil && r.Follows(tt.kind, tt.changed, tt.referenced, tt.object)
			assert.Equal(t, tt.want, got)
		})
	}
}
