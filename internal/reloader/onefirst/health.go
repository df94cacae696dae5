package onefirst

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Health judges this pod's app while it soaks a content: its pod's Ready condition as kubelet
// reports it, the reload loop's result, and --health-url where given. Its reasons go on the
// Lease, in Events and on /status, so they say what failed and never quote the config.
type Health struct {
	Pod          func(ctx context.Context) (PodState, error) // the pod as the API has it now
	ReloadFailed func(since time.Time) string                // the reload loop's failure since, or ""
	URL          string                                      // --health-url; "" none
	URLTimeout   time.Duration                               // --health-url-timeout; 0: the larger of Poll and 1 s
	URLFailures  int                                         // --health-url-failure-threshold; 0: 1
	Client       *http.Client
	Soak, Poll   time.Duration
	Clock        func() time.Time

	mu       sync.Mutex
	since    time.Time
	wasReady bool
	urlFails int // requests to URL failed in a row
}

// Begin notes how the pod stands as a content is laid out at since: a pod Ready then that goes
// not Ready fails at once, rather than at the soak's end.
func (h *Health) Begin(ctx context.Context, since time.Time) {
	pod, err := h.Pod(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.since, h.wasReady, h.urlFails = since, err == nil && pod.Ready, 0
}

// Failed says how the app failed since the content was laid out at since, pod being how the
// pod stands now (nil: it could not be read); "" when healthy.
func (h *Health) Failed(ctx context.Context, since time.Time, pod *PodState) string {
	if why := h.ReloadFailed(since); why != "" {
		return why
	}
	if h.URL != "" && ctx.Err() == nil { // a step that ran out of time takes no sample: the API's delay is not the app's
		why := h.checkURL(ctx)
		h.mu.Lock()
		if !h.since.Equal(since) {
			h.since, h.wasReady, h.urlFails = since, false, 0 // a new content: what was seen of the last does not count
		}
		if why == "" {
			h.urlFails = 0
		} else {
			h.urlFails++
		}
		fails := h.urlFails
		h.mu.Unlock()
		if why != "" {
			// The app's URL is said without its user, password or query, which may hold a token.
			klog.InfoS("warning: --health-url failed", "url", redactURL(h.URL), "why", why, "inARow", fails, "threshold", max(h.URLFailures, 1))
			if fails >= max(h.URLFailures, 1) {
				return why
			}
		}
	}
	if pod == nil {
		return "" // the API's trouble is not the app's: the soak goes on, and ends on a sample that saw the pod
	}
	ready := pod.Ready
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.since.Equal(since) {
		h.since, h.wasReady = since, false
	}
	why := readyVerdict(h.wasReady, ready, h.Clock().Sub(since), h.Soak, h.Poll)
	h.wasReady = h.wasReady || ready
	return why
}

// readyVerdict judges the pod's readiness during a soak: a pod that was Ready since the
// content was laid out and is not now failed; one not Ready since then fails only when the
// soak is about to end, so that a content that makes an unready pod Ready passes.
func readyVerdict(wasReady, ready bool, soaked, soak, poll time.Duration) string {
	switch {
	case ready:
		return ""
	case wasReady:
		return "the pod became not Ready after the config was laid out (its readiness probe failed)"
	case soaked >= soak-poll:
		return fmt.Sprintf("the pod was not Ready at any time in the %s soak", soak)
	}
	return ""
}

// directClient asks the app itself: no proxy from the environment (HTTP_PROXY is for the app's
// traffic out of the pod), no redirect followed (a 302 to a login page is no health).
var directClient = &http.Client{
	Transport:     &http.Transport{Proxy: nil},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// redactURL is u without its user information and query: what a log may show.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable)"
	}
	p.User, p.RawQuery, p.Fragment = nil, "", ""
	return p.String()
}

func (h *Health) checkURL(ctx context.Context) string {
	timeout := h.URLTimeout
	if timeout <= 0 {
		timeout = max(h.Poll, time.Second)
	}
	// Its own time, not what is left of the step's: calls to the API before it may have used
	// most of that, and a slow API is not the app failing.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL, nil)
	if err != nil {
		return "--health-url cannot be requested"
	}
	client := h.Client
	if client == nil {
		client = directClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return "--health-url did not answer"
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Sprintf("--health-url answered %d", resp.StatusCode)
	}
	return ""
}
