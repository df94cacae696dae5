package podrefs

import (
	"regexp"
	"testing"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/sets"
)

func TestParseStakater(t *testing.T) {
	assert.Nil(t, ParseStakater(nil, nil))
	assert.Nil(t, ParseStakater(map[string]string{StakaterAuto: "false"}, nil), "auto false opts nothing in")
	assert.Nil(t, ParseStakater(map[string]string{UpdateOnConfigChangeAnnotation: "true"}, nil))

	r := ParseStakater(map[string]string{StakaterAuto: "true", StakaterConfigMapsExclude: "skip-me, other"}, nil)
	require.NotNil(t, r)
	assert.True(t, r.AutoConfigMaps && r.AutoSecrets)
	assert.Equal(t, sets.New("skip-me", "other"), r.ExcludedConfigMaps)

	r = ParseStakater(nil, map[string]string{StakaterSecretAuto: "true"}) // on the pod template: read there
	require.NotNil(t, r)
	assert.True(t, r.AutoSecrets)
	assert.False(t, r.AutoConfigMaps)

	r = ParseStakater(map[string]string{StakaterConfigMapReload: "app-config, feature-.*", StakaterSecretReload: "(", StakaterSearch: "true"}, nil)
	require.NotNil(t, r)
	assert.True(t, r.SearchConfigMaps && r.SearchSecrets)
	require.Len(t, r.ConfigMapNames, 2)
	name, ok := Literal(r.ConfigMapNames[0])
	assert.True(t, ok)
	assert.Equal(t, "app-config", name)
	_, ok = Literal(r.ConfigMapNames[1])
	assert.False(t, ok)
	assert.True(t, r.HasPatterns())
	require.Len(t, r.Problems, 1)
	assert.Contains(t, r.Problems[0], StakaterSecretReload)
	assert.Contains(t, r.Problems[0], `"("`)
}

func TestStakaterFollows(t *testing.T) {
	match := map[string]string{StakaterMatch: "true"}
	ignore := map[string]string{StakaterIgnore: "true"}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		kind        configref.Kind
		object      string
		used        bool
		objAnn      map[string]string
		want        bool
	}{
		{"auto: a ConfigMap the pods use", map[string]string{StakaterAuto: "true"}, configref.ConfigMap, "cm", true, nil, true},
		{"auto: one they do not use", map[string]string{StakaterAuto: "true"}, configref.ConfigMap, "cm", false, nil, false},
		{"auto, excluded", map[string]string{StakaterAuto: "true", StakaterConfigMapsExclude: "cm"}, configref.ConfigMap, "cm", true, nil, false},
		{"auto, the object says ignore", map[string]string{StakaterAuto: "true"}, configref.Secret, "s", true, ignore, false},
		{"configmap auto: not Secrets", map[string]string{StakaterConfigMapAuto: "true"}, configref.Secret, "s", true, nil, false},
		{"secret auto", map[string]string{StakaterSecretAuto: "true"}, configref.Secret, "s", true, nil, true},
		{"named: used or not", map[string]string{StakaterConfigMapReload: "cm"}, configref.ConfigMap, "cm", false, nil, true},
		{"named: a regular expression", map[string]string{StakaterSecretReload: "db-.*"}, configref.Secret, "db-prod", false, nil, true},
		{"named: anchored", map[string]string{StakaterSecretReload: "db"}, configref.Secret, "db-prod", false, nil, false},
		{"named: not another kind", map[string]string{StakaterConfigMapReload: "x"}, configref.Secret, "x", true, nil, false},
		{"named, excluded", map[string]string{StakaterConfigMapReload: "cm", StakaterConfigMapsExclude: "cm"}, configref.ConfigMap, "cm", true, nil, false},
		{"search: used and matching", map[string]string{StakaterSearch: "true"}, configref.ConfigMap, "cm", true, match, true},
		{"search: used, not matching", map[string]string{StakaterSearch: "true"}, configref.ConfigMap, "cm", true, nil, false},
		{"search: matching, not used", map[string]string{StakaterSearch: "true"}, configref.ConfigMap, "cm", false, match, false},
		{"CSI: reloader auto, a class the pods mount", map[string]string{StakaterAuto: "true"}, configref.SecretProviderClass, "vault", true, nil, true},
		{"CSI: class auto", map[string]string{StakaterSecretProviderClassAuto: "true"}, configref.SecretProviderClass, "vault", true, nil, true},
		{"CSI: class auto is not Secrets", map[string]string{StakaterSecretProviderClassAuto: "true"}, configref.Secret, "s", true, nil, false},
		{"CSI: secret auto is not classes", map[string]string{StakaterSecretAuto: "true"}, configref.SecretProviderClass, "vault", true, nil, false},
		{"CSI: auto, not mounted", map[string]string{StakaterSecretProviderClassAuto: "true"}, configref.SecretProviderClass, "vault", false, nil, false},
		{"CSI: named, mounted or not", map[string]string{StakaterSecretProviderClassReload: "vault-.*"}, configref.SecretProviderClass, "vault-prod", false, nil, true},
		{"CSI: named is not a Secret of that name", map[string]string{StakaterSecretProviderClassReload: "vault"}, configref.Secret, "vault", true, nil, false},
		{"CSI: excluded", map[string]string{StakaterAuto: "true", StakaterSecretProviderClassesExclude: "vault"}, configref.SecretProviderClass, "vault", true, nil, false},
		{"CSI: the class says ignore", map[string]string{StakaterAuto: "true"}, configref.SecretProviderClass, "vault", true, ignore, false},
		{"CSI: search, the class matches", map[string]string{StakaterSearch: "true"}, configref.SecretProviderClass, "vault", true, match, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := StakaterDialect{SecretProviderClasses: true}.Parse(tc.annotations, nil)
			require.NotNil(t, r)
			assert.Equal(t, tc.want, r.Follows(tc.kind, tc.object, tc.used, tc.objAnn))
		})
	}
}

