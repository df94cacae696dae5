// Package alert posts one line of text to a chat webhook, by default with the body Slack's
// incoming webhooks take ({"text": "..."}), which Mattermost, Rocket.Chat, Google Chat and
// Discord's /slack endpoint accept too, or in one of Stakater Reloader's sink formats. wave uses
// it to tell a team that a config rollout failed, so that someone reverts the change, and,
// with Reloader's ALERT_ON_RELOAD, of every rollout.
//
//	hook, err := alert.New(url)
//	g.Add(hook.Run, ...); hook.Send("configwave: the rollout of deployment ns/app failed ...")
package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/process/credfile"
	"github.com/configwave/configwave/internal/process/netaddr"
)

// Webhook sends texts one at a time, in order, in the background: a slow chat service never
// holds up a rollout. Texts beyond queueSize waiting are dropped, and counted in the log.
type Webhook struct {
	url    string
	host   string // what logs show: the URL's path is often the secret (Slack's is)
	client *http.Client
	queue  chan string
	tries  int
	pause  time.Duration
	grace  time.Duration // how long Run goes on delivering once stopped
	opts   Options

	dropped atomic.Int64
}

// Options shape the request: the body's format, a proxy, and the setting errors name.
type Options struct {
	// Format is the body: "" is {"text": ...} (Slack's incoming webhooks and the many that
	// take their format); Stakater Reloader's sinks "slack" (an attachment), "teams",
	// "gchat" and "raw" (the text as text/plain, without its * marks); "reloader-webhook" is
	// the fixed body Stakater Reloader's --webhook-url mode posts on every change.
	Format string
	// Proxy, when set, is the proxy to reach the webhook through; otherwise HTTPS_PROXY and
	// the others from the environment.
	Proxy string
	// Setting names where the URL came from in errors; default --notify-webhook.
	Setting string
	// AllowHTTP accepts an http:// URL to a host other than loopback (--allow-http-webhooks):
	// the text and the URL, often the credential itself, would cross the network in clear.
	AllowHTTP bool
}

// Formats Options.Format takes.
var Formats = []string{"", "slack", "teams", "gchat", "raw", StakaterWebhook}

// StakaterWebhook is the Format of Stakater Reloader's --webhook-url: its body, whatever the
// text (which only the log shows).
const StakaterWebhook = "reloader-webhook"

const (
	queueSize   = 100
	sendTimeout = 10 * time.Second
	// stopGrace: on shutdown, what is queued is still delivered for this long (within the 30 s
	// Kubernetes gives a pod by default, beside the controller's own drain).
	stopGrace  = 5 * time.Second
	maxURLFile = 4096
)

// New checks the URL; "@/path" reads it from a file (mount it from a Secret: a webhook URL is a
// credential). Errors never repeat the URL.
func New(raw string) (*Webhook, error) { return NewWith(raw, Options{}) }

