package onefirst

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/reloader/source"
)

// The annotations that hold a Record on its Lease; First, Since and Renewed are the Lease's
// holderIdentity, acquireTime and renewTime, so that `kubectl get lease` shows who tries what.
const (
	ContentAnnotation   = "reloader.configwave.io/content"
	StateAnnotation     = "reloader.configwave.io/state"
	ReasonAnnotation    = "reloader.configwave.io/reason"
	GoodAnnotation      = "reloader.configwave.io/good"
	BeforeAnnotation    = "reloader.configwave.io/before"
	TakenBackAnnotation = "reloader.configwave.io/taken-back"
	BatchAnnotation     = "reloader.configwave.io/batch"
)

// maxReason bounds the reason kept on the Lease: a sentence, not a log.
const maxReason = 256

// Annotations are r's fields that the Lease's own fields do not hold.
func (r Record) Annotations() map[string]string {
	a := map[string]string{ContentAnnotation: r.Content, StateAnnotation: string(r.State)}
	if r.Reason != "" {
		reason := r.Reason
		if len(reason) > maxReason {
			reason = reason[:maxReason]
		}
		a[ReasonAnnotation] = reason
	}
	if r.Good != "" {
		a[GoodAnnotation] = r.Good
	}
	if r.Before != "" {
		a[BeforeAnnotation] = r.Before
	}
	if r.TakenBack != "" {
		a[TakenBackAnnotation] = r.TakenBack
	}
	if len(r.Batch) > 0 {
		pods := make([]string, 0, len(r.Batch))
		for p := range r.Batch {
			pods = append(pods, p)
		}
		slices.Sort(pods)
		parts := make([]string, len(pods))
		for i, p := range pods {
			parts[i] = p + "@" + strconv.FormatInt(r.Batch[p].UnixMilli(), 10)
		}
		a[BatchAnnotation] = strings.Join(parts, ",")
	}
	return a
}

// ParseRecord reads a Record from a Lease: its annotations, holder, acquire and renew times.
// Any sidecar, or a person, may have written it: an error names the annotation and what is
// wrong, and the caller treats the Lease as one to claim over.
func ParseRecord(annotations map[string]string, holder string, since, renewed time.Time) (*Record, error) {
	r := &Record{Content: annotations[ContentAnnotation], State: State(annotations[StateAnnotation]), First: holder,
		Since: since, Renewed: renewed, Reason: annotations[ReasonAnnotation], Good: annotations[GoodAnnotation], Before: annotations[BeforeAnnotation],
		TakenBack: annotations[TakenBackAnnotation]}
	if r.Content == "" {
		return nil, fmt.Errorf("annotation %s is missing or empty", ContentAnnotation)
	}
	if r.State == "" {
		return nil, fmt.Errorf("annotation %s is missing or empty", StateAnnotation)
	}
	batch := annotations[BatchAnnotation]
	if batch == "" {
		return r, nil
	}
	r.Batch = map[string]time.Time{}
	for _, part := range strings.Split(batch, ",") {
		pod, ms, ok := strings.Cut(part, "@")
		if !ok || pod == "" {
			return nil, fmt.Errorf("annotation %s: %q is not POD@UNIX_MILLISECONDS", BatchAnnotation, part)
		}
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %q is not POD@UNIX_MILLISECONDS", BatchAnnotation, part)
		}
		if _, dup := r.Batch[pod]; dup {
			return nil, fmt.Errorf("annotation %s: pod %q is listed twice", BatchAnnotation, pod)
		}
		r.Batch[pod] = time.UnixMilli(n)
	}
	return r, nil
}

// Version is one source object as it stands: its identity and resourceVersion.
type Version struct {
	Kind, Namespace, Name, UID, ResourceVersion string
}

// ContentID names the content of a set of source objects for the record: a hash of their
// identities and resourceVersions, which every sidecar that watches them sees alike. It is
// never a hash of the values: those are hashed under a key of each sidecar's own, so that
// nothing shown lets a reader test a guess about a Secret, and sidecars could not compare them.
func ContentID(objects []Version) string {
	lines := make([]string, len(objects))
	for i, o := range objects {
		lines[i] = strings.Join([]string{o.Kind, o.Namespace, o.Name, o.UID, o.ResourceVersion}, "\x00")
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:16])
}

// Content is a content as people and Events name it: its objects at their resourceVersions, as
// `kubectl get -o yaml` shows them, beside the ID the Lease holds.
type Content struct {
	ID   string
	Name string // "configmap web/app@12345, secret web/tls@678"
	// UIDs of its objects, so that an Event about one shows in `kubectl describe` of it.
	UIDs map[configref.Ref]types.UID
}

// ContentOf names the content of a snapshot from the API source.
func ContentOf(s source.Snapshot) Content {
	c := Content{ID: SnapshotID(s), UIDs: map[configref.Ref]types.UID{}}
	var names []string
	for _, o := range s.Objects {
		uid, rv, _ := strings.Cut(o.Version, "/")
		c.UIDs[o.Ref] = types.UID(uid)
		names = append(names, fmt.Sprintf("%s %s/%s@%s", strings.ToLower(string(o.Kind)), o.Namespace, o.Name, rv))
	}
	for _, m := range s.Missing {
		names = append(names, fmt.Sprintf("%s %s/%s (missing)", strings.ToLower(string(m.Kind)), m.Namespace, m.Name))
	}
	c.Name = strings.Join(names, ", ")
	if c.Name == "" {
		c.Name = "no objects"
	}
	return c
}
