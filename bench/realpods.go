package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// RealPods is the delay users feel: ConfigMap patch → the app in a real pod (Debian's
// Prometheus, on the real node) serves the new config. Three pods, each on its own ConfigMap,
// patched in turn: our reloader as the sidecar on the volume kubelet mounts, configmap-reload
// in the same place with the same arguments, and our reloader in API mode (a native sidecar
// unpacking into an emptyDir). Floor for the mounted ones: kubelet's own update of the file,
// seen in the pod's volume.
type RealPods struct {
	LeftOut string `json:"left_out,omitempty"` // why the step was not measured
	Changes int    `json:"changes"`
	Peer    string `json:"configmap_reload_version,omitempty"`
	// At kubelet's sync period of 1 s.
	Kubelet                Stats `json:"kubelet_file_update"`
	Reloader               Stats `json:"reloader_served"`
	ReloaderShare          Stats `json:"reloader_served_after_file"`
	ConfigmapReloadKubelet Stats `json:"configmap_reload_kubelet_file_update"`
	ConfigmapReload        Stats `json:"configmap_reload_served"`
	ConfigmapReloadShare   Stats `json:"configmap_reload_served_after_file"`
	API                    Stats `json:"api_mode_served"`
	// At kubelet's default sync period (1 minute), full mode only.
	DefaultChanges  int   `json:"default_sync_changes,omitempty"`
	DefaultKubelet  Stats `json:"default_sync_kubelet_file_update"`
	DefaultReloader Stats `json:"default_sync_reloader_served"`
	DefaultAPI      Stats `json:"default_sync_api_mode_served"`
}

const (
	benchReloaderImage = "localhost/bench-reloader:node"
	benchPeerImage     = "localhost/bench-configmap-reload:node"
	benchPromImage     = "localhost/bench-prometheus:node"
)

// podUnderTest is one of the step's pods: where its Prometheus answers and, for a mounted
// ConfigMap, where kubelet writes the file.
type podUnderTest struct {
	name, configMap string
	mountsConfig    bool   // the ConfigMap is a volume kubelet mounts, not the API mode's
	prom            string // Prometheus's base URL
	mounted         string // the file in the pod's volume on the host; "" in API mode
}

func reloaderRealPods(e *env, r *report) error {
	rp := &RealPods{}
	r.RealPods = rp
	if err := testcluster.CanRunNode(); err != nil {
		rp.LeftOut = err.Error()
		fmt.Fprintln(e.log, "   left out:", err)
		return nil
	}
	prometheus, err := testcluster.LookProgram("prometheus", "prometheus")
	if err != nil {
		rp.LeftOut = err.Error()
		fmt.Fprintln(e.log, "   left out:", err)
		return nil
	}
	base := filepath.Join(e.cluster.Dir(), "bench-real-pods")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	peerBin, version, err := buildConfigmapReload(base)
	if err != nil {
		fmt.Fprintln(e.log, "   configmap-reload left out:", err)
	}
	rp.Peer = version
	node, err := e.cluster.Node(e.ctx)
	if err != nil {
		return err
	}
	if err := importBenchImages(e, node, prometheus, peerBin); err != nil {
		return err
	}
	ns, err := e.namespace("real-pods")
	if err != nil {
		return err
	}
	pods, err := startRealPods(e, node, ns, prometheus, peerBin != "", true)
	if err != nil {
		return err
	}
	rp.Changes = e.reps(5, 15)
	var kubelet, served, share [3][]time.Duration
	for i := 1; i <= rp.Changes; i++ {
		for k := range pods { // each pod first in turn
			j := (i + k) % len(pods)
			file, app, err := measureChange(e, ns, pods[j], fmt.Sprintf("c%03d", i), time.Minute)
			if err != nil {
				return err
			}
			served[j] = append(served[j], app)
			if pods[j].mounted != "" {
				kubelet[j], share[j] = append(kubelet[j], file), append(share[j], app-file)
			}
		}
	}
	rp.Kubelet = stats(kubelet[0])
	rp.Reloader, rp.ReloaderShare = stats(served[0]), stats(share[0])
	rp.API = stats(served[len(pods)-1])
	if len(pods) == 3 {
		rp.ConfigmapReloadKubelet, rp.ConfigmapReload, rp.ConfigmapReloadShare = stats(kubelet[1]), stats(served[1]), stats(share[1])
	}
	if !e.full {
		return nil
	}
	return defaultSyncPeriod(e, rp, prometheus)
}

