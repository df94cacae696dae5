package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// RuntimeInfoConfirmed tells the app with Notifier (a signal) and then confirms, through
// Prometheus' runtime info (/api/v1/status/runtimeinfo), that the reload happened and worked,
// as prometheus-config-reloader does with --reload-method=signal and --runtimeinfo-url: a
// signal alone says nothing of whether the new config was taken.
type RuntimeInfoConfirmed struct {
	Notifier
	URL     string
	Client  *http.Client  // default NewClient(), or one with TLS
	TLS     *TLSFiles     // for an https URL, as HTTP.TLS
	Poll    time.Duration // default 1 s
	Timeout time.Duration // how long to wait for the reload; default 30 s
	// RequestTimeout bounds each read of the runtime info, so that a wedged app never holds
	// the loop (and --unhealthy-after still fires); default 10 s.
	RequestTimeout time.Duration
}

type runtimeInfo struct {
	success bool
	last    time.Time
}

// Notify signals, then waits until Prometheus reports a successful reload newer than the one
// before the signal, or a failed one.
func (c *RuntimeInfoConfirmed) Notify(ctx context.Context) error {
	before, err := c.get(ctx)
	if err != nil {
		return fmt.Errorf("before the reload: %w", err)
	}
	// Prometheus reports its last reload to the second: a reload within the second of the last
	// one could not be told apart from it. Wait for the next second first.
	if wait := time.Until(before.last.Add(time.Second)); wait > 0 && wait <= time.Second {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	if err := c.Notifier.Notify(ctx); err != nil {
		return err
	}
	timeout, poll := c.Timeout, c.Poll
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if poll <= 0 {
		poll = time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		now, err := c.get(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			return fmt.Errorf("after the reload: %w", err)
		case err == nil && now.success && now.last.After(before.last):
			return nil
		case err == nil && before.success && !now.success:
			return fmt.Errorf("the app reports that it could not load the new config (%s: reloadConfigSuccess false); its log says why", RedactURL(c.URL))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no successful reload reported by %s within %s", RedactURL(c.URL), timeout)
		case <-t.C:
		}
	}
}

func (c *RuntimeInfoConfirmed) get(ctx context.Context) (runtimeInfo, error) {
	limit := c.RequestTimeout
	if limit <= 0 {
		limit = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
	if err != nil { // the parse error repeats the URL, password and all: not shown
		return runtimeInfo{}, fmt.Errorf("--runtimeinfo-url %s does not parse as a URL", RedactURL(c.URL))
	}
	client, err := c.TLS.clientFor(c.Client, req)
	if err != nil {
		return runtimeInfo{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return runtimeInfo{}, fmt.Errorf("GET %s: %w", RedactURL(c.URL), redactURLError(err, c.URL))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return runtimeInfo{}, fmt.Errorf("GET %s: answered %s", RedactURL(c.URL), resp.Status)
	}
	var body struct {
		Status string `json:"status"`
		Data   struct {
			ReloadConfigSuccess bool      `json:"reloadConfigSuccess"`
			LastConfigTime      time.Time `json:"lastConfigTime"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return runtimeInfo{}, fmt.Errorf("GET %s: not Prometheus' runtime info: %w", RedactURL(c.URL), err)
	}
	if body.Status != "success" {
		return runtimeInfo{}, fmt.Errorf("GET %s: status %q", RedactURL(c.URL), body.Status)
	}
	return runtimeInfo{success: body.Data.ReloadConfigSuccess, last: body.Data.LastConfigTime}, nil
}
