package testpod

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// Pod is a pod as its chart or operator renders it, with what kubelet gives its containers: the
// folders behind its volumes, the values behind secretKeyRefs, a service-account token, and a
// network namespace of its own.
type Pod struct {
	Name, Namespace string
	Spec            corev1.PodSpec
	Netns           *Netns
	volumes         map[string]string
	secrets         map[string]map[string]string
	serviceAccount  string // folder holding token, ca.crt, namespace; "" for none
	apiAddr         string // the API server, in the pod's network
	hosts           string // kubelet's /etc/hosts of the pod
}

// APIPort is where a pod reaches the API server on its own loopback (kubelet's
// KUBERNETES_SERVICE_HOST and _PORT).
const APIPort = 6443

// New makes a pod with its own network namespace.
func New(t testing.TB, name, namespace string, spec corev1.PodSpec) *Pod {
	t.Helper()
	p := &Pod{Name: name, Namespace: namespace, Spec: spec, Netns: NewNetns(t), volumes: map[string]string{}, secrets: map[string]map[string]string{}}
	p.hosts = filepath.Join(t.TempDir(), "hosts")
	hosts := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n127.0.0.1\t" + name + "\n"
	if err := os.WriteFile(p.hosts, []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Volume puts the folder at path behind the pod's volume name. Kubelet makes a volume's
// folder readable by the pod's user; so does this, as ConfigMap and Secret volumes are.
func (p *Pod) Volume(name, path string) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		_ = os.Chmod(path, 0o777) // as kubelet makes a volume's folder
	}
	p.volumes[name] = path
}

// Secret gives the values of a Secret the pod's env refers to.
func (p *Pod) Secret(name string, data map[string]string) { p.secrets[name] = data }

// ServiceAccount gives the pod its ServiceAccount's token, as kubelet projects it (token, ca.crt,
// namespace under /var/run/secrets/kubernetes.io/serviceaccount), and the API server on its
// loopback. The ServiceAccount must exist; its rights are whatever the test's RBAC grants.
func (p *Pod) ServiceAccount(t testing.TB, c *testcluster.Cluster, client kubernetes.Interface) {
	t.Helper()
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	expiry := int64(3600)
	tr, err := client.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token for ServiceAccount %s/%s: %v", p.Namespace, sa, err)
	}
	dir := t.TempDir()
	for name, content := range map[string]string{"token": tr.Status.Token, "ca.crt": string(c.Config().TLSClientConfig.CAData), "namespace": p.Namespace} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p.serviceAccount = dir
	p.apiAddr = fmt.Sprintf("127.0.0.1:%d", APIPort)
	p.Netns.Bridge(t, p.apiAddr, c.APIAddr())
}

var containerCount atomic.Int64

// Run starts the pod's container named container from img with runc, as kubelet would, and
// returns it running; it is stopped (SIGTERM, then SIGKILL) and removed when the test ends.
func (p *Pod) Run(t testing.TB, img *Image, container string) *testcluster.Process {
	t.Helper()
	c, ok := p.container(container)
	if !ok {
		t.Fatalf("the pod spec has no container %q", container)
	}
	dir, err := work()
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("cw-%d-%d", os.Getpid(), containerCount.Add(1))
	bundle := filepath.Join(dir, "bundles", id)
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		t.Fatal(err)
	}
	spec, err := p.runtimeSpec(img, c)
	if err != nil {
		t.Fatalf("container %s: %v", container, err)
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "runc")
	t.Cleanup(func() { // after the container stopped (cleanups run last first)
		if out, err := exec.Command("runc", "--root", state, "delete", "--force", id).CombinedOutput(); err != nil && !strings.Contains(string(out), "does not exist") {
			t.Errorf("runc delete %s: %v: %s", id, err, out)
		}
	})
	return testcluster.StartProcess(t, "runc", nil, "--root", state, "run", "--bundle", bundle, id)
}

func (p *Pod) container(name string) (corev1.Container, bool) {
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name == name {
			return c, true
		}
	}
	return corev1.Container{}, false
}