// defaultSyncPeriod measures our two modes again with kubelet as users' nodes run it: the
// mounted ConfigMap changes on kubelet's own 1-minute sync, the API mode does not wait for it.
func defaultSyncPeriod(e *env, rp *RealPods, prometheus string) error {
	fmt.Fprintln(e.log, "   kubelet at its default sync period (1 minute): a few changes, each up to a minute and more")
	node, err := e.cluster.RestartNode(e.ctx, testcluster.NodeOptions{DefaultSyncPeriod: true})
	if err != nil {
		return err
	}
	if err := importBenchImages(e, node, prometheus, ""); err != nil {
		return err
	}
	ns, err := e.namespace("real-pods-default-sync")
	if err != nil {
		return err
	}
	pods, err := startRealPods(e, node, ns, prometheus, false, true)
	if err != nil {
		return err
	}
	rp.DefaultChanges = 5
	var kubelet, mounted, api []time.Duration
	for i := 1; i <= rp.DefaultChanges; i++ {
		change := fmt.Sprintf("c%03d", i)
		_, app, err := measureChange(e, ns, pods[1], change, time.Minute)
		if err != nil {
			return err
		}
		api = append(api, app)
		file, app, err := measureChange(e, ns, pods[0], change, 3*time.Minute)
		if err != nil {
			return err
		}
		kubelet, mounted = append(kubelet, file), append(mounted, app)
	}
	rp.DefaultKubelet, rp.DefaultReloader, rp.DefaultAPI = stats(kubelet), stats(mounted), stats(api)
	return nil
}

