// Package netaddr answers one question both binaries ask before they relax a rule for a URL:
// does it stay on the loopback interface, so that the request never leaves the pod?
//
//	if netaddr.IsLoopbackURL("https://localhost:9090/-/reload") { ... }
package netaddr

import (
	"net"
	"net/url"
	"strings"
)

// IsLoopbackHost reports whether host (a name or an address, without port or brackets) is
// "localhost" or a loopback address. Other names are not resolved: what they resolve to may
// change after the check.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopbackURL reports whether raw parses as a URL whose host is on the loopback interface.
func IsLoopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Host != "" && IsLoopbackHost(u.Hostname())
}
