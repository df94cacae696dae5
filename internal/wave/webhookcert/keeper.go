package webhookcert

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/wave/waveclient"
)

// Keeper makes, renews and serves the webhook's certificate from its Secret, and keeps the
// webhook configuration's caBundle at its CA. Every replica runs one: they agree through the
// Secret (a create that finds it made, or an update that finds it changed, reads it again).
type Keeper struct {
	Client          waveclient.Interface
	Namespace, Name string   // the Secret
	Configuration   string   // the MutatingWebhookConfiguration; "" leaves caBundle to others
	DNSNames        []string // what the API server calls: the Service's names
	// Every: how often the Secret is looked at again (a renewal by another replica, or one
	// due, or a caBundle that a GitOps sync emptied); after a failure, a tenth of it. Zero:
	// five minutes.
	Every time.Duration
	Now   func() time.Time // zero: time.Now
	// Trusted, when set, is told after each look whether the registration's caBundle
	// carries the CA of what is served (false: the API server's calls fail, and pods are
	// admitted on the live objects).
	Trusted func(bool)

	cert atomic.Pointer[tls.Certificate]
}

// TLSConfig serves the certificate last read: TLS 1.2 and later, as the API server speaks.
func (k *Keeper) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if c := k.cert.Load(); c != nil {
			return c, nil
		}
		return nil, fmt.Errorf("the webhook's certificate is not made yet (Secret %s/%s)", k.Namespace, k.Name)
	}}
}

// Run syncs again and again until ctx ends, after the Sync its caller made first.
func (k *Keeper) Run(ctx context.Context) {
	every := k.Every
	if every <= 0 {
		every = 5 * time.Minute
	}
	wait := every
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = every
		if err := k.Sync(ctx); err != nil {
			klog.ErrorS(err, "the revisions webhook's certificate", "secret", k.Namespace+"/"+k.Name)
			wait = every / 10
		}
	}
}

// Sync reads the Secret, makes or renews what Decide says, serves the result and puts its CA
// in the webhook configuration.
func (k *Keeper) Sync(ctx context.Context) error {
	now := time.Now
	if k.Now != nil {
		now = k.Now
	}
	secrets := k.Client.CoreV1().Secrets(k.Namespace)
	what := fmt.Sprintf("Secret %s/%s", k.Namespace, k.Name)
	var s *corev1.Secret
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			return fmt.Errorf("%s: written by another writer at every try; it will be looked at again", what)
		}
		got, err := secrets.Get(ctx, k.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			data, err := Make(NewAll, nil, k.DNSNames, now())
			if err != nil {
				return err
			}
			got, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: k.Name, Namespace: k.Namespace,
				Labels: map[string]string{"app.kubernetes.io/name": "configwave", "app.kubernetes.io/component": "revisions-webhook-certificate"}},
				Type: corev1.SecretTypeTLS, Data: data}, metav1.CreateOptions{FieldManager: "configwave-wave"})
			if apierrors.IsAlreadyExists(err) {
				continue // another replica made it first: use that one
			}
			if err != nil {
				return fmt.Errorf("create %s for the webhook's certificate: %w; grant wave create on Secrets in %s (the chart's revisions.webhook.makeCertificate=true does)", what, err, k.Namespace)
			}
			klog.InfoS("made the revisions webhook's CA and certificate", "secret", k.Namespace+"/"+k.Name, "dnsNames", k.DNSNames)
		} else if err != nil {
			return fmt.Errorf("read %s, the webhook's certificate: %w; grant wave get on it", what, err)
		}
		a, why := Decide(got.Data, k.DNSNames, now())
		if a != Keep {
			data, err := Make(a, got.Data, k.DNSNames, now())
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			next := got.DeepCopy()
			next.Data = data
			updated, err := secrets.Update(ctx, next, metav1.UpdateOptions{FieldManager: "configwave-wave"})
			if apierrors.IsConflict(err) {
				continue // another replica renewed it: read theirs
			}
			if err != nil {
				return fmt.Errorf("renew %s (%s): %w; grant wave update on it", what, why, err)
			}
			klog.InfoS("renewed the revisions webhook's certificate", "secret", k.Namespace+"/"+k.Name, "made", a.String(), "why", why)
			got = updated
		}
		s = got
		break
	}
	pair, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if k.Configuration == "" {
		k.cert.Store(&pair)
		return nil
	}
	// A certificate under a new CA is served once the caBundle carries that CA: served
	// before, the API server's calls fail until the bundle catches up.
	if ServeAtOnce(k.cert.Load(), &pair, now()) {
		k.cert.Store(&pair)
	}
	err = k.injectLatest(ctx, s, what, now())
	if err == nil {
		k.cert.Store(&pair)
	}
	if k.Trusted != nil {
		k.Trusted(err == nil)
	}
	return err
}