// NewWith is New with options.
func NewWith(raw string, o Options) (*Webhook, error) {
	if o.Setting == "" {
		o.Setting = "--notify-webhook"
	}
	if !slices.Contains(Formats, o.Format) {
		return nil, fmt.Errorf("format %q: use slack, teams, gchat or raw", o.Format)
	}
	proxy := http.ProxyFromEnvironment // chat services are outside the cluster
	if o.Proxy != "" {
		p, err := url.Parse(o.Proxy)
		if err != nil || p.Host == "" {
			return nil, errors.New("the proxy is not a URL with a host (not shown: it may hold a password); give one such as http://proxy.example:3128")
		}
		proxy = http.ProxyURL(p)
	}
	if path, ok := strings.CutPrefix(raw, "@"); ok {
		b, err := credfile.Read(path, maxURLFile, "the webhook URL")
		if err != nil {
			return nil, err
		}
		raw = string(b)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("not an http(s) URL with a host; give the webhook's URL, or @FILE holding it")
	}
	if u.Scheme == "http" && !o.AllowHTTP && !netaddr.IsLoopbackHost(u.Hostname()) {
		// The callers name the setting (--notify-webhook, ALERT_WEBHOOK_URL) before it.
		return nil, fmt.Errorf("an http:// URL to %s: the alerts and the URL, often the credential itself, would cross the network unencrypted; use https://, or start wave with --allow-http-webhooks", u.Hostname())
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = proxy
	return &Webhook{
		url:  raw,
		host: u.Scheme + "://" + u.Host,
		client: &http.Client{
			Timeout:       sendTimeout,
			Transport:     transport,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		queue: make(chan string, queueSize),
		tries: 3,
		pause: 2 * time.Second,
		grace: stopGrace,
		opts:  o,
	}, nil
}

// Host is the URL's scheme and host, for logs.
func (w *Webhook) Host() string { return w.host }

// Send queues text; it never blocks.
func (w *Webhook) Send(text string) {
	select {
	case w.queue <- text:
	default:
		w.dropped.Add(1)
		klog.InfoS("alert dropped: too many waiting for the webhook", "webhook", w.host, "waiting", queueSize)
	}
}

// Dropped counts the alerts never delivered: the queue full, every try failed, or still
// waiting when the grace period after a stop ran out.
func (w *Webhook) Dropped() int64 { return w.dropped.Load() }

// Run posts queued texts until ctx ends, then goes on with what is queued for the grace
// period; whatever is left then is counted as dropped. Stop it only after whatever Sends has
// stopped (the controller), so that nothing is queued behind it.
func (w *Webhook) Run(ctx context.Context) error {
	// Posts go on after the stop, the one under way included, until the grace period ends.
	posting, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(w.grace, cancel) })
	defer stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case text := <-w.queue:
			w.deliver(posting, text)
		}
	}
	w.finish(posting)
	return nil
}

func (w *Webhook) deliver(ctx context.Context, text string) {
	if err := w.post(ctx, text); err != nil {
		w.dropped.Add(1)
		if ctx.Err() == nil {
			klog.ErrorS(err, "alert not delivered", "webhook", w.host)
		}
	}
}

// finish delivers what is queued while ctx (the grace period) lasts.
func (w *Webhook) finish(ctx context.Context) {
	for queued := true; queued && ctx.Err() == nil; {
		select {
		case text := <-w.queue:
			w.deliver(ctx, text)
		default:
			queued = false
		}
	}
	left := int64(len(w.queue))
	for range left {
		<-w.queue
	}
	w.dropped.Add(left)
	if n := w.Dropped(); n > 0 {
		klog.InfoS("alerts not delivered before the stop", "webhook", w.host, "dropped", n)
	}
}

// post tries a few times: a chat service's hiccup should not lose the news of a failed rollout.
func (w *Webhook) post(ctx context.Context, text string) error {
	body, contentType := w.body(text)
	var err error
	for try := 1; try <= w.tries; try++ {
		if err = w.once(ctx, body, contentType); err == nil || errors.Is(err, errPermanent) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(w.pause * time.Duration(try)):
		}
	}
	return err
}

var errPermanent = errors.New("the webhook refused the alert")

// body is text in the webhook's format.
func (w *Webhook) body(text string) ([]byte, string) {
	var v any
	switch w.opts.Format {
	case "slack":
		v = map[string]any{"attachments": []map[string]string{{"text": text, "color": "good", "author_name": "configwave"}}}
	case "raw":
		return []byte(strings.ReplaceAll(text, "*", "")), "text/plain"
	case StakaterWebhook:
		return []byte(`{"webhook":"update successful"}`), "application/json"
	default: // "", teams, gchat: each takes {"text": ...}
		v = map[string]string{"text": text}
	}
	b, _ := json.Marshal(v)
	return b, "application/json"
}

func (w *Webhook) once(ctx context.Context, body []byte, contentType string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return errors.New("build the request") // never the URL
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := w.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // *url.Error repeats the URL, and the URL is a credential
		}
		return fmt.Errorf("post to the webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("the webhook answered %s", resp.Status)
	}
	return fmt.Errorf("%w: it answered %s; check the URL (%s)", errPermanent, resp.Status, w.opts.Setting)
}
