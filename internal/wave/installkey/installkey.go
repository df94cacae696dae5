// Package installkey reads, or makes once, the install key: 32 random bytes in a Secret in
// wave's own namespace, under which wave keys the digests of its inputs records. Without it,
// anyone who can read a workload could test guesses of a Secret's value against the digest of
// each key, a finer oracle than Wave's hash, which covers all the config at once.
//
//	res, err := installkey.Load(ctx, client, installkey.Options{Namespace: "configwave-system", Name: "configwave-install-key"})
//	// res.Mode is ModeKeyed (res.Key), or ModeSecretsByMetadata: no key, and no oracle either
//
// The key lives in a Secret and nowhere else. Kubernetes' built-in view role reads ConfigMaps,
// Leases and every workload in the namespaces it is bound in, and no Secret: a key kept
// anywhere weaker than a Secret would be read by exactly those it keeps out, and whoever may
// create a ConfigMap there could choose it. So nothing else is read, ever.
//
// What wave may do is asked (a SelfSubjectAccessReview), not inferred from a refusal: a
// ResourceQuota on Secrets, exhausted or not yet computed in a new namespace, refuses a create
// with 403 too. Where the Secret is absent and RBAC forbids wave to create it (Stakater
// Reloader's and Wave's charts grant get, list and watch on Secrets, and no create), wave runs
// without a key, with records that digest each Secret by its uid and resourceVersion, never by
// its value (ModeSecretsByMetadata); whoever creates the Secret later gives it the key.
package installkey

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/refusal"
	"github.com/configwave/configwave/internal/wave/access"
	"github.com/configwave/configwave/internal/wave/waveclient"
)

// DataKey is the Secret's key that holds the install key.
const DataKey = "key"

// Size of a key wave makes; MinSize of one it accepts.
const (
	Size    = 32
	MinSize = 16
)

// Mode is how wave makes the digests of its inputs records.
type Mode string

const (
	// ModeKeyed: HMACs under the install key, read from its Secret.
	ModeKeyed Mode = "keyed"
	// ModeSecretsByMetadata: no key; each Secret's digests are made of its uid and
	// resourceVersion, never of its value, so any write to a Secret rolls the workloads that
	// use it. ConfigMaps keep digests of their values.
	ModeSecretsByMetadata Mode = "secrets-by-metadata"
	// ModeUnkeyed: plain SHA-256 of the values (--install-key-secret="" on purpose, or a dry
	// run that could make the Secret and does not, since it writes nothing).
	ModeUnkeyed Mode = "unkeyed"
)

// Lookup is what wave found of the Secret.
type Lookup int

const (
	Absent       Lookup = iota // not found
	Found                      // holds a usable key
	TooShort                   // holds fewer than MinSize bytes
	Unreadable                 // RBAC forbids get on it (asked), or the API refused the get
	LookupFailed               // a transient error: ask again
)

// Facts are what Decide decides from.
type Facts struct {
	Secret    Lookup
	MayCreate bool // RBAC lets wave create Secrets in the namespace (a SelfSubjectAccessReview)
	DryRun    bool // --dry-run: write nothing
	// Refused: the last create was refused with 403 although RBAC allows it: a ResourceQuota
	// or an admission policy, which may let it through later.
	Refused bool
}

// Action is what Load does next.
type Action int

const (
	UseKey        Action = iota + 1 // the Secret holds the key
	CreateKey                       // make the Secret
	RunWithoutKey                   // ModeSecretsByMetadata
	DecideUnkeyed                   // ModeUnkeyed: a dry run, which writes no record anyway
	FailClosed                      // say what is wrong and what to do; write nothing
	Retry                           // wait, then look again
)

func (a Action) String() string {
	return [...]string{"", "use the key", "create the key", "run without a key", "decide unkeyed (dry run)", "fail closed", "retry"}[a]
}

