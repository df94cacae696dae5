// Package installkey reads, or makes once, the install key: 32 random bytes in wave's own
// namespace, under which wave keys the digests of its inputs records. Without it, anyone who
// can read a workload could test guesses of a Secret's value against the digest of each key, a
// finer oracle than Wave's hash, which covers all the config at once.
//
//	key, home, err := installkey.Load(ctx, client, "configwave-system", "configwave-install-key", true)
//
// The key lives in a Secret. A peer's RBAC that wave runs under when it replaces the peer may
// not let it create Secrets (Stakater Reloader's chart grants get, list and watch; Wave's adds
// update and patch), so the key may live instead, under the same name in the same namespace,
// where that RBAC lets wave write: a ConfigMap (Reloader's chart lets it create ConfigMaps in
// its own namespace) or a Lease (Wave's chart grants every verb on Leases). Either is readable
// by whoever reads that kind in wave's namespace, usually its admins alone, and never by those
// who only read the workloads in other namespaces, which is whom the key keeps out.
package installkey

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/configwave/configwave/internal/waveclient"
)

// DataKey is the Secret's (and the ConfigMap's) key that holds the install key.
const DataKey = "key"

// LeaseAnnotation holds the key, base64, on a Lease home.
const LeaseAnnotation = "configwave.io/install-key"

// Size of a key wave makes; MinSize of one it accepts.
const (
	Size    = 32
	MinSize = 16
)

// Home is where a key lives: a Secret, else a ConfigMap, else a Lease, each named as the
// install key is.
type Home string

const (
	InSecret    Home = "Secret"
	InConfigMap Home = "ConfigMap"
	InLease     Home = "Lease"
)

// homes in the order a key is looked for, and made.
var homes = []Home{InSecret, InConfigMap, InLease}

// ErrMissing: no home holds the key, and wave may not write (--dry-run).
var ErrMissing = errors.New("it does not exist, and wave was told not to write (--dry-run)")

// ErrNowhere: no home holds the key, and wave may create none of them.
var ErrNowhere = errors.New("it does not exist, and wave may create neither a Secret, a ConfigMap nor a Lease there")

var errBadKey = errors.New("the install key is unusable")

// Load returns the key named namespace/name and where it lives. An existing key is read from
// the first home that holds it; with none, and mayCreate, a random key is made in the first
// home wave may create. Transient API errors are tried again for a while; the error names the
// object and what to do, and never holds the key.
func Load(ctx context.Context, client waveclient.Interface, namespace, name string, mayCreate bool) ([]byte, Home, error) {
	var key []byte
	var home Home
	var last error
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 6, Cap: 5 * time.Second}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		key, home, last = loadOnce(ctx, client, namespace, name, mayCreate)
		switch {
		case last == nil:
			return true, nil
		case apierrors.IsForbidden(last), apierrors.IsUnauthorized(last), errors.Is(last, errBadKey), errors.Is(last, ErrMissing), errors.Is(last, ErrNowhere):
			return false, last // retrying will not help
		}
		return false, nil
	})
	if err != nil {
		if last == nil {
			last = err
		}
		return nil, "", fmt.Errorf("install key %s/%s: %w", namespace, name, last)
	}
	return key, home, nil
}

func loadOnce(ctx context.Context, client waveclient.Interface, namespace, name string, mayCreate bool) ([]byte, Home, error) {
	for _, h := range homes {
		key, err := read(ctx, client, h, namespace, name)
		switch {
		case err == nil:
			return key, h, nil
		case apierrors.IsNotFound(err):
			continue
		case apierrors.IsForbidden(err) && h != InSecret:
			continue // a fallback home wave may not read is not its home
		default:
			return nil, "", fmt.Errorf("read the %s: %w", h, err)
		}
	}
	if !mayCreate {
		return nil, "", ErrMissing
	}
	for _, h := range homes {
		key, err := create(ctx, client, h, namespace, name)
		if apierrors.IsAlreadyExists(err) { // another replica made it first: use theirs
			key, err = read(ctx, client, h, namespace, name)
		}
		switch {
		case err == nil:
			return key, h, nil
		case apierrors.IsForbidden(err):
			continue
		default:
			return nil, "", fmt.Errorf("create the %s: %w", h, err)
		}
	}
	return nil, "", fmt.Errorf("%w: create the Secret yourself (kubectl -n %s create secret generic %s --from-literal=%s=\"$(head -c %d /dev/urandom | base64)\"), or allow wave to create Secrets in %s", ErrNowhere, namespace, name, DataKey, Size, namespace)
}

func read(ctx context.Context, client waveclient.Interface, h Home, namespace, name string) ([]byte, error) {
	var key []byte
	switch h {
	case InSecret:
		s, err := client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		key = s.Data[DataKey]
	case InConfigMap:
		cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		key = cm.BinaryData[DataKey]
	case InLease:
		l, err := client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		key, _ = base64.StdEncoding.DecodeString(l.Annotations[LeaseAnnotation])
	}
	if len(key) < MinSize {
		return nil, fmt.Errorf("%w: the %s's %q holds %d bytes, fewer than %d; delete it and wave makes a new one, or put %d random bytes there", errBadKey, h, DataKey, len(key), MinSize, Size)
	}
	return key, nil
}

func create(ctx context.Context, client waveclient.Interface, h Home, namespace, name string) ([]byte, error) {
	key := make([]byte, Size)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("make a random key: %w", err)
	}
	meta := metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "configwave-wave"},
		Annotations: map[string]string{"configwave.io/purpose": "wave keys the digests of its configwave.io/config-inputs records with this; keep it"}}
	opts := metav1.CreateOptions{FieldManager: "configwave-wave"}
	immutable := true // a key that changes under wave would make every record foreign
	var err error
	switch h {
	case InSecret:
		_, err = client.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeOpaque,
			Immutable: &immutable, Data: map[string][]byte{DataKey: key}}, opts)
	case InConfigMap:
		_, err = client.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Immutable: &immutable,
			BinaryData: map[string][]byte{DataKey: key}}, opts)
	case InLease:
		meta.Annotations[LeaseAnnotation] = base64.StdEncoding.EncodeToString(key)
		_, err = client.CoordinationV1().Leases(namespace).Create(ctx, &coordinationv1.Lease{ObjectMeta: meta}, opts)
	}
	if err != nil {
		return nil, err
	}
	return key, nil
}
