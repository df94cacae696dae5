package alert

import (
	"fmt"
	"strings"
)

// StakaterEnv is Stakater Reloader's alert on every reload, set in its container's environment
// (its chart's reloader.enableAlerts... values): ALERT_ON_RELOAD=true turns it on,
// ALERT_WEBHOOK_URL is where, ALERT_SINK the body's format, ALERT_WEBHOOK_PROXY a proxy, and
// ALERT_ADDITIONAL_INFO a prefix such as the cluster's name.
type StakaterEnv struct {
	On    bool
	URL   string // a credential: never logged
	Sink  string
	Proxy string
	Info  string
}

// ReadStakaterEnv reads it as Reloader does: trimmed, the sink in lower case, and an unknown
// sink sent raw.
func ReadStakaterEnv(getenv func(string) string) StakaterEnv {
	e := StakaterEnv{
		On:    getenv("ALERT_ON_RELOAD") == "true",
		URL:   strings.TrimSpace(getenv("ALERT_WEBHOOK_URL")),
		Sink:  strings.ToLower(strings.TrimSpace(getenv("ALERT_SINK"))),
		Proxy: strings.TrimSpace(getenv("ALERT_WEBHOOK_PROXY")),
		Info:  strings.TrimSpace(getenv("ALERT_ADDITIONAL_INFO")),
	}
	switch e.Sink {
	case "slack", "teams", "gchat":
	default:
		e.Sink = "raw"
	}
	return e
}

// Webhook is the webhook the environment asks for; nil when ALERT_ON_RELOAD is not "true".
// allowHTTP is Options.AllowHTTP.
func (e StakaterEnv) Webhook(allowHTTP bool) (*Webhook, error) {
	if !e.On {
		return nil, nil
	}
	if e.URL == "" {
		return nil, fmt.Errorf("ALERT_ON_RELOAD is true but ALERT_WEBHOOK_URL is empty: set it (from a Secret) or drop ALERT_ON_RELOAD")
	}
	w, err := NewWith(e.URL, Options{Format: e.Sink, Proxy: e.Proxy, Setting: "ALERT_WEBHOOK_URL", AllowHTTP: allowHTTP})
	if err != nil {
		return nil, fmt.Errorf("ALERT_WEBHOOK_URL or ALERT_WEBHOOK_PROXY: %w", err)
	}
	return w, nil
}

// Message is the text of one rollout, in Reloader's words and marks, with the additional
// information first as Reloader puts it. changed names the objects (configmap/NAME, ...); no
// value is ever part of it.
func (e StakaterEnv) Message(changed, kind, namespace, name string) string {
	msg := fmt.Sprintf("wave detected changes in *%s* in namespace *%s*. Hence rolled out *%s* of type *%s* in namespace *%s*", changed, namespace, name, kind, namespace)
	if e.Info != "" {
		msg = e.Info + " : " + msg
	}
	return msg
}
