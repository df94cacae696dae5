//go:build !configwave_fileonly

package main

// The API source, in the full build only: the file-only build (fileonly.go) links no API
// client, so that the launches that read mounted folders cost no more memory than the peers
// they replace.

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/kube/kubeclient"
	"github.com/configwave/configwave/internal/process/startup"
	"github.com/configwave/configwave/internal/reloader/apisource"
	"github.com/configwave/configwave/internal/reloader/coreclient"
	"github.com/configwave/configwave/internal/reloader/podevents"
	"github.com/configwave/configwave/internal/reloader/reload"
	"github.com/configwave/configwave/internal/reloader/unpack"
	"github.com/configwave/configwave/internal/reloader/webconfig"
)

// fileOnly is false: this build reads the API too.
const fileOnly = false

// fileOnlyBuildName is the file-only build's name, beside the full build in the image
// (internal/build/gobuild's FileOnlyReloader).
const fileOnlyBuildName = "reloader-fileonly"

// handOver replaces this process with the file-only build when the launch reads mounted
// folders only and the build is beside this one (as in the image): a configmap-reload chart
// gives args only, so its sidecar starts at the image's entrypoint, the full build, and would
// idle with the API client's pages for nothing. The command line and environment go over
// unchanged, before anything has started; where the exec fails, this build runs on.
func handOver(cfg *config, argv0 string, args []string) error {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	path, ok := fileOnlyBuildFor(cfg, exe, os.Stat)
	if !ok {
		return nil
	}
	err = execBuild(path, argv0, args)
	klog.InfoS("could not start the file-only build; running on in the full one", "path", path, "err", err)
	return nil
}

// fileOnlyBuildFor is the file-only build to hand a launch over to: one that reads folders
// only, and serves no web config file, from a full build that has the file-only build beside it.
func fileOnlyBuildFor(cfg *config, executable string, stat func(string) (os.FileInfo, error)) (string, bool) {
	if len(cfg.folders) == 0 || servesWebConfig(cfg) {
		return "", false
	}
	path := filepath.Join(filepath.Dir(executable), fileOnlyBuildName)
	if st, err := stat(path); err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", false
	}
	return path, true
}

// readAPI makes the API the source: the named and selected objects, unpacked under
// --configroot, and Events on the reloader's own pod when it runs in one.
func readAPI(cfg *config, r *reload.Reloader, metrics *reload.Metrics, reg prometheus.Registerer) (runningSource, eventRecorder, error) {
	restCfg, err := kubeclient.Config(cfg.kubeconfig, "configwave-reloader/"+startup.Version(version), 0, 0)
	if err != nil {
		return nil, nil, err
	}
	kubeclient.Uncompressed(restCfg)
	if cfg.peer.insecureAPI {
		restCfg.TLSClientConfig.Insecure = true
		restCfg.TLSClientConfig.CAFile, restCfg.TLSClientConfig.CAData = "", nil
	}
	client, err := coreclient.New(restCfg)
	if err != nil {
		return nil, nil, err
	}
	var keep []string
	if cfg.layout.FolderAnnotation != "" {
		keep = []string{cfg.layout.FolderAnnotation}
	}
	src := apisource.New(client, cfg.refs, cfg.selector, apisource.Options{
		OnWatchRestart:   func(src string) { metrics.WatchRestarts.WithLabelValues(src).Inc() },
		OnWatch:          func(src string) { metrics.WatchRestarts.WithLabelValues(src) }, // at 0 until the first restart
		Annotations:      keep,
		WatchIdleTimeout: cfg.watchIdle,
		OnWatchIdle: func(src string) {
			klog.InfoS("watch silent: no event and no bookmark; opening it again", "source", src, "for", cfg.watchIdle)
		},
	})
	layout := cfg.layout
	// Objects anyone may add by labelling one: one that cannot be laid out is left out,
	// and never freezes the others. Named objects are the app's own: all or nothing.
	layout.Isolate = cfg.selector != nil
	r.Layout = layout
	r.Writer = unpack.New(cfg.root)
	r.Told = &reload.ToldRecord{Path: filepath.Join(cfg.root, reload.ToldRecordName)}
	events := podEvents(client)
	var out runningSource = src
	var recorders eventRecorders
	if events != nil {
		r.Events = events
		recorders = append(recorders, events)
	}
	if cfg.rollout.oneFirst {
		gated, more, err := oneFirst(cfg, client, src, r, reg, events)
		if err != nil {
			return nil, nil, err
		}
		out, recorders = gated, append(recorders, more...)
	}
	if len(recorders) == 0 {
		return out, nil, nil // a nil slice in the interface would not be nil
	}
	return out, recorders, nil
}

// eventRecorders post Events about the pod and, under --rollout=one-first, about its sources.
type eventRecorders []*podevents.Recorder

// Run runs every recorder until ctx ends.
func (rs eventRecorders) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() { r.Run(ctx) })
	}
	wg.Wait()
}

// podEvents records Events on the reloader's own pod when it runs in one ($POD_NAME and the
// namespace from the downward API), and nowhere otherwise.
func podEvents(client rest.Interface) *podevents.Recorder {
	name := os.Getenv("POD_NAME")
	if name == "" {
		return nil
	}
	return podevents.New(client, podevents.Pod{Namespace: configref.DefaultNamespace(), Name: name, UID: types.UID(os.Getenv("POD_UID"))})
}

// checkWebConfig checks prometheus-config-reloader's --web-config-file at start.
func checkWebConfig(path string) error { return webconfig.Check(path) }

// webConfigServe serves the endpoints as the web config file says (TLS, client certificates,
// basic auth).
func webConfigServe(path string) func(net.Listener, *http.Server) error { return webconfig.Serve(path) }