// importBenchImages packs the measured binaries and Debian's Prometheus as images for the node.
// The reloader's is the binary under test alone, as static as `make image` has it, so that a
// before/after (-reloader-bin) measures the binary and nothing else.
func importBenchImages(e *env, node *testcluster.Node, prometheus, peerBin string) error {
	files, err := testcluster.HostProgramFiles(e.ctx, prometheus)
	if err != nil {
		return err
	}
	type image struct {
		ref   string
		files map[string]testcluster.FileEntry
		entry []string
		user  string
	}
	images := []image{{benchPromImage, files, []string{prometheus}, "65534:65534"}}
	for ref, bin := range map[string]string{benchReloaderImage: e.reloader, benchPeerImage: peerBin} {
		if bin == "" {
			continue
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		images = append(images, image{ref, map[string]testcluster.FileEntry{"/sidecar": {Content: b, Mode: 0o755}}, []string{"/sidecar"}, "65532:65532"})
	}
	for _, im := range images {
		img, err := testcluster.FilesImage(im.files, im.entry, im.user)
		if err != nil {
			return err
		}
		if err := node.ImportImage(e.ctx, img, im.ref); err != nil {
			return err
		}
	}
	return nil
}

// startRealPods starts our sidecar on a mounted ConfigMap, configmap-reload (with peer) the
// same way, and our API mode (with api), each on a ConfigMap of its own, and waits until each
// Prometheus serves the first config.
func startRealPods(e *env, node *testcluster.Node, ns, prometheus string, peer, api bool) ([]podUnderTest, error) {
	var pods []podUnderTest
	mountedPod := func(name, image string) (podUnderTest, error) {
		p := podUnderTest{name: name, configMap: name, mountsConfig: true}
		return p, e.createRealPod(ns, name, mountedSpec(node, image, name))
	}
	p, err := mountedPod("reloader", benchReloaderImage)
	if err != nil {
		return nil, err
	}
	pods = append(pods, p)
	if peer {
		if p, err = mountedPod("configmap-reload", benchPeerImage); err != nil {
			return nil, err
		}
		pods = append(pods, p)
	}
	if api {
		spec, err := apiModeSpec(e, ns, node, "api-mode")
		if err != nil {
			return nil, err
		}
		if err := e.createRealPod(ns, "api-mode", spec); err != nil {
			return nil, err
		}
		pods = append(pods, podUnderTest{name: "api-mode", configMap: "api-mode"})
	}
	for i := range pods {
		if err := e.waitRealPod(node, ns, &pods[i]); err != nil {
			return nil, err
		}
	}
	return pods, nil
}

// createRealPod creates the pod and its ConfigMap, of the same name.
func (e *env) createRealPod(ns, name string, spec corev1.PodSpec) error {
	if err := e.createConfigMap(ns, name, map[string]string{"prometheus.yml": promConfig("c000")}); err != nil {
		return err
	}
	_, err := e.client.CoreV1().Pods(ns).Create(e.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	return err
}

func (e *env) waitRealPod(node *testcluster.Node, ns string, p *podUnderTest) error {
	err := waitFor(e.ctx, 2*time.Minute, func() bool {
		pod, err := e.client.CoreV1().Pods(ns).Get(e.ctx, p.name, metav1.GetOptions{})
		if err != nil || pod.Status.PodIP == "" {
			return false
		}
		p.prom = "http://" + pod.Status.PodIP + ":9090"
		if p.mountsConfig {
			p.mounted = filepath.Join(node.PodVolumeDir(pod.UID, "config"), "prometheus.yml")
		}
		return strings.Contains(servedConfig(p.prom), "change: c000")
	})
	if err != nil {
		return fmt.Errorf("pod %s/%s: Prometheus never served its first config: %w\n%s", ns, p.name, err, testcluster.DescribePods(e.ctx, e.client, ns))
	}
	return nil
}

// measureChange patches the pod's ConfigMap and returns when kubelet's file had the change
// (for a mounted ConfigMap) and when Prometheus served it, both from the patch.
func measureChange(e *env, ns string, p podUnderTest, change string, timeout time.Duration) (file, served time.Duration, err error) {
	body, _ := json.Marshal(map[string]any{"data": map[string]string{"prometheus.yml": promConfig(change)}})
	fileSeen := make(chan time.Time, 1)
	stop := make(chan struct{})
	defer close(stop)
	if p.mounted != "" {
		go func() {
			for {
				if b, _ := os.ReadFile(p.mounted); strings.Contains(string(b), change) {
					fileSeen <- time.Now()
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}()
	}
	start := time.Now()
	if _, err := e.client.CoreV1().ConfigMaps(ns).Patch(e.ctx, p.configMap, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return 0, 0, err
	}
	want := "change: " + change
	if err := waitFor(e.ctx, timeout, func() bool { time.Sleep(2 * time.Millisecond); return strings.Contains(servedConfig(p.prom), want) }); err != nil {
		return 0, 0, fmt.Errorf("pod %s/%s: Prometheus did not serve %q within %s of the patch", ns, p.name, want, timeout)
	}
	served = time.Since(start)
	if p.mounted != "" {
		select {
		case at := <-fileSeen:
			file = at.Sub(start)
		case <-time.After(time.Second):
			return 0, 0, fmt.Errorf("pod %s/%s: Prometheus served %q, but the mounted file never showed it", ns, p.name, want)
		}
	}
	time.Sleep(100 * time.Millisecond) // each change an isolated one
	return file, served, nil
}

func promConfig(change string) string {
	return "global:\n  scrape_interval: 1m\n  external_labels:\n    change: " + change + "\n"
}

// servedConfig is the config Prometheus runs, from its own API.
func servedConfig(base string) string {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(base + "/api/v1/status/config")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var body struct{ Data struct{ YAML string } }
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &body)
	return body.Data.YAML
}

// onNode puts a pod on the real node, with a short grace period.
func onNode(node *testcluster.Node) corev1.PodSpec {
	grace := int64(2)
	spec := corev1.PodSpec{NodeName: node.Name, TerminationGracePeriodSeconds: &grace}
	testcluster.OnRealNode(&spec)
	return spec
}

// mountedSpec is Prometheus with a sidecar on the ConfigMap volume kubelet mounts, in
// configmap-reload's arguments (which our reloader takes as they are).
func mountedSpec(node *testcluster.Node, sidecar, name string) corev1.PodSpec {
	spec := onNode(node)
	spec.AutomountServiceAccountToken = new(bool)
	spec.Volumes = []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}},
		{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	config := []corev1.VolumeMount{{Name: "config", MountPath: "/etc/config", ReadOnly: true}}
	spec.Containers = []corev1.Container{
		{Name: "prometheus", Image: benchPromImage, ImagePullPolicy: corev1.PullNever,
			Args:         []string{"--config.file=/etc/config/prometheus.yml", "--storage.tsdb.path=/data", "--web.enable-lifecycle", "--web.listen-address=:9090"},
			VolumeMounts: append(config, corev1.VolumeMount{Name: "data", MountPath: "/data"})},
		{Name: "sidecar", Image: sidecar, ImagePullPolicy: corev1.PullNever,
			Args: []string{"--volume-dir=/etc/config", "--webhook-url=http://127.0.0.1:9090/-/reload"}, VolumeMounts: config},
	}
	return spec
}

// apiModeSpec is Prometheus with our reloader in API mode as a native sidecar, unpacking into
// an emptyDir before Prometheus starts, reaching the API server through the kubernetes Service
// with the token kubelet mounts. Its ServiceAccount may read its ConfigMap only, as
// config/reloader-rbac gives it.
func apiModeSpec(e *env, ns string, node *testcluster.Node, name string) (corev1.PodSpec, error) {
	account, err := e.reloaderRBAC(ns, name)
	if err != nil {
		return corev1.PodSpec{}, err
	}
	always := corev1.ContainerRestartPolicyAlways
	spec := onNode(node)
	spec.ServiceAccountName = account
	spec.Volumes = []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	config := []corev1.VolumeMount{{Name: "config", MountPath: "/etc/config"}}
	spec.InitContainers = []corev1.Container{{
		Name: "reloader", Image: benchReloaderImage, ImagePullPolicy: corev1.PullNever, RestartPolicy: &always,
		Args: []string{"--configmap=" + name, "--configroot=/etc/config", "--reload-http=http://127.0.0.1:9090/-/reload", "--listen-address=:9533"},
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		},
		StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(9533)}},
			PeriodSeconds: 1, FailureThreshold: 60},
		VolumeMounts: config,
	}}
	spec.Containers = []corev1.Container{{Name: "prometheus", Image: benchPromImage, ImagePullPolicy: corev1.PullNever,
		Args:         []string{"--config.file=/etc/config/prometheus.yml", "--storage.tsdb.path=/data", "--web.enable-lifecycle", "--web.listen-address=:9090"},
		VolumeMounts: append(config, corev1.VolumeMount{Name: "data", MountPath: "/data"})}}
	return spec, nil
}

