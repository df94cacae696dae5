// Package notify tells an application that its config changed: an HTTP request with retries
// (sidecar mode), or a signal to the app's process, whether the reloader started it
// (subprocess mode) or it runs in another container of the pod.
//
//	n := &notify.HTTP{URL: "http://127.0.0.1:9090/-/reload"}
//	err := n.Notify(ctx) // retried with exponential backoff and jitter, then given up
//
// Starting and supervising that process is package supervise's job; this package only tells.
package notify

import "context"

// Notifier tells the app to reload its config.
type Notifier interface {
	Notify(ctx context.Context) error
}