// runtimeSpec is the OCI runtime config kubelet's runtime would give container c: umoci's
// config for the image, with the pod spec's process, user, root, capabilities, mounts, network
// and memory limit.
func (p *Pod) runtimeSpec(img *Image, c corev1.Container) (map[string]any, error) {
	var spec map[string]any
	b, _ := json.Marshal(img.spec)
	_ = json.Unmarshal(b, &spec)
	spec["root"] = map[string]any{"path": img.Rootfs, "readonly": readOnlyRoot(c)}
	spec["hostname"] = p.Name
	env, err := p.env(img, c)
	if err != nil {
		return nil, err
	}
	args := commandLine(img, c, env)
	if len(args) == 0 {
		return nil, fmt.Errorf("no command: the image has no entrypoint and the container no command")
	}
	process := spec["process"].(map[string]any)
	process["terminal"] = false
	process["args"] = args
	process["env"] = env
	if c.WorkingDir != "" {
		process["cwd"] = c.WorkingDir
	}
	user, err := p.user(img, c)
	if err != nil {
		return nil, err
	}
	process["user"] = user
	if sc := c.SecurityContext; sc != nil && sc.Capabilities != nil {
		caps := process["capabilities"].(map[string]any)
		for _, d := range sc.Capabilities.Drop {
			if d == "ALL" {
				for _, set := range []string{"bounding", "effective", "inheritable", "permitted", "ambient"} {
					caps[set] = []string{}
				}
			}
		}
		for _, a := range sc.Capabilities.Add {
			for _, set := range []string{"bounding", "effective", "permitted"} {
				caps[set] = append(toStrings(caps[set]), "CAP_"+string(a))
			}
		}
	}
	if sc := c.SecurityContext; sc != nil && sc.AllowPrivilegeEscalation != nil {
		process["noNewPrivileges"] = !*sc.AllowPrivilegeEscalation
	}
	mounts, err := p.mounts(c)
	if err != nil {
		return nil, err
	}
	spec["mounts"] = append(spec["mounts"].([]any), mounts...)
	linux := spec["linux"].(map[string]any)
	var namespaces []any
	for _, ns := range linux["namespaces"].([]any) {
		if ns.(map[string]any)["type"] != "network" {
			namespaces = append(namespaces, ns)
		}
	}
	linux["namespaces"] = append(namespaces, map[string]any{"type": "network", "path": p.Netns.Path()})
	if mem, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		resources, _ := linux["resources"].(map[string]any)
		if resources == nil {
			resources = map[string]any{}
		}
		resources["memory"] = map[string]any{"limit": mem.Value()}
		linux["resources"] = resources
	}
	return spec, nil
}

func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

