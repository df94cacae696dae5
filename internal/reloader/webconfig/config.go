package webconfig

import (
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.yaml.in/yaml/v2"
	"golang.org/x/crypto/bcrypt"
)

// config is the web config file, with the toolkit's keys and defaults. Unknown keys are an
// error, as the toolkit reads the file strictly.
type config struct {
	TLS       tlsServerConfig   `yaml:"tls_server_config"`
	HTTP      httpServerConfig  `yaml:"http_server_config"`
	RateLimit rateLimit         `yaml:"rate_limit"`
	Users     map[string]secret `yaml:"basic_auth_users"` // user → bcrypt hash
}

// secret is a value the file holds that is never shown: a password hash, an inline key.
type secret string

type tlsServerConfig struct {
	Cert         string   `yaml:"cert"`
	Key          secret   `yaml:"key"`
	ClientCA     string   `yaml:"client_ca"`
	CertFile     string   `yaml:"cert_file"`
	KeyFile      string   `yaml:"key_file"`
	ClientAuth   string   `yaml:"client_auth_type"`
	ClientCAFile string   `yaml:"client_ca_file"`
	CipherSuites []cipher `yaml:"cipher_suites"`
	Curves       []curve  `yaml:"curve_preferences"`
	MinVersion   version  `yaml:"min_version"`
	MaxVersion   version  `yaml:"max_version"`
	// PreferServerCipherSuites is read and has no effect, as in the toolkit: Go's TLS chooses
	// the suite itself since Go 1.17.
	PreferServerCipherSuites bool     `yaml:"prefer_server_cipher_suites"`
	ClientAllowedSANs        []string `yaml:"client_allowed_sans"`
}

type httpServerConfig struct {
	HTTP2   bool              `yaml:"http2"`
	Headers map[string]string `yaml:"headers,omitempty"`
}

type rateLimit struct {
	Burst    int           `yaml:"burst"`
	Interval time.Duration `yaml:"interval"`
}

// load reads the file at path; relative file names in it are relative to its folder.
func load(path string) (*config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parse(b, filepath.Dir(path))
}

// parse reads a web config with the toolkit's defaults: TLS 1.2 to 1.3, HTTP/2 on.
func parse(b []byte, dir string) (*config, error) {
	c := &config{
		TLS:  tlsServerConfig{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13, PreferServerCipherSuites: true},
		HTTP: httpServerConfig{HTTP2: true},
	}
	err := yaml.UnmarshalStrict(b, c)
	if err == nil {
		err = checkHeaders(c.HTTP.Headers)
	}
	c.TLS.CertFile = joinDir(dir, c.TLS.CertFile)
	c.TLS.KeyFile = joinDir(dir, c.TLS.KeyFile)
	c.TLS.ClientCAFile = joinDir(dir, c.TLS.ClientCAFile)
	return c, err
}

func joinDir(dir, path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}

// settableHeaders are the response headers the file may set: with their allowed values, or
// any value when none are listed.
var settableHeaders = map[string][]string{
	"Strict-Transport-Security": nil,
	"X-Content-Type-Options":    {"nosniff"},
	"X-Frame-Options":           {"deny", "sameorigin"},
	"X-XSS-Protection":          nil,
	"Content-Security-Policy":   nil,
}

// checkHeaders names the first bad header in sorted order, so the same file always gets the same
// message (the toolkit names whichever its map iteration meets first).
func checkHeaders(headers map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		v := headers[k]
		allowed, ok := settableHeaders[k]
		if !ok {
			return fmt.Errorf("HTTP header %q can not be configured", k)
		}
		if len(allowed) > 0 && !slices.Contains(allowed, v) {
			return fmt.Errorf("invalid value for %s. Expected one of: %q, but got: %q", k, allowed, v)
		}
	}
	return nil
}

// checkUsers checks that every password is a bcrypt hash, user by user in sorted order, so
// that the same file always gets the same message (the toolkit's follows its map iteration).
func (c *config) checkUsers() error {
	for _, user := range slices.Sorted(maps.Keys(c.Users)) {
		if _, err := bcrypt.Cost([]byte(c.Users[user])); err != nil {
			return err
		}
	}
	return nil
}

type cipher uint16

func (c *cipher) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err != nil {
		return err
	}
	for _, cs := range tls.CipherSuites() { // the secure ones only, as in the toolkit
		if cs.Name == s {
			*c = cipher(cs.ID)
			return nil
		}
	}
	return errors.New("unknown cipher: " + s)
}

type curve tls.CurveID

var curves = map[string]curve{
	"CurveP256": curve(tls.CurveP256),
	"CurveP384": curve(tls.CurveP384),
	"CurveP521": curve(tls.CurveP521),
	"X25519":    curve(tls.X25519),
}

func (c *curve) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err != nil {
		return err
	}
	v, ok := curves[s]
	if !ok {
		return errors.New("unknown curve: " + s)
	}
	*c = v
	return nil
}

type version uint16

var versions = map[string]version{
	"TLS13": tls.VersionTLS13,
	"TLS12": tls.VersionTLS12,
	"TLS11": tls.VersionTLS11,
	"TLS10": tls.VersionTLS10,
}

func (v *version) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err != nil {
		return err
	}
	tv, ok := versions[s]
	if !ok {
		return errors.New("unknown TLS version: " + s)
	}
	*v = tv
	return nil
}
