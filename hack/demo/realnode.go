package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testpod"
)

// The images the node runs, imported without a registry.
const (
	reloaderImage = "localhost/configwave-reloader:demo"
	nginxImage    = "localhost/nginx:demo"
)

// realStory runs the pods on a real node: Deployment web is Debian's nginx with our reloader
// from our image as its sidecar, on the ConfigMap volume kubelet mounts and refreshes, telling
// nginx by SIGHUP through the pod's shared process namespace; Deployment app runs the node's
// pause image, which reads nothing after its start, so wave rolls it.
type realStory struct {
	node  *testcluster.Node
	web   corev1.Pod
	lines chan string // the reloader container's log, as kubelet serves it
}

func (s *realStory) setUp(ctx context.Context, d *demo) error {
	nginx, err := s.images(ctx, d)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, func() bool {
		_, err := d.client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}); err != nil {
		return fmt.Errorf("namespace %s has no default ServiceAccount: %w", ns, err)
	}
	if _, err := d.client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config"},
		Data: map[string]string{"nginx.conf": nginxConfig("hello")}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := d.client.AppsV1().Deployments(ns).Create(ctx, webDeployment(nginx), metav1.CreateOptions{}); err != nil {
		return err
	}
	d.say("applied: ConfigMap app-config {nginx.conf: a server that answers \"hello\"}; Deployment web: nginx, and our reloader as its sidecar (--volume-dir=/etc/nginx/conf --reload-process=nginx)")
	if err := waitFor(ctx, func() bool {
		pods, err := d.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(pods.Items) != 1 || !testcluster.PodReady(pods.Items[0]) {
			return false
		}
		s.web = pods.Items[0]
		return s.answer() == "hello"
	}); err != nil {
		return fmt.Errorf("deployment web never answered: %w\n%s", err, testcluster.DescribePods(ctx, d.client, ns))
	}
	d.say("web: pod %s ready on the real node; nginx answers %q at %s:8080", s.web.Name, "hello", s.web.Status.PodIP)
	return s.followLog(ctx, d)
}

// images imports our image, as `make image` builds it, and Debian's nginx packed as one.
func (s *realStory) images(ctx context.Context, d *demo) (nginx string, err error) {
	d.say("building our image (as make image does) and packing Debian's nginx as an image for the node")
	layout, err := testpod.WriteLayout(ctx, filepath.Join(d.c.Dir(), "image"))
	if err != nil {
		return "", err
	}
	if err := s.node.ImportLayoutImage(ctx, layout, "reloader", reloaderImage); err != nil {
		return "", err
	}
	if nginx, err = testcluster.LookProgram("nginx", "nginx-light"); err != nil {
		return "", err
	}
	files, err := testcluster.HostProgramFiles(ctx, nginx)
	if err != nil {
		return "", err
	}
	img, err := testcluster.FilesImage(files, []string{nginx}, "65532:65532")
	if err != nil {
		return "", err
	}
	return nginx, s.node.ImportImage(ctx, img, nginxImage)
}

// followLog streams the reloader container's log through the API server, as kubectl logs -f.
func (s *realStory) followLog(ctx context.Context, d *demo) error {
	logs, err := d.client.CoreV1().Pods(ns).GetLogs(s.web.Name, &corev1.PodLogOptions{Container: "reloader", Follow: true}).Stream(ctx)
	if err != nil {
		return fmt.Errorf("the reloader's log in pod %s: %w", s.web.Name, err)
	}
	d.later(func() { logs.Close() })
	s.lines = make(chan string, 64)
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			select {
			case s.lines <- sc.Text():
			default: // nobody reads before the change: drop
			}
		}
	}()
	return nil
}

func (s *realStory) answer() string {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + s.web.Status.PodIP + ":8080/")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b))
}

func (s *realStory) app() *appsv1.Deployment {
	d := testcluster.Deployment(ns, "app", 2)
	d.Annotations = map[string]string{"wave.pusher.com/update-on-config-change": "true"}
	spec := &d.Spec.Template.Spec
	onRealNode(spec)
	spec.Volumes = []corev1.Volume{configVolume()}
	spec.Containers = []corev1.Container{{Name: "app", Image: testcluster.PauseImage, ImagePullPolicy: corev1.PullNever,
		VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}}}}
	return d
}