// reloaderRBAC applies config/reloader-rbac as a user would, with the one ConfigMap's name in
// its Role's resourceNames (where the kustomization asks for the names), and returns the
// ServiceAccount's name.
func (e *env) reloaderRBAC(ns, configMap string) (string, error) {
	root, err := testcluster.RepoRoot(e.ctx)
	if err != nil {
		return "", err
	}
	var account string
	for _, f := range []string{"serviceaccount.yaml", "role.yaml", "rolebinding.yaml"} {
		b, err := os.ReadFile(filepath.Join(root, "config", "reloader-rbac", f))
		if err != nil {
			return "", err
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
		if err != nil {
			return "", fmt.Errorf("config/reloader-rbac/%s: %w", f, err)
		}
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			account = o.Name
			_, err = e.client.CoreV1().ServiceAccounts(ns).Create(e.ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			for i := range o.Rules {
				if slices.Contains(o.Rules[i].Resources, "configmaps") {
					o.Rules[i].ResourceNames = []string{configMap}
				}
			}
			_, err = e.client.RbacV1().Roles(ns).Create(e.ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			for i := range o.Subjects {
				o.Subjects[i].Namespace = ns // what kustomize's namespace does
			}
			_, err = e.client.RbacV1().RoleBindings(ns).Create(e.ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			return "", fmt.Errorf("config/reloader-rbac/%s: %w", f, err)
		}
	}
	return account, nil
}

func (p *RealPods) markdown() string {
	var b strings.Builder
	b.WriteString("\n### Real pods: ConfigMap patch → the app serves the new config\n\n")
	if p.LeftOut != "" {
		fmt.Fprintf(&b, "Not measured in this run: %s.\n", p.LeftOut)
		return b.String()
	}
	fmt.Fprintf(&b, "On the real node (kubelet, containerd, runc), Debian's Prometheus in a pod, %d changes per pod: from sending the ConfigMap PATCH to Prometheus serving the new config (`/api/v1/status/config`, polled every 2 ms). Each pod has its own ConfigMap, patched in turn, so no two changes overlap. Mounted: the sidecar runs with configmap-reload's arguments (`--volume-dir=/etc/config --webhook-url=http://127.0.0.1:9090/-/reload`) on the ConfigMap volume kubelet mounts; its floor is kubelet's own update of the file, read in the pod's volume on the host every 1 ms. API mode: our reloader as a native sidecar (`--configmap`, through the kubernetes Service with the token kubelet mounts, only config/reloader-rbac's Role), unpacking into an emptyDir, kubelet not involved. The sidecars' images hold the binary under test alone.\n\n", p.Changes)
	b.WriteString(row("kubelet sync period 1 s", "median ms", "p90 ms", "max ms", "after kubelet's file: median ms", "p90 ms"))
	b.WriteString(row("---", "---", "---", "---", "---", "---"))
	b.WriteString(row("floor: kubelet's update of the mounted file, the reloader's pod", f1(p.Kubelet.Median), f1(p.Kubelet.P90), f1(p.Kubelet.Max), "-", "-"))
	b.WriteString(row("reloader on the mounted folder: served", f1(p.Reloader.Median), f1(p.Reloader.P90), f1(p.Reloader.Max), f1(p.ReloaderShare.Median), f1(p.ReloaderShare.P90)))
	if p.Peer != "" {
		b.WriteString(row("floor: kubelet's update of the mounted file, configmap-reload's pod", f1(p.ConfigmapReloadKubelet.Median), f1(p.ConfigmapReloadKubelet.P90), f1(p.ConfigmapReloadKubelet.Max), "-", "-"))
		b.WriteString(row("configmap-reload "+p.Peer+" on the mounted folder: served", f1(p.ConfigmapReload.Median), f1(p.ConfigmapReload.P90), f1(p.ConfigmapReload.Max), f1(p.ConfigmapReloadShare.Median), f1(p.ConfigmapReloadShare.P90)))
	}
	b.WriteString(row("reloader in API mode: served", f1(p.API.Median), f1(p.API.P90), f1(p.API.Max), "-", "-"))
	if p.DefaultChanges == 0 {
		b.WriteString("\nkubelet at its default sync period (1 minute): measured in full mode only.\n")
		return b.String()
	}
	fmt.Fprintf(&b, "\nkubelet at its default sync period (1 minute), as users' nodes run it, %d changes:\n\n", p.DefaultChanges)
	b.WriteString(row("kubelet default sync period", "median s", "p90 s", "max s"))
	b.WriteString(row("---", "---", "---", "---"))
	s := func(x Stats) []any {
		return []any{fmt.Sprintf("%.2f", x.Median/1000), fmt.Sprintf("%.2f", x.P90/1000), fmt.Sprintf("%.2f", x.Max/1000)}
	}
	b.WriteString(row(append([]any{"kubelet's update of the mounted file"}, s(p.DefaultKubelet)...)...))
	b.WriteString(row(append([]any{"reloader on the mounted folder: served"}, s(p.DefaultReloader)...)...))
	b.WriteString(row(append([]any{"reloader in API mode: served"}, s(p.DefaultAPI)...)...))
	return b.String()
}
