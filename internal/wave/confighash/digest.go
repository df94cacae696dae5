package confighash

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/slimcache"
	"github.com/configwave/configwave/internal/wave/sourceready"
)

// Digester reduces ConfigMaps and Secrets to per-key digests. With a Key, the digests are
// HMACs, so that the inputs record on a workload cannot be used to test guesses of a Secret
// value either. Without one, SecretsByMetadata keeps a Secret's values out of its digests
// altogether.
type Digester struct {
	Key []byte
	// SecretsByMetadata: each key of a Secret is digested from the Secret's uid and
	// resourceVersion and the key's name, never from its value, so that records made without
	// a key test no guess of a Secret value (docs/faq.md). The price: any write to the Secret,
	// even of its metadata alone, changes its digests. ConfigMaps keep digests of their
	// values: whoever may read the workloads that use them may usually read them too.
	// Ignored with a Key.
	SecretsByMetadata bool
	// KeepLabels keeps the objects' labels, for Stakater Reloader's --resource-label-selector;
	// without it they are dropped like the rest of the metadata.
	KeepLabels bool
	// KeepAnnotations are annotations kept besides keptAnnotations: Reloader's match and
	// ignore under the names its --search-match-annotation and --ignore-annotation give.
	KeepAnnotations []string
	// Whole, when set, is shown each whole object before it is reduced, so that the caller
	// may keep the data of the few objects it will need whole (Wave's hash), without a read
	// from the API. It must not change the object.
	Whole func(kind configref.Kind, whole metav1.Object)
}

// keyDigest is 128 bits of SHA256 (or of HMAC-SHA256 under the key): enough to tell any two
// values apart in practice, half the memory of a full digest.
func (dg Digester) keyDigest(b []byte) (d [16]byte) {
	if len(dg.Key) > 0 {
		mac := hmac.New(sha256.New, dg.Key)
		mac.Write(b)
		copy(d[:], mac.Sum(nil))
		return d
	}
	sum := sha256.Sum256(b)
	copy(d[:], sum[:])
	return d
}

// Digest is Digester{}.Transform.
func Digest(obj any) (any, error) { return Digester{}.Transform(obj) }

// Transform is the informer transform for ConfigMaps and Secrets: it returns a *Digested
// that keeps name, namespace, resourceVersion and Reloader's match and ignore annotations,
// and replaces every value by its digest. The cache then holds about a hundred bytes per
// object instead of the config itself (peers hold every byte of every Secret). The other
// annotations and managedFields go: `kubectl apply` copies the whole object into an
// annotation. A *Digested is returned as it is (client-go may transform an object again).
func (dg Digester) Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *Digested:
		return o, nil
	case *corev1.ConfigMap:
		if dg.Whole != nil {
			dg.Whole(configref.ConfigMap, o)
		}
		out := dg.slim(o.ObjectMeta, len(o.Data)+len(o.BinaryData))
		for k, v := range o.Data {
			out.Keys = append(out.Keys, KeyDigest{Key: intern(k), Digest: dg.keyDigest([]byte(v))})
		}
		for k, v := range o.BinaryData {
			out.Keys = append(out.Keys, KeyDigest{Key: intern(k), Digest: dg.keyDigest(v)})
		}
		sortKeys(out.Keys)
		return out, nil
	case *corev1.Secret:
		if dg.Whole != nil {
			dg.Whole(configref.Secret, o)
		}
		out := dg.slim(o.ObjectMeta, len(o.Data))
		byMeta := dg.SecretsByMetadata && len(dg.Key) == 0
		for k, v := range o.Data {
			d := dg.keyDigest(v)
			if byMeta {
				d = metadataDigest(string(o.UID), o.ResourceVersion, k)
			}
			out.Keys = append(out.Keys, KeyDigest{Key: intern(k), Digest: d})
		}
		sortKeys(out.Keys)
		out.SetIncomplete(sourceready.Incomplete(o.Type, o.Data)) // its answer only: no value is kept
		return out, nil
	}
	return obj, nil
}

// metadataDigest stands for one key of a Secret in Digester.SecretsByMetadata: made of who
// the Secret is and which version, so it changes whenever the Secret is written, and holds
// nothing of the value. It is computed here, in the informer's transform, rather than kept
// as a uid beside each object: the cache keeps the same 16 bytes a key as for a value.
func metadataDigest(uid, resourceVersion, key string) (d [16]byte) {
	sum := sha256.Sum256([]byte("configwave.io/secret-by-metadata\x00" + uid + "\x00" + resourceVersion + "\x00" + key))
	copy(d[:], sum[:])
	return d
}

// TransformMeta is the informer transform for objects wave reads only the metadata of
// (SecretProviderClasses): a *Digested with no keys, keeping what Transform keeps.
func (dg Digester) TransformMeta(obj any) (any, error) {
	if d, ok := obj.(*Digested); ok {
		return d, nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil // a tombstone
	}
	return dg.slim(metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), ResourceVersion: m.GetResourceVersion(),
		Labels: m.GetLabels(), Annotations: m.GetAnnotations()}, 0), nil
}

