// Package testcluster runs a real Kubernetes control plane — etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and a kwok-simulated node — on 127.0.0.1, for the
// integration tests, the benchmarks and `make demo`; and, on demand, a real node (Node).
//
//	c, err := testcluster.Start(ctx, testcluster.Options{Out: os.Stderr})
//	defer c.Stop()
//	client := kubernetes.NewForConfigOrDie(c.Config())
//
// Tests use ForTest or Main, which also stop it and print where the logs are when a test fails.
package testcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// NodeName is the kwok node every pod is scheduled to.
const NodeName = "kwok-node-0"

// The controllers our behaviour depends on. node-lifecycle-controller removes the not-ready
// taint from the kwok node; without it nothing is ever scheduled.
var controllers = []string{
	"deployment-controller", "replicaset-controller", "statefulset-controller",
	"daemonset-controller", "garbage-collector-controller", "namespace-controller",
	"serviceaccount-controller", "serviceaccount-token-controller", "node-lifecycle-controller",
	// For the real node's pods: kube-root-ca.crt in every namespace, mounted with their token,
	// and their PersistentVolumeClaims bound.
	"root-ca-certificate-publisher-controller", "persistentvolume-binder-controller",
	// A Service's endpoints, where the API server calls a webhook behind it
	// (--enable-aggregator-routing): our chart's revisions webhook.
	"endpoints-controller", "endpointslice-controller",
}

// Options tunes a cluster. The zero value is what most tests want.
type Options struct {
	// Out receives build progress and start-up lines; nil discards them.
	Out io.Writer
	// Dir holds data, keys and logs; a new temporary folder when empty. Stop leaves it in
	// place so logs can be read; Remove deletes it.
	Dir string
	// EtcdArgs are appended to etcd's command line (for example a compaction interval).
	EtcdArgs []string
}

// Cluster is a running control plane. Its methods are safe for concurrent use.
type Cluster struct {
	dir, logDir string
	bins        Binaries
	pki         *pki
	token       string
	etcdURL     string
	etcdPeerURL string
	apiPort     int
	kubeconfig  string
	etcdArgs    []string
	out         io.Writer

	mu    sync.Mutex
	procs map[string]*process

	nodeMu sync.Mutex
	node   *Node // the real node, once a test asked for it

	useMu     sync.Mutex
	nodeUsers int         // tests of this binary using the node now (NeedNode)
	idle      *time.Timer // the next look for a binary waiting for the node (nodeshare.go)
	idleGen   int         // counts holds, so that a look armed before the latest one gives up
}

// Start builds the binaries if needed, starts every component, and returns once the API server
// is ready, the controllers run and the kwok node is Ready.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	bins, err := EnsureBinaries(ctx, out)
	if err != nil {
		return nil, err
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "configwave-cluster-"); err != nil {
			return nil, fmt.Errorf("create cluster folder: %w", err)
		}
	}
	c := &Cluster{
		dir: dir, logDir: filepath.Join(dir, "logs"), bins: bins, out: out,
		kubeconfig: filepath.Join(dir, "kubeconfig"), etcdArgs: opts.EtcdArgs,
		token: "configwave-admin-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		procs: map[string]*process{},
	}
	defer func() {
		if err != nil {
			c.stopAll()
			err = fmt.Errorf("%w (component logs in %s)", err, c.logDir)
		}
	}()
	if err := os.MkdirAll(c.logDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log folder: %w", err)
	}
	if c.pki, err = newPKI(dir); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	c.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	c.etcdPeerURL = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	c.apiPort = ports[2]
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(c.token+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write token file: %w", err)
	}
	if err := c.writeKubeconfig(); err != nil {
		return nil, err
	}

	start := time.Now()
	if err := c.StartEtcd(ctx); err != nil {
		return nil, err
	}
	if err := c.StartAPIServer(ctx); err != nil {
		return nil, err
	}
	stages, err := writeStages(dir)
	if err != nil {
		return nil, err
	}
	for name, args := range c.controllerArgs(bins, stages) {
		if err := c.startComponent(name, args...); err != nil {
			return nil, err
		}
	}
	client, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	if err := createNode(ctx, client); err != nil {
		return nil, err
	}
	if err := c.waitSchedulable(ctx, client); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "Control plane ready at https://127.0.0.1:%d in %s (kubeconfig %s, logs %s)\n",
		c.apiPort, time.Since(start).Round(time.Millisecond), c.kubeconfig, c.logDir)
	return c, nil
}

