package podrefs

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/configwave/configwave/internal/kube/configref"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Stakater Reloader's annotations, read as Reloader documents them, so that manifests written
// for it work unchanged.
const (
	StakaterAuto              = "reloader.stakater.com/auto"
	StakaterConfigMapAuto     = "configmap.reloader.stakater.com/auto"
	StakaterSecretAuto        = "secret.reloader.stakater.com/auto"
	StakaterConfigMapReload   = "configmap.reloader.stakater.com/reload"
	StakaterSecretReload      = "secret.reloader.stakater.com/reload"
	StakaterSearch            = "reloader.stakater.com/search"
	StakaterMatch             = "reloader.stakater.com/match"  // on a ConfigMap or Secret: found by search
	StakaterIgnore            = "reloader.stakater.com/ignore" // on a ConfigMap or Secret: never reloads anything
	StakaterConfigMapsExclude = "configmaps.exclude.reloader.stakater.com/reload"
	StakaterSecretsExclude    = "secrets.exclude.reloader.stakater.com/reload"
	// Reloader's annotations for SecretProviderClasses (--enable-csi-integration). Reloader
	// has no flags to rename them.
	StakaterSecretProviderClassReload    = "secretproviderclass.reloader.stakater.com/reload"
	StakaterSecretProviderClassAuto      = "secretproviderclass.reloader.stakater.com/auto"
	StakaterSecretProviderClassesExclude = "secretproviderclasses.exclude.reloader.stakater.com/reload"
	// StakaterPausePeriod (workload): after a rollout, further changes wait this long.
	StakaterPausePeriod = "deployment.reloader.stakater.com/pause-period"
	// StakaterRolloutStrategy (Argo Rollout): "restart" restarts the pods through the
	// Rollout's spec.restartAt instead of writing its template; "rollout", the default,
	// writes the template.
	StakaterRolloutStrategy = "reloader.stakater.com/rollout-strategy"
	// StakaterPausedAt (Deployment): when Reloader paused it (spec.paused) for its
	// pause-period, RFC 3339; Reloader's own timer resumed it.
	StakaterPausedAt = "deployment.reloader.stakater.com/paused-at"
	// StakaterLastReloadedFrom is the pod template annotation of Reloader's annotations
	// strategy: JSON naming the last object that rolled the workload, and its hash.
	StakaterLastReloadedFrom = "reloader.stakater.com/last-reloaded-from"
	// StakaterEnvPrefix opens the env vars of Reloader's env-vars strategy:
	// STAKATER_<NAME>_CONFIGMAP or _SECRET, valued with Reloader's hash of the object.
	StakaterEnvPrefix = "STAKATER_"
)

// StakaterNames are the names of Reloader's annotations. Its --*-annotation flags rename them;
// the exclusion lists keep their names, as in Reloader.
type StakaterNames struct {
	Auto, ConfigMapAuto, SecretAuto string // --auto-annotation, --configmap-auto-annotation, --secret-auto-annotation
	ConfigMapReload, SecretReload   string // --configmap-annotation, --secret-annotation
	Search, Match                   string // --auto-search-annotation, --search-match-annotation
	Ignore                          string // --ignore-annotation
	PausePeriod                     string // --pause-deployment-annotation
	PausedAt                        string // --pause-deployment-time-annotation: when Reloader paused a Deployment
}

// DefaultStakaterNames are Reloader's defaults.
var DefaultStakaterNames = StakaterNames{
	Auto: StakaterAuto, ConfigMapAuto: StakaterConfigMapAuto, SecretAuto: StakaterSecretAuto,
	ConfigMapReload: StakaterConfigMapReload, SecretReload: StakaterSecretReload,
	Search: StakaterSearch, Match: StakaterMatch, Ignore: StakaterIgnore,
	PausePeriod: StakaterPausePeriod, PausedAt: StakaterPausedAt,
}

// StakaterDialect is how this wave reads Reloader's annotations: under which names, and
// whether --auto-reload-all makes every workload follow the config its pods use unless its
// auto annotation says "false".
type StakaterDialect struct {
	Names         StakaterNames
	AutoReloadAll bool
	// SecretProviderClasses: its annotations for SecretProviderClasses are read too
	// (--enable-csi-integration); without it they ask for nothing, as in Reloader.
	SecretProviderClasses bool
}

// names is d's names, Reloader's defaults for the zero value.
func (d StakaterDialect) names() StakaterNames {
	if d.Names == (StakaterNames{}) {
		return DefaultStakaterNames
	}
	return d.Names
}