func readOnlyRoot(c corev1.Container) bool {
	return c.SecurityContext != nil && c.SecurityContext.ReadOnlyRootFilesystem != nil && *c.SecurityContext.ReadOnlyRootFilesystem
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// commandLine is kubelet's rule: command replaces the entrypoint and drops the image's cmd;
// args alone replace the cmd; $(VAR) names an env var of the container.
func commandLine(img *Image, c corev1.Container, env []string) []string {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	expand := func(s string) string {
		return varRef.ReplaceAllStringFunc(s, func(m string) string {
			if v, ok := vars[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
	}
	var args []string
	switch {
	case len(c.Command) > 0:
		args = append(append(args, c.Command...), c.Args...)
	case len(c.Args) > 0:
		args = append(append(args, img.Config.Entrypoint...), c.Args...)
	default:
		args = append(append(args, img.Config.Entrypoint...), img.Config.Cmd...)
	}
	for i := range args {
		args[i] = expand(args[i])
	}
	return args
}

// env is the image's environment, kubelet's service variables for the API server, then the
// container's own, each resolved as kubelet resolves it.
func (p *Pod) env(img *Image, c corev1.Container) ([]string, error) {
	env := append([]string{}, img.Config.Env...)
	if p.apiAddr != "" {
		env = append(env, "KUBERNETES_SERVICE_HOST=127.0.0.1", fmt.Sprintf("KUBERNETES_SERVICE_PORT=%d", APIPort))
	}
	vars := map[string]string{}
	for _, e := range c.Env {
		v, err := p.envValue(c, e)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		v = varRef.ReplaceAllStringFunc(v, func(m string) string {
			if x, ok := vars[m[2:len(m)-1]]; ok {
				return x
			}
			return m
		})
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	return env, nil
}

func (p *Pod) envValue(c corev1.Container, e corev1.EnvVar) (string, error) {
	from := e.ValueFrom
	switch {
	case from == nil:
		return e.Value, nil
	case from.FieldRef != nil:
		switch from.FieldRef.FieldPath {
		case "metadata.name":
			return p.Name, nil
		case "metadata.namespace":
			return p.Namespace, nil
		case "spec.serviceAccountName":
			return p.Spec.ServiceAccountName, nil
		case "status.podIP", "status.hostIP":
			return "127.0.0.1", nil
		case "spec.nodeName":
			return "node", nil
		}
		return "", fmt.Errorf("fieldRef %s is not given by this harness", from.FieldRef.FieldPath)
	case from.ResourceFieldRef != nil:
		r := from.ResourceFieldRef
		q, ok := c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(r.Resource, "limits."))]
		if strings.HasPrefix(r.Resource, "requests.") {
			q, ok = c.Resources.Requests[corev1.ResourceName(strings.TrimPrefix(r.Resource, "requests."))]
		}
		if !ok { // kubelet gives the node's allocatable; a small machine's here
			switch {
			case strings.HasSuffix(r.Resource, "cpu"):
				q = resource.MustParse("2")
			default:
				q = resource.MustParse("4Gi")
			}
		}
		divisor := r.Divisor
		if divisor.IsZero() {
			divisor = resource.MustParse("1")
		}
		if strings.HasSuffix(r.Resource, "cpu") { // rounded up to whole divisors, as kubelet does
			return strconv.FormatInt((q.MilliValue()+divisor.MilliValue()-1)/divisor.MilliValue(), 10), nil
		}
		return strconv.FormatInt(q.Value()/divisor.Value(), 10), nil
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		v, ok := p.secrets[ref.Name][ref.Key]
		if !ok && (ref.Optional == nil || !*ref.Optional) {
			return "", fmt.Errorf("secret %s has no key %s here: give it with Pod.Secret", ref.Name, ref.Key)
		}
		return v, nil
	}
	return "", fmt.Errorf("a valueFrom this harness does not resolve")
}

// user is the container's runAsUser/runAsGroup, else the pod's, else the image's; fsGroup and
// supplementalGroups as additional groups.
func (p *Pod) user(img *Image, c corev1.Container) (map[string]any, error) {
	uid, gid := int64(-1), int64(-1)
	if u := img.Config.User; u != "" {
		us, gs, _ := strings.Cut(u, ":")
		var err error
		if uid, err = strconv.ParseInt(us, 10, 64); err != nil {
			return nil, fmt.Errorf("the image's user %q is not numeric", u)
		}
		gid = uid
		if gs != "" {
			if gid, err = strconv.ParseInt(gs, 10, 64); err != nil {
				return nil, fmt.Errorf("the image's group %q is not numeric", u)
			}
		}
	}
	var groups []int64
	if ps := p.Spec.SecurityContext; ps != nil {
		if ps.RunAsUser != nil {
			uid = *ps.RunAsUser
		}
		if ps.RunAsGroup != nil {
			gid = *ps.RunAsGroup
		}
		if ps.FSGroup != nil {
			groups = append(groups, *ps.FSGroup)
		}
		groups = append(groups, ps.SupplementalGroups...)
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
	}
	if uid < 0 {
		uid, gid = 0, 0
	}
	if runAsNonRoot(p.Spec, c) && uid == 0 {
		return nil, fmt.Errorf("runAsNonRoot is set and the container would run as root: kubelet refuses to start it")
	}
	u := map[string]any{"uid": uid, "gid": gid}
	if len(groups) > 0 {
		u["additionalGids"] = groups
	}
	return u, nil
}

func runAsNonRoot(spec corev1.PodSpec, c corev1.Container) bool {
	if c.SecurityContext != nil && c.SecurityContext.RunAsNonRoot != nil {
		return *c.SecurityContext.RunAsNonRoot
	}
	return spec.SecurityContext != nil && spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot
}

// mounts binds each volume mount's folder (or its subPath) where the container mounts it, and
// the service-account token where kubelet projects it.
func (p *Pod) mounts(c corev1.Container) ([]any, error) {
	var out []any
	kinds := map[string]corev1.VolumeSource{}
	for _, v := range p.Spec.Volumes {
		kinds[v.Name] = v.VolumeSource
	}
	for _, m := range c.VolumeMounts {
		src, ok := p.volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("volume %s is mounted at %s and the test gave no folder for it (Pod.Volume)", m.Name, m.MountPath)
		}
		if m.SubPath != "" {
			src = filepath.Join(src, m.SubPath)
		}
		v := kinds[m.Name]
		// kubelet mounts ConfigMap, Secret and projected volumes read-only, whatever the mount says
		ro := m.ReadOnly || v.ConfigMap != nil || v.Secret != nil || v.Projected != nil
		opts := []string{"rbind", "rprivate"}
		if ro {
			opts = append(opts, "ro")
		}
		out = append(out, map[string]any{"destination": m.MountPath, "type": "bind", "source": src, "options": opts})
	}
	out = append(out, map[string]any{"destination": "/etc/hosts", "type": "bind", "source": p.hosts, "options": []string{"rbind", "rprivate", "ro"}})
	if p.serviceAccount != "" && (p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken) {
		out = append(out, map[string]any{"destination": "/var/run/secrets/kubernetes.io/serviceaccount", "type": "bind",
			"source": p.serviceAccount, "options": []string{"rbind", "rprivate", "ro"}})
	}
	return out, nil
}