// controllerArgs are the command lines of kube-controller-manager, kube-scheduler and kwok.
func (c *Cluster) controllerArgs(bins Binaries, stages string) map[string][]string {
	return map[string][]string{
		"kube-controller-manager": {
			"--kubeconfig", c.kubeconfig, "--controllers", strings.Join(controllers, ","),
			"--leader-elect=false", "--secure-port=0",
			"--service-account-private-key-file", c.pki.SAKey, "--root-ca-file", c.pki.CAFile,
			// An API server restart in a fault test must not make the node look dead.
			"--node-monitor-grace-period=5m",
			// KEP-5647's read-your-writes checks (beta, on by default since 1.36) fail a
			// ReplicaSet's sync until its informer has seen a newer resourceVersion than the
			// controller wrote; on a quiet test cluster that can wait for the next watch
			// bookmark, and a finished rollout's status then lags 30 s and more (seen in CI:
			// 434 such errors in one run, a Deployment whose pods were all replaced reported
			// incomplete for 30 s). wave reads only the workloads' status, which these checks
			// delay but never change.
			"--feature-gates=StaleControllerConsistencyReplicaSet=false,StaleControllerConsistencyDaemonSet=false,StaleControllerConsistencyStatefulSet=false,StaleControllerConsistencyJob=false",
		},
		"kube-scheduler": {"--kubeconfig", c.kubeconfig, "--leader-elect=false", "--secure-port=0"},
		"kwok": {
			"--kubeconfig", c.kubeconfig, "--config", bins.KwokStages, "--config", stages,
			// Only its own nodes (createNode annotates them): the real node is kubelet's.
			"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			"--node-port=0", "--server-address=127.0.0.1:0",
			// The node heartbeats through its Lease in kube-node-lease as a kubelet does. Without
			// it kube-controller-manager finds the node silent once --node-monitor-grace-period
			// has passed, marks every pod on it not ready, and kwok never readies a running pod
			// again: a test package whose cluster lives past five minutes then waits forever
			// for the rollouts of Deployments created before that mark.
			"--node-lease-duration-seconds=40",
		},
	}
}

// Config returns a fresh admin client configuration; callers may change their copy.
func (c *Cluster) Config() *rest.Config {
	return &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", c.apiPort),
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.pki.CACert},
		QPS:             200,
		Burst:           400,
	}
}

// ConfigFor returns a client configuration that authenticates with token instead of the admin
// token, for tests that prove what a ServiceAccount may do.
func (c *Cluster) ConfigFor(token string) *rest.Config {
	cfg := c.Config()
	cfg.BearerToken = token
	return cfg
}

// Kubeconfig is the path of an admin kubeconfig file for binaries under test.
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// LogDir holds one log file per component.
func (c *Cluster) LogDir() string { return c.logDir }

// Dir is the cluster's working folder.
func (c *Cluster) Dir() string { return c.dir }

// StartEtcd starts etcd (again, after StopEtcd) on the same ports and data.
func (c *Cluster) StartEtcd(ctx context.Context) error {
	args := append([]string{
		"--name", "default", "--data-dir", filepath.Join(c.dir, "etcd"),
		"--listen-client-urls", c.etcdURL, "--advertise-client-urls", c.etcdURL,
		"--listen-peer-urls", c.etcdPeerURL, "--initial-advertise-peer-urls", c.etcdPeerURL,
		"--initial-cluster", "default=" + c.etcdPeerURL,
		"--unsafe-no-fsync", "--log-level", "warn",
		// etcd's default 2 GiB quota is not enough for the benchmark's 100,000 ConfigMaps and
		// Secrets with their history between the API server's compactions; over the quota,
		// etcd refuses every write with "mvcc: database space exceeded". 8 GiB is etcd's
		// recommended maximum; the file only grows as far as the data does.
		"--quota-backend-bytes", strconv.Itoa(8 << 30),
	}, c.etcdArgs...)
	if err := c.startComponent("etcd", args...); err != nil {
		return err
	}
	return c.waitHTTP(ctx, "etcd", c.etcdURL+"/health", nil)
}

// StartAPIServer starts kube-apiserver (again, after StopAPIServer) on the same port.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	if err := c.startComponent("kube-apiserver",
		"--etcd-servers", c.etcdURL,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(c.apiPort),
		"--tls-cert-file", c.pki.ServingCert, "--tls-private-key-file", c.pki.ServingKey,
		"--client-ca-file", c.pki.CAFile,
		// The real node's kubelet lets in only this certificate.
		"--kubelet-client-certificate", c.pki.KubeletClientCert, "--kubelet-client-key", c.pki.KubeletClientKey,
		"--token-auth-file", filepath.Join(c.dir, "tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", c.pki.SAPub,
		"--service-account-signing-key-file", c.pki.SAKey,
		"--service-cluster-ip-range", serviceCIDR,
		"--endpoint-reconciler-type", "none",
		// A webhook behind a Service (our chart's) is called at its endpoints, the pod's own
		// address, which the host reaches; there is no kube-proxy to route a Service's address.
		"--enable-aggregator-routing=true",
		"--cert-dir", filepath.Join(c.dir, "apiserver-certs"),
	); err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.pki.CACert)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: pool}
	client := &http.Client{Timeout: 2 * time.Second, Transport: t}
	defer client.CloseIdleConnections()
	return c.waitHTTP(ctx, "kube-apiserver", fmt.Sprintf("https://127.0.0.1:%d/readyz", c.apiPort), client)
}