// Without --enable-csi-integration, Reloader's annotations for SecretProviderClasses ask for
// nothing, and its auto annotation follows no class: as Reloader.
func TestStakaterSecretProviderClassesOnlyWithCSI(t *testing.T) {
	assert.Nil(t, ParseStakater(map[string]string{StakaterSecretProviderClassReload: "vault"}, nil))
	assert.Nil(t, ParseStakater(map[string]string{StakaterSecretProviderClassAuto: "true"}, nil))
	r := ParseStakater(map[string]string{StakaterAuto: "true"}, nil)
	require.NotNil(t, r)
	assert.False(t, r.Follows(configref.SecretProviderClass, "vault", true, nil))
	assert.True(t, r.Follows(configref.Secret, "vault", true, nil))
}

func TestStakaterEnvName(t *testing.T) {
	assert.Equal(t, "STAKATER_APP_CONFIG_CONFIGMAP", StakaterEnvName(configref.ConfigMap, "app-config"))
	assert.Equal(t, "STAKATER_DB_CREDS_V2_SECRET", StakaterEnvName(configref.Secret, "db.creds--v2"))
	assert.Equal(t, "STAKATER_A__CONFIGMAP", StakaterEnvName(configref.ConfigMap, "a."), "as Reloader: a trailing separator stays")
	assert.Equal(t, "STAKATER_VAULT_PROD_SECRETPROVIDERCLASS", StakaterEnvName(configref.SecretProviderClass, "vault-prod"))
}

func FuzzParseStakater(f *testing.F) {
	f.Add("app, feature-.*", "db", "true")
	f.Add("(", "[a-", "yes")
	f.Fuzz(func(t *testing.T, cms, secrets, search string) {
		r := ParseStakater(map[string]string{StakaterConfigMapReload: cms, StakaterSecretReload: secrets, StakaterSearch: search}, nil)
		if r == nil {
			return
		}
		all := append([]*regexp.Regexp{}, r.ConfigMapNames...)
		for _, re := range append(all, r.SecretNames...) {
			if name, ok := Literal(re); ok && !re.MatchString(name) {
				t.Fatalf("literal %q does not match itself", name)
			}
		}
		_ = r.Follows(configref.ConfigMap, "x", true, nil)
	})
}

// Reloader's --*-annotation flags rename its annotations, and --auto-reload-all makes every
// workload follow the config its pods use unless an auto annotation says otherwise.
func TestStakaterDialect(t *testing.T) {
	renamed := DefaultStakaterNames
	renamed.Auto, renamed.ConfigMapReload, renamed.Match = "example.com/auto", "example.com/configmaps", "example.com/match"
	tests := []struct {
		name          string
		dialect       StakaterDialect
		workload      map[string]string
		template      map[string]string
		nilRules      bool
		autoCM, autoS bool
		named         string // a ConfigMap name the reload list must match
	}{
		{name: "defaults, no annotation", nilRules: true},
		{name: "renamed auto", dialect: StakaterDialect{Names: renamed}, workload: map[string]string{"example.com/auto": "true"}, autoCM: true, autoS: true},
		{name: "the default name is not read once renamed", dialect: StakaterDialect{Names: renamed}, workload: map[string]string{StakaterAuto: "true"}, nilRules: true},
		{name: "renamed reload list", dialect: StakaterDialect{Names: renamed}, workload: map[string]string{"example.com/configmaps": "app-config"}, named: "app-config"},
		{name: "auto-reload-all: no annotation at all", dialect: StakaterDialect{AutoReloadAll: true}, autoCM: true, autoS: true},
		{name: "auto-reload-all: auto false opts out", dialect: StakaterDialect{AutoReloadAll: true}, workload: map[string]string{StakaterAuto: "false"}, nilRules: true},
		{name: "auto-reload-all: configmap auto false opts out of ConfigMaps only", dialect: StakaterDialect{AutoReloadAll: true}, workload: map[string]string{StakaterConfigMapAuto: "false"}, autoS: true},
		{name: "auto-reload-all with a reload list: both", dialect: StakaterDialect{AutoReloadAll: true}, workload: map[string]string{StakaterConfigMapReload: "other"}, autoCM: true, autoS: true, named: "other"},
		{name: "auto-reload-all reads the template's auto false", dialect: StakaterDialect{AutoReloadAll: true}, template: map[string]string{StakaterAuto: "false"}, nilRules: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.dialect.Parse(tt.workload, tt.template)
			if tt.nilRules {
				assert.Nil(t, r)
				return
			}
			require.NotNil(t, r)
			assert.Equal(t, tt.autoCM, r.AutoConfigMaps, "ConfigMaps")
			assert.Equal(t, tt.autoS, r.AutoSecrets, "Secrets")
			if tt.named != "" {
				assert.True(t, r.Named(configref.ConfigMap, tt.named))
			}
		})
	}
	r := StakaterDialect{Names: renamed}.Parse(map[string]string{renamed.Search: "true"}, nil)
	require.NotNil(t, r)
	assert.True(t, r.Follows(configref.ConfigMap, "shared", true, map[string]string{"example.com/match": "true"}), "search matches under the renamed match annotation")
	assert.False(t, r.Follows(configref.ConfigMap, "shared", true, map[string]string{StakaterMatch: "true"}))
}