func (dg Digester) slim(m metav1.ObjectMeta, keys int) *Digested {
	out := &Digested{Identity: slimcache.Identity{Name: m.Name, Namespace: intern(m.Namespace), ResourceVersion: m.ResourceVersion}, Keys: make([]KeyDigest, 0, keys)}
	if dg.KeepLabels && m.Labels != nil {
		out.SetLabels(m.Labels)
	}
	var kept map[string]string
	for _, list := range [][]string{keptAnnotations, dg.KeepAnnotations} {
		for _, k := range list {
			if v, ok := m.Annotations[k]; ok {
				if kept == nil {
					kept = make(map[string]string, len(keptAnnotations))
				}
				kept[k] = v
			}
		}
	}
	if kept != nil {
		out.SetAnnotations(kept)
	}
	return out
}

// keptAnnotations are the annotations of a ConfigMap or Secret that decide whether a change
// of it rolls a workload (Stakater Reloader's search match, its ignore and ours), and whether
// its revisions are kept (podrefs.RevisionsAnnotation). Only objects that carry them pay for a
// map.
var keptAnnotations = []string{podrefs.StakaterMatch, podrefs.StakaterIgnore, podrefs.IgnoreAnnotation, podrefs.RevisionsAnnotation}

// KeyDigests returns a digested object's key → hex digest map; nil for anything else.
func KeyDigests(obj any) map[string]string {
	if d, ok := obj.(*Digested); ok {
		return d.Digests()
	}
	return nil
}

// DigestsFunc returns the key digests of an object from the transformed cache, and whether
// it exists.
type DigestsFunc func(configref.Ref) (map[string]string, bool)

// Inputs is the record of what a workload's pods can see, written to the workload's own
// metadata.annotations[InputsAnnotation]: one entry per object, sorted,
// "configmap/NAME=DIGEST" (or "configmap/NS/NAME=..." for another namespace), where DIGEST
// covers exactly the keys the pods see, and "absent" stands for a missing object.
type Inputs struct {
	Value   string                  // the annotation value
	Objects map[string]string       // entry name -> digest, to tell which objects changed
	Missing []*podrefs.MissingError // required objects or keys that do not exist
}

// InputsOf computes the Inputs of uses from the cache.
func InputsOf(namespace string, uses podrefs.Uses, digests DigestsFunc) Inputs {
	in := Inputs{Objects: map[string]string{}}
	entries := make([]string, 0, len(uses))
	for _, ref := range uses.Refs() {
		u := uses[ref]
		name := ref.Short(namespace)
		keys, exists := digests(ref)
		var d string
		switch {
		case !exists:
			if u.Required {
				in.Missing = append(in.Missing, &podrefs.MissingError{Ref: ref, Where: u.Where})
			}
			d = "absent"
		default:
			d = objectDigest(ref, u, keys, &in.Missing)
		}
		in.Objects[name] = d
		entries = append(entries, name+"="+d)
	}
	in.Value = strings.Join(entries, ",")
	return in
}

// objectDigest covers the keys u uses: all of them, or each listed one (present or absent).
func objectDigest(ref configref.Ref, u *podrefs.Use, keys map[string]string, missing *[]*podrefs.MissingError) string {
	var lines []string
	if u.AllKeys {
		for k, d := range keys {
			lines = append(lines, k+"\x00"+d)
		}
	}
	for k, required := range u.Keys {
		d, ok := keys[k]
		if !ok {
			if required {
				*missing = append(*missing, &podrefs.MissingError{Ref: ref, Key: k, Where: u.Where})
			}
			d = "absent"
		}
		lines = append(lines, k+"\x00"+d)
	}
	sort.Strings(lines)
	lines = dedupe(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:8])
}