// StopAPIServer stops kube-apiserver gracefully; StartAPIServer brings it back.
func (c *Cluster) StopAPIServer() { c.stopComponent("kube-apiserver") }

// StopEtcd stops etcd gracefully; StartEtcd brings it back with its data.
func (c *Cluster) StopEtcd() { c.stopComponent("etcd") }

// RestartAPIServer stops and starts kube-apiserver: every watch is cut and must be re-established.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	c.StopAPIServer()
	return c.StartAPIServer(ctx)
}

// Stop ends every component, controllers first and etcd last.
func (c *Cluster) Stop() {
	c.stopNode()
	c.stopAll()
}

// stopNode stops the real node, if one was started, while the API server still runs: its pods
// are deleted through it.
func (c *Cluster) stopNode() {
	c.nodeMu.Lock()
	defer c.nodeMu.Unlock()
	if c.node == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, _ := kubernetes.NewForConfig(c.Config())
	if err := c.node.shutdown(ctx, client); err != nil {
		fmt.Fprintf(c.out, "stop the real node: %v\n", err)
	}
	c.node = nil
}

// Remove deletes the cluster's folder, logs included. Call after Stop.
func (c *Cluster) Remove() error { return os.RemoveAll(c.dir) }

func (c *Cluster) stopAll() {
	for _, name := range []string{"kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
		c.stopComponent(name)
	}
}

func (c *Cluster) startComponent(name string, args ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[name]; p != nil && !p.exited() {
		return fmt.Errorf("start %s: already running", name)
	}
	p, err := startProcess(c.logDir, name, c.bins.path(name), args...)
	if err != nil {
		return err
	}
	c.procs[name] = p
	return nil
}

func (c *Cluster) stopComponent(name string) {
	c.mu.Lock()
	p := c.procs[name]
	c.mu.Unlock()
	p.stop(10 * time.Second)
}

func (c *Cluster) running(name string) error {
	c.mu.Lock()
	p := c.procs[name]
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%s was never started", name)
	}
	if p.exited() {
		return p.exitError()
	}
	return nil
}

// waitHTTP polls url until it answers 200, failing early if the component exits.
func (c *Cluster) waitHTTP(ctx context.Context, name, url string, client *http.Client) error {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.running(name); err != nil {
			return false, err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := client.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("%s answered %s", url, resp.Status)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s to be ready: %w (last: %v)", name, err, last)
	}
	return nil
}

// createNode registers the node kwok pretends to run. Capacity is generous so scheduling never
// depends on resource requests in tests.
func createNode(ctx context.Context, client kubernetes.Interface) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   resource.MustParse("10000"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels:      map[string]string{"kubernetes.io/hostname": NodeName, "type": "kwok"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create kwok node: %w", err)
	}
	return nil
}

// waitSchedulable waits until the node is Ready without taints (kwok and the node-lifecycle
// controller work) and the default ServiceAccount exists (the controller-manager works).
func (c *Cluster) waitSchedulable(ctx context.Context, client kubernetes.Interface) error {
	var state string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kwok"} {
			if err := c.running(name); err != nil {
				return false, err
			}
		}
		node, err := client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			state = err.Error()
			return false, nil
		}
		if !nodeReady(node) || len(node.Spec.Taints) > 0 {
			state = fmt.Sprintf("node ready=%v taints=%v", nodeReady(node), node.Spec.Taints)
			return false, nil
		}
		if _, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			state = "default ServiceAccount: " + err.Error()
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("wait for a schedulable node: %w (last: %s)", err, state)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (c *Cluster) writeKubeconfig() error {
	return c.writeKubeconfigFile(c.kubeconfig, c.token, c.APIAddr())
}

// APIAddr is the API server's host:port.
func (c *Cluster) APIAddr() string { return fmt.Sprintf("127.0.0.1:%d", c.apiPort) }

// KubeconfigVia writes an admin kubeconfig into dir that reaches the API server through addr
// (a Proxy), with the API server's own certificate checks.
func (c *Cluster) KubeconfigVia(dir, addr string) (string, error) {
	path := filepath.Join(dir, "kubeconfig-via-proxy")
	return path, c.writeKubeconfigFile(path, c.token, addr)
}

// KubeconfigFor writes a kubeconfig file that authenticates with token into dir, for a binary
// under test that must run with a ServiceAccount's rights only.
func (c *Cluster) KubeconfigFor(dir, token string) (string, error) {
	path := filepath.Join(dir, "kubeconfig-token")
	return path, c.writeKubeconfigFile(path, token, c.APIAddr())
}

func (c *Cluster) writeKubeconfigFile(path, token, addr string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["configwave"] = &clientcmdapi.Cluster{
		Server:                   "https://" + addr,
		CertificateAuthorityData: c.pki.CACert,
	}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["configwave"] = &clientcmdapi.Context{Cluster: "configwave", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "configwave"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// freePorts asks the kernel for n unused loopback ports. They are released before the
// components bind them; a collision in that window fails start-up loudly, never silently.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
