package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// kwokStory runs where no real node can: the app's pods are kwok's, and the sidecar is our
// reloader on this machine, unpacking the ConfigMap from the API for an HTTP endpoint that
// prints what it reads when told.
type kwokStory struct {
	configRoot string
	reloaded   chan string
}

func (s *kwokStory) setUp(ctx context.Context, d *demo) error {
	s.configRoot = filepath.Join(d.c.Dir(), "config")
	if err := os.MkdirAll(s.configRoot, 0o755); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.reloaded = make(chan string, 16)
	app := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.reloaded <- fmt.Sprintf("%s %s, reads app.yaml = %q", r.Method, r.URL.Path, strings.TrimSpace(s.read()))
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = app.Serve(ln) }()
	d.later(func() { app.Close() })
	if _, err := d.client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config"},
		Data: map[string]string{"app.yaml": "greeting: hello"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	stop, err := startBinary(d.reloaderBin, filepath.Join(d.c.LogDir(), "reloader.log"), "--kubeconfig="+d.c.Kubeconfig(), "--namespace="+ns,
		"--configmap=app-config", "--configroot="+s.configRoot, "--reload-http=http://"+ln.Addr().String()+"/-/reload", "--listen-address=127.0.0.1:0", "--v=2")
	if err != nil {
		return err
	}
	d.later(stop)
	d.say("applied: ConfigMap app-config {app.yaml: \"greeting: hello\"}; reloader started as a sidecar for it, unpacking into %s", s.configRoot)
	if err := waitFor(ctx, func() bool { return s.read() == "greeting: hello" }); err != nil {
		return err
	}
	d.say("reloader: unpacked app.yaml = \"greeting: hello\"")
	return nil
}

func (s *kwokStory) read() string {
	b, _ := os.ReadFile(filepath.Join(s.configRoot, "app.yaml"))
	return string(b)
}

func (s *kwokStory) app() *appsv1.Deployment {
	d := testcluster.Deployment(ns, "app", 2)
	d.Annotations = map[string]string{"wave.pusher.com/update-on-config-change": "true"}
	d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}}
	d.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}}
	return d
}

func (s *kwokStory) patch() string { return `{"data":{"app.yaml":"greeting: hello, world"}}` }

func (s *kwokStory) follow(ctx context.Context, d *demo, w *watchers) {
	w.add(func() error {
		err := waitFor(ctx, func() bool { return s.read() == "greeting: hello, world" })
		if err == nil {
			d.event("reloader: new app.yaml on disk, swapped in atomically (after its 100 ms --debounce)")
		}
		return err
	})
	w.add(func() error {
		select {
		case msg := <-s.reloaded:
			d.event("app: reload request %s", msg)
			return nil
		case <-time.After(time.Minute):
			return errors.New("no reload request within a minute")
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}
