package main

import (
	"sync"
	"sync/atomic"

	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/process/serve"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// endpoints serve /healthz, /readyz, /metrics and /status (and the /live of Stakater Reloader's
// chart) from the start, before wave has what they answer from: while it waits there (for its
// install key, past a ResourceQuota), a liveness probe finds it alive and /readyz says not
// ready and for what, as while its caches fill, instead of a probe killing a wave that is
// only waiting.
type endpoints struct {
	servers []*serve.Server
	done    []chan error
	answers atomic.Pointer[endpointAnswers]
	waiting atomic.Pointer[string]
	owned   bool // the run group stops them
	stopped sync.Once
}

// endpointAnswers are what the endpoints answer from once wave has them.
type endpointAnswers struct {
	ready  func() bool
	detail func() string
	status func() any
}

func startEndpoints(cfg *config, reg *prometheus.Registry) (*endpoints, error) {
	e := &endpoints{}
	checks := func(c serve.Checks) serve.Checks {
		c.Ready = func() bool { a := e.answers.Load(); return a != nil && a.ready() }
		c.ReadyDetail = func() string {
			if a := e.answers.Load(); a != nil {
				return a.detail()
			}
			if w := e.waiting.Load(); w != nil && *w != "" {
				return "waiting for " + *w
			}
			return ""
		}
		return c
	}
	if cfg.listenAddress != "" {
		c := checks(serve.Checks{})
		c.Status = func() any {
			if a := e.answers.Load(); a != nil {
				return a.status()
			}
			return rollout.Status{}
		}
		srv, err := serve.Listen(cfg.listenAddress, reg, c)
		if err != nil {
			return nil, err
		}
		klog.InfoS("serving /healthz, /readyz, /metrics and /status", "address", srv.Addr())
		e.serve(srv)
	}
	if cfg.stakaterListen != "" {
		srv, err := serve.Listen(cfg.stakaterListen, reg, checks(serve.Checks{HealthPaths: []string{"/live"}, Flag: "--reloader-listen-address"}))
		if err != nil {
			e.stop()
			return nil, err
		}
		klog.InfoS("started by Stakater Reloader's chart: serving its /live and /metrics", "address", srv.Addr())
		e.serve(srv)
	}
	return e, nil
}

func (e *endpoints) serve(srv *serve.Server) {
	done := make(chan error, 1)
	go func() { done <- srv.Run() }()
	e.servers, e.done = append(e.servers, srv), append(e.done, done)
}

// waitingFor says on /readyz what wave waits for at start; "" nothing.
func (e *endpoints) waitingFor(what string) { e.waiting.Store(&what) }

// answerFrom makes the endpoints answer from what wave runs.
func (e *endpoints) answerFrom(a endpointAnswers) { e.answers.Store(&a) }

// add hands the servers to the run group: each is an actor that ends when its server does,
// stopped with the rest.
func (e *endpoints) add(g *run.Group) {
	e.owned = true
	for i, srv := range e.servers {
		done := e.done[i]
		g.Add(func() error { return <-done }, srv.Stop)
	}
}

// stop ends the servers when wave stops before the run group took them over.
func (e *endpoints) stop() {
	if e.owned {
		return
	}
	e.stopped.Do(func() {
		for i, srv := range e.servers {
			srv.Stop(nil)
			<-e.done[i]
		}
	})
}