// Decide is the whole policy of the install key. A Secret that exists decides: its key, or,
// unreadable or too short, nothing at all (fail closed: records under another key, or none,
// would all be rewritten once it is fixed). An absent one is made where RBAC allows, and
// waited for while something else (a quota) refuses it; where RBAC forbids, wave runs without
// a key, safely. A dry run makes nothing.
func Decide(f Facts) Action {
	switch f.Secret {
	case Found:
		return UseKey
	case TooShort, Unreadable:
		return FailClosed
	case LookupFailed:
		return Retry
	}
	switch {
	case !f.MayCreate:
		return RunWithoutKey
	case f.DryRun:
		return DecideUnkeyed
	case f.Refused:
		return Retry
	}
	return CreateKey
}

// ErrUnreadable: the Secret may exist, and wave may not read it.
var ErrUnreadable = errors.New("wave may not read it")

// ErrTooShort: the Secret holds too few bytes to be a key.
var ErrTooShort = errors.New("the install key is too short")

// Options name the Secret and say how Load goes about it.
type Options struct {
	Namespace, Name string
	DryRun          bool
	// Backoff between looks after a refusal or a transient error; zero: DefaultBackoff.
	Backoff wait.Backoff
}

// DefaultBackoff: a quota not yet computed in a new namespace is computed within seconds; an
// exhausted one waits for an admin, asked again (and said in the log) every 30 seconds.
var DefaultBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Cap: 30 * time.Second, Steps: math.MaxInt32}

// maxTransient bounds the transient errors (the API server unreachable) before Load gives up:
// wave then exits and is started again, which says more than a wait. A quota's refusal is no
// such error: the API server answered, and wave waits as long as it lasts.
const maxTransient = 6

// Result is the key, and the mode it puts wave in.
type Result struct {
	Key  []byte // nil but in ModeKeyed
	Mode Mode
	// Why says in a few words why the mode, for the line wave logs at start. Never a key.
	Why string
}

// Load reads the key from its Secret, or makes the Secret where RBAC allows and nobody made it,
// or returns ModeSecretsByMetadata where RBAC forbids. A create that RBAC allows and the API
// refuses (a ResourceQuota) is tried again, with one log line each time that names what refused
// it and what to do, until it succeeds, the Secret appears, or ctx ends. Errors name the Secret
// and what to do, and never hold the key.
func Load(ctx context.Context, client waveclient.Interface, o Options) (Result, error) {
	backoff := o.Backoff
	if backoff.Duration == 0 {
		backoff = DefaultBackoff
	}
	logger := klog.FromContext(ctx)
	obj := o.Namespace + "/" + o.Name
	var refused *refusal.Refusal // what refused the last create, when RBAC allowed it
	transient := 0               // transient errors since the API server last answered with a refusal
	for {
		f, key, err := look(ctx, client, o)
		f.DryRun, f.Refused = o.DryRun, refused != nil
		switch Decide(f) {
		case UseKey:
			return Result{Key: key, Mode: ModeKeyed, Why: "the key is in Secret " + obj}, nil
		case RunWithoutKey:
			return Result{Mode: ModeSecretsByMetadata, Why: fmt.Sprintf("Secret %s is absent and wave may not create Secrets in %s", obj, o.Namespace)}, nil
		case DecideUnkeyed:
			return Result{Mode: ModeUnkeyed, Why: fmt.Sprintf("dry run: Secret %s is absent and is not made", obj)}, nil
		case FailClosed:
			return Result{}, fmt.Errorf("install key %s: %w", obj, err)
		case CreateKey:
			made, cerr := create(ctx, client, o.Namespace, o.Name)
			switch {
			case cerr == nil:
				return Result{Key: made, Mode: ModeKeyed, Why: "wave made Secret " + obj}, nil
			case apierrors.IsAlreadyExists(cerr):
				continue // another replica made it first: read theirs
			case apierrors.IsForbidden(cerr):
				// RBAC allowed it a moment ago: a quota or an admission policy refused it. The next
				// look asks RBAC again, which says whether to wait (Retry) or to run without a key.
				r := refusal.Of(cerr)
				refused, transient = &r, 0 // the API server answers: keep waiting
				continue
			}
			err = fmt.Errorf("create it: %w", cerr)
			transient++
		case Retry:
			if refused == nil {
				transient++
			}
		}
		if transient >= maxTransient {
			return Result{}, fmt.Errorf("install key %s: %w", obj, err)
		}
		pause := backoff.Step() // capped: past the first minute, one line every 30 s
		if refused != nil {
			logger.Info("install key: RBAC lets wave create its Secret and the API server refused it; wave writes nothing until it has it, and tries again",
				"secret", obj, "refusedBy", refused.By, "retryIn", pause, "fix", fix(*refused, o.Namespace, o.Name))
		} else {
			logger.Info("install key: trying again", "secret", obj, "err", err, "retryIn", pause)
		}
		select {
		case <-ctx.Done():
			if refused != nil {
				return Result{}, fmt.Errorf("install key %s: refused by %s; %s: %w", obj, refused.By, fix(*refused, o.Namespace, o.Name), ctx.Err())
			}
			return Result{}, fmt.Errorf("install key %s: %w (last: %v)", obj, ctx.Err(), err)
		case <-time.After(pause):
		}
		refused = nil
	}
}

