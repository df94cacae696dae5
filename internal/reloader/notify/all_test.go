package notify

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each endpoint is told with its own tries; the error names only the one that failed, and the
// hooks see every try and the end of each Notify.
func TestAllTellsEachEndpointWithItsOwnTries(t *testing.T) {
	var good, bad atomic.Int32
	goodSrv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { good.Add(1) }))
	defer goodSrv.Close()
	badSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		bad.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer badSrv.Close()

	type try struct {
		url  string
		code int
		err  bool
	}
	var mu sync.Mutex
	var tries []try
	var done []string
	backoff := Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3}
	mk := func(u string) *HTTP {
		return &HTTP{URL: u + "/-/reload?token=s3cr3t", Backoff: backoff,
			OnTry: func(url string, code int, err error) {
				mu.Lock()
				tries = append(tries, try{url, code, err != nil})
				mu.Unlock()
			},
			OnDone: func(url string, err error, _ time.Duration) {
				mu.Lock()
				if err != nil {
					done = append(done, "failed "+url)
				} else {
					done = append(done, "told "+url)
				}
				mu.Unlock()
			}}
	}
	err := All{mk(goodSrv.URL), mk(badSrv.URL)}.Notify(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), badSrv.URL)
	assert.NotContains(t, err.Error(), goodSrv.URL)
	assert.NotContains(t, err.Error(), "s3cr3t")
	assert.EqualValues(t, 1, good.Load())
	assert.EqualValues(t, 3, bad.Load())

	shownGood, shownBad := goodSrv.URL+"/-/reload?token=xxxxx", badSrv.URL+"/-/reload?token=xxxxx"
	assert.ElementsMatch(t, []string{"told " + shownGood, "failed " + shownBad}, done)
	assert.ElementsMatch(t, []try{{shownGood, 200, false}, {shownBad, 503, true}, {shownBad, 503, true}, {shownBad, 503, true}}, tries)
}

func TestAllOfOneIsThatOne(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	require.NoError(t, All{&HTTP{URL: srv.URL}}.Notify(context.Background()))
	srv.Close()
	require.Error(t, All{&HTTP{URL: srv.URL, Backoff: Backoff{Duration: time.Millisecond, Steps: 1}}}.Notify(context.Background()))
}