func (s *realStory) patch() string {
	return fmt.Sprintf(`{"data":{"nginx.conf":%q}}`, nginxConfig("hello, world"))
}

func (s *realStory) follow(ctx context.Context, d *demo, w *watchers) {
	mounted := filepath.Join(s.node.PodVolumeDir(s.web.UID, "config"), "nginx.conf")
	w.add(func() error {
		err := waitFor(ctx, func() bool {
			b, _ := os.ReadFile(mounted)
			return strings.Contains(string(b), "hello, world")
		})
		if err == nil {
			d.event("kubelet: nginx.conf in pod %s's mounted volume replaced (its ..data swap, on its 1 s sync period)", s.web.Name)
		}
		return err
	})
	w.add(func() error {
		for line := range s.lines {
			if strings.Contains(line, "app reloaded") {
				if _, msg, ok := strings.Cut(line, "] "); ok { // klog's header: severity, time, pid, file
					line = msg
				}
				d.event("reloader: %s (its log, through kubectl logs)", line)
				return nil
			}
		}
		return fmt.Errorf("the reloader's log in pod %s ended without a reload", s.web.Name)
	})
	w.add(func() error {
		err := waitFor(ctx, func() bool { return s.answer() == "hello, world" })
		if err != nil {
			return err
		}
		pod, err := d.client.CoreV1().Pods(ns).Get(ctx, s.web.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.event("web: nginx answers %q, from the same pod %s (restarts: %d): reloaded in place, not replaced", "hello, world", pod.Name, restarts(*pod))
		return nil
	})
}

// webDeployment is nginx with our reloader beside it, both as the restricted Pod Security
// profile allows, on the real node.
func webDeployment(nginx string) *appsv1.Deployment {
	d := testcluster.Deployment(ns, "web", 1)
	spec := &d.Spec.Template.Spec
	onRealNode(spec)
	share, nonRoot, uid := true, true, int64(65532)
	spec.ShareProcessNamespace = &share // the reloader signals nginx's master by name
	spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: &nonRoot, RunAsUser: &uid, RunAsGroup: &uid,
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	spec.Volumes = []corev1.Volume{configVolume(), {Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	restricted := func() *corev1.SecurityContext {
		no, yes := false, true
		return &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	}
	conf := []corev1.VolumeMount{{Name: "config", MountPath: "/etc/nginx/conf", ReadOnly: true}}
	spec.Containers = []corev1.Container{{
		Name: "nginx", Image: nginxImage, ImagePullPolicy: corev1.PullNever,
		Args:            []string{"-p", "/run/nginx", "-e", "stderr", "-c", "/etc/nginx/conf/nginx.conf", "-g", "daemon off;"},
		VolumeMounts:    append(conf, corev1.VolumeMount{Name: "run", MountPath: "/run/nginx"}),
		ReadinessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
		SecurityContext: restricted(),
	}, {
		Name: "reloader", Image: reloaderImage, ImagePullPolicy: corev1.PullNever,
		Args:            []string{"--volume-dir=/etc/nginx/conf", "--reload-process=" + filepath.Base(nginx)},
		VolumeMounts:    conf,
		SecurityContext: restricted(),
	}}
	return d
}

// onRealNode puts a pod on the real node, stopped within 2 s and without an API token.
func onRealNode(spec *corev1.PodSpec) {
	grace := int64(2)
	testcluster.OnRealNode(spec)
	spec.TerminationGracePeriodSeconds = &grace
	spec.AutomountServiceAccountToken = new(bool)
}

func configVolume() corev1.Volume {
	return corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}
}

// nginxConfig answers body on port 8080; every path nginx writes is under /run/nginx, an
// emptyDir, so the root filesystem stays read-only.
func nginxConfig(body string) string {
	return fmt.Sprintf(`pid /run/nginx/nginx.pid;
error_log stderr warn;
worker_processes 1;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path /run/nginx/body;
  proxy_temp_path /run/nginx/proxy;
  fastcgi_temp_path /run/nginx/fastcgi;
  scgi_temp_path /run/nginx/scgi;
  uwsgi_temp_path /run/nginx/uwsgi;
  server {
    listen 8080;
    location / { return 200 "%s\n"; }
  }
}
`, body)
}

func restarts(p corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}
