// Package installkey reads, or makes once, the install key: 32 random bytes in a Secret in
// wave's own namespace, under which wave keys the digests of its inputs records. Without it,
// anyone who can read a workload could test guesses of a Secret's value against the digest
// of each key, a finer oracle than Wave's hash, which covers all the config at once.
//
//	key, err := installkey.Load(ctx, client, "configwave-system", "configwave-install-key", true)
package installkey

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// DataKey is the Secret's key that holds the install key.
const DataKey = "key"

// Size of a key wave makes; MinSize of one it accepts.
const (
	Size    = 32
	MinSize = 16
)

// Load returns the key in the Secret namespace/name, creating the Secret with a random key
// when it does not exist and mayCreate (needs create on Secrets in that namespace; the chart
// creates it instead). Transient API errors are tried again for a while; the error names the Secret and
// what to do, and never holds the key.
func Load(ctx context.Context, client kubernetes.Interface, namespace, name string, mayCreate bool) ([]byte, error) {
	var key []byte
	var last error
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 6, Cap: 5 * time.Second}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		key, last = loadOnce(ctx, client, namespace, name, mayCreate)
		switch {
		case last == nil:
			return true, nil
		case apierrors.IsForbidden(last), apierrors.IsUnauthorized(last), errors.Is(last, errBadKey), errors.Is(last, ErrMissing):
			return false, last // retrying will not help
		}
		return false, nil
	})
	if err != nil {
		if last == nil {
			last = err
		}
		return nil, fmt.Errorf("install key Secret %s/%s: %w", namespace, name, last)
	}
	return key, nil
}

var (
	errBadKey = errors.New("the install key is unusable")
	// ErrMissing: the Secret does not exist and Load was told not to create it.
	ErrMissing = errors.New("it does not exist, and wave was told not to write (--dry-run)")
)

func loadOnce(ctx context.Context, client kubernetes.Interface, namespace, name string, mayCreate bool) ([]byte, error) {
	s, err := client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && !mayCreate {
		return nil, ErrMissing
	}
	if apierrors.IsNotFound(err) {
		s, err = create(ctx, client, namespace, name)
		if apierrors.IsAlreadyExists(err) { // another replica made it first: use theirs
			s, err = client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		}
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("it does not exist, and wave may not create it (%w): create it (the Helm chart does; with Kustomize, config/wave lets wave create it), or allow wave to create Secrets in %s", err, namespace)
		}
	}
	if err != nil {
		return nil, err
	}
	key := s.Data[DataKey]
	if len(key) < MinSize {
		return nil, fmt.Errorf("%w: its %q entry has %d bytes, fewer than %d; delete the Secret and wave makes a new one, or put %d random bytes there", errBadKey, DataKey, len(key), MinSize, Size)
	}
	return key, nil
}

func create(ctx context.Context, client kubernetes.Interface, namespace, name string) (*corev1.Secret, error) {
	key := make([]byte, Size)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("make a random key: %w", err)
	}
	immutable := true
	return client.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "configwave-wave"},
			// Deleting it makes wave adopt every workload again by Wave's hash at its next
			// start; nothing rolls, but say so where an administrator looks.
			Annotations: map[string]string{"configwave.io/purpose": "wave keys the digests of its configwave.io/config-inputs records with this; keep it"}},
		Type:      corev1.SecretTypeOpaque,
		Immutable: &immutable, // a key that changes under wave would make every record foreign
		Data:      map[string][]byte{DataKey: key},
	}, metav1.CreateOptions{FieldManager: "configwave-wave"})
}
