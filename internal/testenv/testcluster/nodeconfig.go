package testcluster

import (
	"fmt"
	"strings"
)

// The real node's configuration files. Every path the node writes is under its folder, except
// those kubelet, containerd and libcni hard-code (see nodeHostDirs).

// containerdConfig is containerd 1.6's configuration (version 2 format): its state, sockets
// and runc's state under dir, the sandbox image built at test time, and the CRI plugin set for
// a host where root lacks CAP_SYS_RESOURCE (restrict_oom_score_adj: runc cannot lower a
// process's oom_score_adj, so every sandbox would fail).
func containerdConfig(dir, cniConf string) string {
	return strings.NewReplacer("$DIR", dir, "$CNI", cniConf, "$PAUSE", PauseImage).Replace(`version = 2
root = "$DIR/containerd/root"
state = "$DIR/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$DIR/containerd/containerd.sock"

[ttrpc]
  address = "$DIR/containerd/containerd.sock.ttrpc"

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$DIR/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$DIR/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CNI"
`)
}

// The pods' network: a bridge of the node's own with the gateway address, private to the host.
const (
	podCIDR    = "10.244.77.0/24"
	podGateway = "10.244.77.1" // the bridge's address: the host, as the pods see it
	cniNetwork = "configwave-node"
)

// cniConfig is a bridge network private to the host: containerd reports the node's network
// ready only once a configuration exists, even for hostNetwork pods. Nothing a pod sends can
// leave the host: pods get no default route, only their subnet (on the bridge) and the Service
// range (through the bridge's address, where the host itself answers: the kubernetes Service's
// ClusterIP is an address of the node's, see apiRelay). isGateway is off because with it the
// plugin turns the host's net.ipv4.ip_forward on for good; the node makes the bridge and gives
// it the gateway address itself (makeBridge). No masquerading, so the plugin adds no NAT rules.
func cniConfig(dir, bridge string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": %q, "gw": %q}]}
    },
    {"type": "loopback"}
  ]
}
`, cniNetwork, bridge, dir+"/cni/ipam", podCIDR, podGateway, serviceCIDR, podGateway)
}

// resolvConf is kubelet's resolvConf, the DNS configuration of every pod (no cluster DNS runs,
// so ClusterFirst falls back to it): the host's names a resolver off the host, where a pod's
// lookup would go. 127.0.0.1 is the pod's own loopback, where nothing answers, so a lookup fails
// at once and nothing leaves the host (a hostNetwork pod's loopback is the host's).
const resolvConf = `# The real node's pods have no resolver: no lookup of theirs leaves the host.
nameserver 127.0.0.1
options timeout:1 attempts:1
`

// kubeletConfig serves kubelet on loopback only, to clients holding a certificate of the
// cluster's CA (the API server's, for logs, exec and port-forward; see kubeletAuth), on cgroupfs
// without per-QoS cgroups (no systemd; a cgroup v1 host is accepted), with eviction thresholds
// a busy test disk never reaches, and with the 1 s sync period that brings a ConfigMap change
// into the mounted files within seconds (or kubelet's default of 1 minute, as users' nodes
// have it, with defaultSync).
func kubeletConfig(dir, clientCA string, port, healthzPort int, defaultSync bool) string {
	sync := "syncFrequency: 1s\n"
	if defaultSync {
		sync = ""
	}
	return strings.NewReplacer("$DIR", dir, "$CA", clientCA, "$PORT", fmt.Sprint(port), "$HEALTHZ", fmt.Sprint(healthzPort), "$SYNC\n", sync).Replace(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $HEALTHZ
# Every local user reaches 127.0.0.1: only a client certificate of the cluster's CA gets in.
# The CA's key is never written, so the only such certificate is the API server's kubelet
# client one (its key readable by root alone). AlwaysAllow rather than Webhook: that
# certificate names a user the API server grants nothing, which Webhook would first have to
# grant nodes/proxy (nearly an admin's rights) in the API.
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: $CA
authorization:
  mode: AlwaysAllow
# logs, exec and port-forward, which tests use through the API server; not the host's /var/log.
enableDebuggingHandlers: true
enableSystemLogHandler: false
# No KUBE-* chains in the host's firewall (kubelet's PATH has no iptables either).
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix://$DIR/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failCgroupV1: false
failSwapOn: false
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
  nodefs.inodesFree: "1%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
$SYNC
nodeStatusUpdateFrequency: 5s
staticPodPath: ""
clusterDomain: cluster.local
resolvConf: $DIR/kubelet/resolv.conf
serializeImagePulls: false
maxPods: 50
podLogsDir: $DIR/kubelet/pod-logs
volumePluginDir: $DIR/kubelet/volume-plugins
`)
}
