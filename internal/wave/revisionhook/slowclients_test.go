package revisionhook

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
)

// No pod can switch the webhook off: clients that open many connections, announce a large body
// and trickle it hold connections, not the places reviews are decided in, and are cut off; a
// well-formed review sent meanwhile is answered. (Before, 64 such clients took every place and
// each real review was answered 429, which the API server takes as admitting the pod
// unchanged, without its revision's config.)
func TestHandlerAnswersWhileSlowClientsHoldConnections(t *testing.T) {
	snap := "app-0123456789"
	srv := httptest.NewUnstartedServer(&Handler{Look: &look{index: map[string]string{"configmap.app": snap}}})
	srv.StartTLS()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	tlsConfig := srv.Client().Transport.(*http.Transport).TLSClientConfig

	const slow = 70
	conns := make([]net.Conn, 0, slow)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range slow {
		c, err := tlsDial(addr, tlsConfig)
		require.NoError(t, err)
		conns = append(conns, c)
		_, err = fmt.Fprintf(c, "POST /mutate HTTP/1.1\r\nHost: wave\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", maxReview)
		require.NoError(t, err)
	}
	// Each of them sends one more byte now and then, while the real review comes.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			for _, c := range conns {
				_, _ = c.Write([]byte(" "))
			}
		}
	}()
	time.Sleep(200 * time.Millisecond) // every slow request is in the handler now
	resp, err := srv.Client().Post(srv.URL+"/mutate", "application/json", bytes.NewReader(review(t, admissionv1.Create, "", appPod(revision))))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a well-formed review is answered while %d slow clients are connected", slow)

	// The slow clients are cut off: each gets an answer (not a review's) or its connection
	// closed, well before a test's patience runs out.
	for i, c := range conns {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute)))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil {
			assert.False(t, strings.Contains(line, " 200 "), "slow client %d: %q", i, line)
		}
		var ne net.Error
		if err != nil && errorsAs(err, &ne) && ne.Timeout() {
			t.Fatalf("slow client %d was never cut off", i)
		}
	}
}

// A body announced over the cap is refused unread.
func TestHandlerRefusesAnOversizedReviewUnread(t *testing.T) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/mutate", strings.NewReader("{"))
	req.ContentLength = 3000000
	(&Handler{Look: &look{}}).ServeHTTP(rec, req)
	assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	assert.Contains(t, rec.Body.String(), "over the 1048576 this webhook reads")
}

func tlsDial(addr string, cfg *tls.Config) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
}

func errorsAs(err error, target *net.Error) bool { return errors.As(err, target) }