// look asks RBAC what wave may do and reads the Secret. An error goes with Unreadable and
// TooShort (say it, fail closed) and LookupFailed (say it if it lasts).
func look(ctx context.Context, client waveclient.Interface, o Options) (Facts, []byte, error) {
	failed := func(err error) (Facts, []byte, error) {
		if apierrors.IsUnauthorized(err) {
			return Facts{Secret: Unreadable}, nil, err // wave's own credentials: retrying will not help
		}
		return Facts{Secret: LookupFailed}, nil, err
	}
	mayGet, err := access.Allowed(ctx, client, access.Check{Verb: "get", Resource: "secrets", Namespace: o.Namespace, Name: o.Name})
	if err != nil {
		return failed(err)
	}
	if !mayGet {
		return Facts{Secret: Unreadable}, nil, ErrUnreadable
	}
	s, err := client.CoreV1().Secrets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	switch {
	case err == nil:
		key := s.Data[DataKey]
		if len(key) < MinSize {
			return Facts{Secret: TooShort}, nil, fmt.Errorf("%w: the Secret's %q holds %d bytes, fewer than %d; put %d random bytes there, or delete the Secret and wave makes a new one where it may create Secrets",
				ErrTooShort, DataKey, len(key), MinSize, Size)
		}
		return Facts{Secret: Found}, key, nil
	case apierrors.IsForbidden(err):
		// RBAC said yes and the API server no: an authorizer the review does not see.
		return Facts{Secret: Unreadable}, nil, ErrUnreadable
	case !apierrors.IsNotFound(err):
		return failed(fmt.Errorf("read it: %w", err))
	}
	mayCreate, err := access.Allowed(ctx, client, access.Check{Verb: "create", Resource: "secrets", Namespace: o.Namespace})
	if err != nil {
		return failed(err)
	}
	return Facts{Secret: Absent, MayCreate: mayCreate}, nil, nil
}

func create(ctx context.Context, client waveclient.Interface, namespace, name string) ([]byte, error) {
	key := make([]byte, Size)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("make a random key: %w", err)
	}
	immutable := true // a key that changes under wave would make every record foreign
	_, err := client.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "configwave-wave"},
			Annotations: map[string]string{"configwave.io/purpose": "wave keys the digests of its configwave.io/config-inputs records with this; keep it"}},
		Type: corev1.SecretTypeOpaque, Immutable: &immutable, Data: map[string][]byte{DataKey: key},
	}, metav1.CreateOptions{FieldManager: "configwave-wave"})
	if err != nil {
		return nil, err
	}
	return key, nil
}

// fix says how to get wave going: room in the quota (or the policy's consent), or the Secret
// made by hand.
func fix(r refusal.Refusal, namespace, name string) string {
	room := "let the create through"
	if r.Quota {
		room = "raise the quota's count/secrets (kubectl -n " + namespace + " describe resourcequota)"
	}
	return room + ", or create the Secret yourself: " + CreateCommand(namespace, name)
}

// CreateCommand is the command that makes the install key by hand.
func CreateCommand(namespace, name string) string {
	return fmt.Sprintf(`kubectl -n %s create secret generic %s --from-literal=%s="$(head -c %d /dev/urandom | base64)"`, namespace, name, DataKey, Size)
}
