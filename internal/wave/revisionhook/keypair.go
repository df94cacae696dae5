package revisionhook

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// KeyPair serves the certificate in a folder as cert-manager (a Certificate's Secret mounted
// there) and controller-runtime's webhooks lay it out: tls.crt and tls.key. It reads them again
// when either file changes, so a renewed certificate is served without a restart; a pair that
// does not load keeps the last good one.
type KeyPair struct {
	Dir string

	mu    sync.Mutex
	stamp string
	cert  *tls.Certificate
}

// Load reads the pair once, to refuse a start that could serve nothing.
func (k *KeyPair) Load() error {
	_, err := k.current()
	return err
}

// TLSConfig is the server's TLS configuration: TLS 1.2 and later, as the API server speaks.
func (k *KeyPair) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return k.current() }}
}

func (k *KeyPair) current() (*tls.Certificate, error) {
	crt, key := filepath.Join(k.Dir, "tls.crt"), filepath.Join(k.Dir, "tls.key")
	stamp, err := stampOf(crt, key)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		if k.cert != nil {
			return k.cert, nil
		}
		return nil, fmt.Errorf("--revisions-webhook-cert-dir %s: %w: mount the webhook's certificate there (tls.crt, tls.key)", k.Dir, err)
	}
	if stamp == k.stamp && k.cert != nil {
		return k.cert, nil
	}
	pair, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		if k.cert != nil {
			return k.cert, nil // a renewal half written: a later handshake loads it
		}
		return nil, fmt.Errorf("--revisions-webhook-cert-dir %s: %w: mount a certificate and its key there (tls.crt, tls.key)", k.Dir, err)
	}
	k.stamp = stamp
	k.cert = &pair
	return k.cert, nil
}

// stampOf tells the files' versions apart: kubelet swaps a mounted Secret's files through a
// symlink, so both the size and the modification time of what they point at change.
func stampOf(paths ...string) (string, error) {
	out := ""
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		out += fmt.Sprintf("%s:%d:%d;", p, fi.Size(), fi.ModTime().UnixNano())
	}
	return out, nil
}