// PausePeriod is the name of Reloader's pause-period annotation in d.
func (d StakaterDialect) PausePeriod() string { return d.names().PausePeriod }

// PausedAt is the name of Reloader's paused-at annotation in d.
func (d StakaterDialect) PausedAt() string { return d.names().PausedAt }

// Ignored reports whether an object's annotations say Reloader's ignore (under d's name):
// exactly "true", as Reloader compares it.
func (d StakaterDialect) Ignored(annotations map[string]string) bool {
	return stakaterTrue(annotations[d.names().Ignore])
}

// StakaterRules is what Stakater Reloader's annotations on one workload ask for, per kind of
// changed object.
type StakaterRules struct {
	names StakaterNames // for Follows: the match and ignore annotations of objects
	// Auto: every ConfigMap (Secret, SecretProviderClass) the pods use.
	AutoConfigMaps, AutoSecrets, AutoSecretProviderClasses bool
	// Named: ConfigMaps (Secrets, SecretProviderClasses) whose names match, used by the pods
	// or not. Reloader reads each entry as a regular expression between ^ and $, as written;
	// a plain name is the common case.
	ConfigMapNames, SecretNames, SecretProviderClassNames []*regexp.Regexp
	// Search: the objects of that kind the pods use that carry reloader.stakater.com/match.
	SearchConfigMaps, SearchSecrets, SearchSecretProviderClasses bool
	// Excluded names, exactly.
	ExcludedConfigMaps, ExcludedSecrets, ExcludedSecretProviderClasses sets.Set[string]
	// Problems: entries that are not valid expressions; skipped, and reported.
	Problems []string
}

// ParseStakater reads Reloader's annotations under their default names.
func ParseStakater(workload, template map[string]string) *StakaterRules {
	return StakaterDialect{}.Parse(workload, template)
}

// Parse reads Reloader's annotations as Reloader's ShouldReload does, for each kind of changed
// object apart: from the workload's metadata when it holds any of the four that concern that
// kind (its reload list, auto, its typed auto, search), their presence deciding, not their
// value; else from the pod template's. auto and the typed autos are read as Go's
// strconv.ParseBool reads them, search and match and ignore only as exactly "true"; the
// exclusions come from the metadata alone. nil when they ask for nothing.
func (d StakaterDialect) Parse(workload, template map[string]string) *StakaterRules {
	n := d.names()
	r := &StakaterRules{names: n}
	for _, k := range []struct {
		kind                       configref.Kind
		reload, typedAuto, exclude string
		on                         bool
		auto, search               *bool
		names                      *[]*regexp.Regexp
		excluded                   *sets.Set[string]
	}{
		{configref.ConfigMap, n.ConfigMapReload, n.ConfigMapAuto, StakaterConfigMapsExclude, true, &r.AutoConfigMaps, &r.SearchConfigMaps, &r.ConfigMapNames, &r.ExcludedConfigMaps},
		{configref.Secret, n.SecretReload, n.SecretAuto, StakaterSecretsExclude, true, &r.AutoSecrets, &r.SearchSecrets, &r.SecretNames, &r.ExcludedSecrets},
		{configref.SecretProviderClass, StakaterSecretProviderClassReload, StakaterSecretProviderClassAuto, StakaterSecretProviderClassesExclude, d.SecretProviderClasses,
			&r.AutoSecretProviderClasses, &r.SearchSecretProviderClasses, &r.SecretProviderClassNames, &r.ExcludedSecretProviderClasses},
	} {
		*k.excluded = names(workload[k.exclude])
		if !k.on {
			continue // without --enable-csi-integration, its annotations ask for nothing
		}
		a := workload
		if !hasAny(workload, k.reload, n.Auto, k.typedAuto, n.Search) {
			a = template
		}
		// --auto-reload-all: the kind follows its config unless an auto annotation for it is
		// given at all (Reloader's rule: "false", or any other value, opts out).
		all := d.AutoReloadAll && a[n.Auto] == "" && a[k.typedAuto] == ""
		*k.auto = stakaterParseBool(a[n.Auto]) || stakaterParseBool(a[k.typedAuto]) || all
		*k.search = stakaterTrue(a[n.Search])
		*k.names = r.patterns(k.reload, a[k.reload])
	}
	if !r.AutoConfigMaps && !r.AutoSecrets && !r.AutoSecretProviderClasses && !r.SearchConfigMaps && !r.SearchSecrets && !r.SearchSecretProviderClasses &&
		len(r.ConfigMapNames) == 0 && len(r.SecretNames) == 0 && len(r.SecretProviderClassNames) == 0 && len(r.Problems) == 0 {
		return nil // e.g. reloader.stakater.com/auto: "false"
	}
	return r
}

