package netaddr

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestIsLoopbackURL(t *testing.T) {
	for raw, want := range map[string]bool{
		"https://localhost:9090/-/reload":     true,
		"https://LOCALHOST/":                  true,
		"http://127.0.0.1:9090/-/reload":      true,
		"http://127.3.4.5/":                   true,
		"http://[::1]:8080/":                  true,
		"https://prometheus.monitoring:9090/": false,
		"https://localhost.example.com/":      false,
		"http://10.0.0.1/":                    false,
		"http://[::ffff:10.0.0.1]/":           false,
		"/relative/path":                      false,
		"http://user:pw@127.0.0.1/":           true,
		"://bad":                              false,
		"https://127.0.0.1.nip.io/":           false,
		"http://0.0.0.0/":                     false,
	} {
		assert.Equal(t, want, IsLoopbackURL(raw), raw)
	}
}