func dedupe(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// ParseInputs splits an Inputs annotation value back into entry -> digest.
func ParseInputs(value string) map[string]string {
	out := map[string]string{}
	for _, e := range strings.Split(value, ",") {
		if name, d, ok := strings.Cut(e, "="); ok {
			out[name] = d
		}
	}
	return out
}

// Changed names the entries whose digest differs between two Inputs values, for Events.
func Changed(before, after map[string]string) []string {
	var out []string
	for name, d := range after {
		if before[name] != d {
			out = append(out, name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// maxNamedChanges bounds the names in an Event: a workload may reference hundreds of objects.
const maxNamedChanges = 5

// DescribeChanged lists the changed entries for an Event or a log line. Names come from the
// recorded annotation too, which anyone who may edit the workload can write, so an entry that
// is not of the form InputsOf writes is not repeated, and the list is bounded.
func DescribeChanged(changed []string) string {
	named := make([]string, 0, maxNamedChanges)
	others := 0
	for _, name := range changed {
		if len(named) < maxNamedChanges && validEntryName(name) {
			named = append(named, name)
		} else {
			others++
		}
	}
	switch {
	case len(named) == 0 && others == 0:
		return "the inputs record"
	case len(named) == 0 && others == 1:
		return "an entry of the inputs record"
	case len(named) == 0:
		return fmt.Sprintf("%d entries of the inputs record", others)
	case others > 0:
		return fmt.Sprintf("%s and %d more", strings.Join(named, ", "), others)
	}
	return strings.Join(named, ", ")
}

// validEntryName accepts "configmap/NAME", "secret/NAME" and the same with "NS/" before NAME,
// with Kubernetes object names.
func validEntryName(entry string) bool {
	kind, rest, ok := strings.Cut(entry, "/")
	if !ok || (kind != configref.ConfigMap.Lower() && kind != configref.Secret.Lower() && kind != configref.SecretProviderClass.Lower()) {
		return false
	}
	parts := strings.Split(rest, "/")
	if len(parts) > 2 {
		return false
	}
	if len(parts) == 2 && len(validation.IsDNS1123Label(parts[0])) > 0 {
		return false
	}
	return len(validation.IsDNS1123Subdomain(parts[len(parts)-1])) == 0
}

// String for logs.
func (in Inputs) String() string { return fmt.Sprintf("%d objects", len(in.Objects)) }

// KeyID names a digest key in an inputs record without revealing it: the first 8 hex digits
// of an HMAC under the key of a fixed text. "" for no key.
func KeyID(key []byte) string {
	if len(key) == 0 {
		return ""
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("configwave.io/config-inputs key id"))
	return hex.EncodeToString(mac.Sum(nil)[:4])
}

// keyIDPrefix opens an inputs record whose digests are keyed: "key=ID,configmap/a=...".
const keyIDPrefix = "key="

// keyedHashMark follows the key id in the record of a workload whose template hash is keyed
// too (it had no Wave hash when wave first saw it: nothing to stay compatible with).
const keyedHashMark = "hash=keyed"

// MetaID stands where a key ID would for records made without a key, Secrets digested by
// their metadata (Digester.SecretsByMetadata). It is not hex, so no KeyID is ever equal to it.
const MetaID = "meta"

// metaHead opens a record made with MetaID: "secrets=meta,configmap/a=...,secret/b=...".
const metaHead = "secrets=meta"

// inputsHashMark follows metaHead in the record of a workload whose template hash is made
// from its inputs record (HashOfInputs), as keyedHashMark follows a key id.
const inputsHashMark = "hash=inputs"

// WithKeyID is the record value of inputs digested under the key named id ("" for none).
func WithKeyID(id, inputs string) string { return RecordValue(id, false, inputs) }

// RecordValue is the record value of inputs digested under the key named id ("" for none;
// MetaID for Secrets digested by their metadata), saying whether the template hash is wave's
// own (keyed, or HashOfInputs under MetaID) rather than Wave's formula: only with an id.
func RecordValue(id string, ownHash bool, inputs string) string {
	if id == "" {
		return inputs
	}
	head, mark := keyIDPrefix+id, keyedHashMark
	if id == MetaID {
		head, mark = metaHead, inputsHashMark
	}
	if ownHash {
		head += "," + mark
	}
	if inputs == "" {
		return head
	}
	return head + "," + inputs
}

// SplitKeyID splits a record value into the id of the key its digests were made under ("" for
// records of unkeyed digests, and those written before records named their key; MetaID for
// Secrets digested by their metadata) and the inputs.
func SplitKeyID(record string) (id, inputs string) {
	id, _, inputs = SplitRecord(record)
	return id, inputs
}

// SplitRecord is SplitKeyID that also says whether the template hash is wave's own (keyed, or
// made from the inputs), whichever mark says so: a record made in one mode and read in another
// keeps its workload off Wave's formula.
func SplitRecord(record string) (id string, ownHash bool, inputs string) {
	switch {
	case strings.HasPrefix(record, keyIDPrefix):
		id, inputs, _ = strings.Cut(strings.TrimPrefix(record, keyIDPrefix), ",")
	case record == metaHead || strings.HasPrefix(record, metaHead+","):
		id, inputs = MetaID, strings.TrimPrefix(strings.TrimPrefix(record, metaHead), ",")
	default:
		return "", false, record
	}
	for _, mark := range []string{keyedHashMark, inputsHashMark} {
		if inputs == mark {
			return id, true, ""
		}
		if after, ok := strings.CutPrefix(inputs, mark+","); ok {
			return id, true, after
		}
	}
	return id, false, inputs
}

// HashOfInputs is the template hash wave writes, without an install key, on a workload that
// had no Wave hash when wave first saw it: SHA-256 of its inputs record's entries, which hold
// nothing of a Secret's value under MetaID, where Wave's formula over the data would let
// whoever reads the workload test guesses of it. It changes exactly when the record does.
func HashOfInputs(inputs string) string {
	sum := sha256.Sum256([]byte("configwave.io/config-hash of inputs\x00" + inputs))
	return hex.EncodeToString(sum[:])
}