// injectLatest puts s's CA in the registration, once s is still the Secret's latest: a
// replica that read it before another made a new CA would otherwise put the bundle back
// without it.
func (k *Keeper) injectLatest(ctx context.Context, s *corev1.Secret, what string, now time.Time) error {
	latest, err := k.Client.CoreV1().Secrets(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("%w: read %s again: %w", ErrRegistration, what, err)
	}
	if latest.ResourceVersion != s.ResourceVersion {
		return fmt.Errorf("%w: %s changed meanwhile; it will be looked at again", ErrRegistration, what)
	}
	return k.inject(ctx, Bundle(s.Data, now))
}

// ServeAtOnce says whether next may be served before the registration's caBundle is known
// to carry its CA: when nothing is served yet (nothing better to offer), when the one served
// is under the same CA (the bundle trusts both), or when the one served has expired.
func ServeAtOnce(served, next *tls.Certificate, now time.Time) bool {
	if served == nil || served.Leaf == nil || next.Leaf == nil {
		return true
	}
	return now.After(served.Leaf.NotAfter) ||
		(bytes.Equal(served.Leaf.RawIssuer, next.Leaf.RawIssuer) && bytes.Equal(served.Leaf.AuthorityKeyId, next.Leaf.AuthorityKeyId))
}

// ErrRegistration: the certificate is served, and its CA could not be put in the webhook's
// registration (not there yet, RBAC, a conflict). Looked at again soon; never a reason to stop.
var ErrRegistration = errors.New("the webhook's registration")

// inject puts the bundle ca in the caBundle of every webhook of the configuration: all of them are
// wave's (the chart registers one).
func (k *Keeper) inject(ctx context.Context, ca []byte) error {
	configs := k.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	for attempt := 0; attempt < 5; attempt++ {
		c, err := configs.Get(ctx, k.Configuration, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: MutatingWebhookConfiguration %s is not there (yet): register the webhook under that name, or give its name in --revisions-webhook-configuration", ErrRegistration, k.Configuration)
		}
		if err != nil {
			return fmt.Errorf("%w: read MutatingWebhookConfiguration %s, to put the webhook's CA in it: %w; grant wave get and update on it", ErrRegistration, k.Configuration, err)
		}
		if !needsCA(c, ca) {
			return nil
		}
		next := c.DeepCopy()
		for i := range next.Webhooks {
			next.Webhooks[i].ClientConfig.CABundle = ca
		}
		_, err = configs.Update(ctx, next, metav1.UpdateOptions{FieldManager: "configwave-wave"})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: put the webhook's CA in MutatingWebhookConfiguration %s: %w; grant wave update on it", ErrRegistration, k.Configuration, err)
		}
		klog.InfoS("put the revisions webhook's CA in its configuration", "configuration", k.Configuration)
		return nil
	}
	return fmt.Errorf("%w: MutatingWebhookConfiguration %s: written by another writer at every try; it will be looked at again", ErrRegistration, k.Configuration)
}

func needsCA(c *admissionregistrationv1.MutatingWebhookConfiguration, ca []byte) bool {
	for _, w := range c.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, ca) {
			return true
		}
	}
	return false
}