// hasAny reports whether any of keys is set in a, whatever its value.
func hasAny(a map[string]string, keys ...string) bool {
	for _, k := range keys {
		if _, ok := a[k]; ok {
			return true
		}
	}
	return false
}

func names(v string) sets.Set[string] {
	out := sets.New[string]()
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out.Insert(n)
		}
	}
	return out
}

// maxPattern bounds an entry: Go's regexp runs in linear time, but a workload's annotation is
// anyone's to write.
const maxPattern = 253

func (r *StakaterRules) patterns(annotation, v string) []*regexp.Regexp {
	var out []*regexp.Regexp
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if len(p) > maxPattern {
			r.Problems = append(r.Problems, fmt.Sprintf("annotation %s: an entry of %d characters is longer than any object name", annotation, len(p)))
			continue
		}
		re, err := regexp.Compile("^" + p + "$") // as Reloader: "a|b" is ^a or b$, not ^(a|b)$
		if err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("annotation %s: entry %q is not a name or a regular expression (%v)", annotation, p, err))
			continue
		}
		out = append(out, re)
	}
	return out
}

// Literal reports the one name a pattern matches, when it is a plain name (no regular
// expression): such entries are indexed by name; the others are matched against every
// object of the namespace.
func Literal(re *regexp.Regexp) (string, bool) {
	s := strings.TrimSuffix(strings.TrimPrefix(re.String(), "^"), "$")
	if len(validation.IsDNS1123Subdomain(s)) > 0 || regexp.QuoteMeta(s) != s {
		return "", false
	}
	return s, true
}

// HasPatterns reports whether some reload entry is a regular expression, not a plain name.
func (r *StakaterRules) HasPatterns() bool {
	for _, list := range [][]*regexp.Regexp{r.ConfigMapNames, r.SecretNames, r.SecretProviderClassNames} {
		for _, re := range list {
			if _, ok := Literal(re); !ok {
				return true
			}
		}
	}
	return false
}

// NamesOf is the reload list of a kind.
func (r *StakaterRules) NamesOf(kind configref.Kind) []*regexp.Regexp {
	switch kind {
	case configref.Secret:
		return r.SecretNames
	case configref.SecretProviderClass:
		return r.SecretProviderClassNames
	}
	return r.ConfigMapNames
}

// Named reports whether a reload list names the object.
func (r *StakaterRules) Named(kind configref.Kind, name string) bool {
	for _, re := range r.NamesOf(kind) {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// Follows reports whether a change of the object rolls the workload. used: the pods use it;
// annotations: the object's own (for match and ignore).
func (r *StakaterRules) Follows(kind configref.Kind, name string, used bool, annotations map[string]string) bool {
	excluded, auto, search := r.ExcludedConfigMaps.Has(name), r.AutoConfigMaps, r.SearchConfigMaps
	switch kind {
	case configref.Secret:
		excluded, auto, search = r.ExcludedSecrets.Has(name), r.AutoSecrets, r.SearchSecrets
	case configref.SecretProviderClass:
		excluded, auto, search = r.ExcludedSecretProviderClasses.Has(name), r.AutoSecretProviderClasses, r.SearchSecretProviderClasses
	}
	switch {
	case stakaterTrue(annotations[r.names.Ignore]) || excluded: // Reloader checks these first
		return false
	case r.Named(kind, name):
		return true
	}
	return used && (auto || search && stakaterTrue(annotations[r.names.Match]))
}

// StakaterEnvName is the env var Reloader's env-vars strategy writes for an object:
// STAKATER_ + the name in capitals with every run of other characters as one "_" +
// _CONFIGMAP, _SECRET or _SECRETPROVIDERCLASS.
func StakaterEnvName(kind configref.Kind, name string) string {
	var b strings.Builder
	b.WriteString(StakaterEnvPrefix)
	valid := false
	for _, c := range strings.ToUpper(name) {
		if c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
			valid = true
		} else if valid {
			b.WriteByte('_')
			valid = false
		}
	}
	b.WriteString("_" + strings.ToUpper(string(kind)))
	return b.String()
}
