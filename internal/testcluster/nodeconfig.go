package testcluster

import (
	"fmt"
	"strings"
)

// The real node's configuration files. Every path the node writes is under its folder, except
// those kubelet and containerd hard-code (see nodeHostPaths).

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

// cniConfig is a bridge network private to the host: containerd reports the node's network
// ready only once a configuration exists, even for hostNetwork pods. No masquerading, so the
// plugin adds no NAT rules.
func cniConfig(dir, bridge, subnet string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "configwave-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "loopback"}
  ]
}
`, bridge, dir+"/cni/ipam", subnet)
}

// kubeletConfig serves kubelet on loopback only, without authentication (the API server reaches
// it there for logs and exec), on cgroupfs without per-QoS cgroups (no systemd; a cgroup v1
// host is accepted), with eviction thresholds a busy test disk never reaches, and with the
// 1 s sync period that brings a ConfigMap change into the mounted files within seconds (or
// kubelet's default of 1 minute, as users' nodes have it, with defaultSync).
func kubeletConfig(dir string, port, healthzPort int, defaultSync bool) string {
	sync := "syncFrequency: 1s\n"
	if defaultSync {
		sync = ""
	}
	return strings.NewReplacer("$DIR", dir, "$PORT", fmt.Sprint(port), "$HEALTHZ", fmt.Sprint(healthzPort), "$SYNC\n", sync).Replace(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $HEALTHZ
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
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
resolvConf: /etc/resolv.conf
serializeImagePulls: false
maxPods: 50
podLogsDir: $DIR/kubelet/pod-logs
volumePluginDir: $DIR/kubelet/volume-plugins
`)
}
