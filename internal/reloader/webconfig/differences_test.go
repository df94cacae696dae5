package webconfig

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/exporter-toolkit/web"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The deliberate differences from the toolkit: where the toolkit has a defect and ours does not.
// The tests that hold ours to the toolkit let ours differ only by naming one of these, and
// TestDeliberateDifferences shows the toolkit still behaves as each says, so that one the toolkit
// fixes fails there, to be dropped.
const (
	refusesUnverifiedSANs     = "client_allowed_sans needs a verified client certificate"
	noPanicWithoutCertificate = "no panic without a client certificate"
	resumedSessionsRechecked  = "client_allowed_sans checked on resumed sessions"
	unknownUserCost           = "an unknown user's hash has the users' cost"
	rightLoginsStayCached     = "wrong logins do not evict right ones"
)

var deliberateDifferences = []struct {
	name, reason string
	// toolkit shows the toolkit's side of the difference, against its own code; nil where it is
	// seen only in time, and the test named in the reason holds ours.
	toolkit func(t *testing.T)
}{
	{refusesUnverifiedSANs, "the toolkit checks the SANs of a certificate nobody verified (RequestClientCert, " +
		"RequireAnyClientCert: a self-signed certificate naming an allowed SAN gets in), never checks them " +
		"(NoClientCert, no TLS), or verifies against the system's public CAs (a Verify* type without a client CA); " +
		"we refuse the file at start, saying what to set instead (errUnverifiedSANs; TestClientAllowedSANsNeedAVerifiedCertificate)",
		toolkitTrustsUnverifiedSANs},
	{noPanicWithoutCertificate, "the toolkit indexes the client's certificates without looking whether there are any " +
		"(VerifyClientCertIfGiven, RequestClientCert): net/http recovers the panic and logs a stack trace for every " +
		"such connection, a log flood by anyone who connects (TestClientAllowedSANsAndNoClientCertificate)",
		toolkitPanicsWithoutCertificate},
	{resumedSessionsRechecked, "the toolkit checks the SANs in VerifyPeerCertificate, which crypto/tls does not call " +
		"on a resumed session: a client whose SAN was taken off the list keeps getting in by resuming, for the " +
		"session ticket's life; ours checks in VerifyConnection, called on every connection (TestRemovedSANEndsResumedSessions)",
		toolkitLetsRemovedSANResume},
	{unknownUserCost, "the toolkit compares an unknown user's password with a hash of cost 10 whatever the users' " +
		"cost, so the time of a refusal tells whether the user exists; seen only in time " +
		"(TestUnknownUserHashHasTheUsersCost)", nil},
	{rightLoginsStayCached, "the toolkit caches right and wrong logins together and evicts at random, so a flood of " +
		"distinct wrong logins evicts the right one and real scrapes queue behind one-at-a-time bcrypt; seen only " +
		"in time (TestBadLoginsDoNotEvictAGoodLogin)", nil},
}

// deliberately lets a test pass over a difference from the toolkit, naming it.
func deliberately(t testing.TB, name string) {
	t.Helper()
	for _, d := range deliberateDifferences {
		if d.name == name {
			t.Logf("deliberate difference from the toolkit: %s: %s", d.name, d.reason)
			return
		}
	}
	t.Fatalf("%q is not a deliberate difference from the toolkit", name)
}

// mapOrderRefusals are the kinds of refusal whose message, with several bad entries, depends on
// the toolkit's map iteration: a header (either kind), a user's password hash (any of bcrypt's).
var mapOrderRefusals = []*regexp.Regexp{
	regexp.MustCompile(`^(HTTP header ".*" can not be configured|invalid value for .*\. Expected one of: .*)$`),
	regexp.MustCompile(`^crypto/bcrypt: `),
}

// sameVerdict holds our verdict on a file to the toolkit's: the same acceptance and, on a refusal,
// the same message, but for a refusal that is a deliberate difference.
func sameVerdict(t testing.TB, theirs, ours error) {
	t.Helper()
	switch {
	case theirs == nil && errors.Is(ours, errUnverifiedSANs):
		deliberately(t, refusesUnverifiedSANs)
	case theirs == nil:
		assert.NoError(t, ours)
	case assert.Error(t, ours, "the toolkit refuses it: %v", theirs):
		for _, kind := range mapOrderRefusals {
			if kind.MatchString(theirs.Error()) {
				// With several bad headers or users the toolkit names whichever its map
				// iteration meets first.
				assert.Regexp(t, kind, ours.Error())
				return
			}
		}
		// The toolkit's config.Secret unmarshals through a local type named plain, which its
		// message names where a Secret is given a sequence or a map: the same type.
		assert.Equal(t, strings.ReplaceAll(theirs.Error(), "config.plain", "config.Secret"), inToolkitTerms(ours))
	}
}

func TestDeliberateDifferences(t *testing.T) {
	for _, d := range deliberateDifferences {
		t.Run(d.name, func(t *testing.T) {
			require.NotEmpty(t, d.reason)
			if d.toolkit == nil {
				t.Log(d.reason)
				return
			}
			d.toolkit(t)
		})
	}
}

func toolkitServe(path string) func(net.Listener, *http.Server) error {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	return func(ln net.Listener, srv *http.Server) error {
		return web.Serve(ln, srv, &web.FlagConfig{WebConfigFile: &path}, logger)
	}
}

func toolkitTrustsUnverifiedSANs(t *testing.T) {
	dir := certDir(t)
	path := writeConfig(t, dir, serverTLS+"  client_auth_type: RequireAnyClientCert\n  client_allowed_sans: [test3]\n")
	require.NoError(t, web.Validate(path), "the toolkit accepts the file")
	require.ErrorIs(t, Check(path), errUnverifiedSANs, "we refuse it")
	addr, _ := loggedServer(t, toolkitServe(path))
	// client2's certificate is self-signed, and no client_ca_file names it: nothing verified it.
	assert.Contains(t, answer(addr, "https", "client2_selfsigned", dir, "", ""), "200 ", "the toolkit lets it in on its SAN alone")
}

func toolkitPanicsWithoutCertificate(t *testing.T) {
	dir := certDir(t)
	path := writeConfig(t, dir, serverTLS+"  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: client2_selfsigned.pem\n  client_allowed_sans: [test3]\n")
	require.NoError(t, web.Validate(path))
	addr, errorLog := loggedServer(t, toolkitServe(path))
	assert.Equal(t, "error", answer(addr, "https", "", dir, "", ""))
	waitForLog(t, errorLog, "panic")
}

func toolkitLetsRemovedSANResume(t *testing.T) {
	resp, err := afterSANRemoved(t, toolkitServe)
	require.NoError(t, err, "the toolkit lets the removed SAN in")
	assert.True(t, resp.TLS.DidResume, "by resuming its session")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
