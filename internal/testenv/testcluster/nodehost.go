package testcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What a real node changes on the host, so that a stop, or the next start after a killed run,
// puts it back. kubelet and containerd hard-code some paths, so only one node runs on a host at
// a time: nodeLockPath serialises them, and nodeStatePath records what to undo.
const (
	nodeLockPath  = "/run/configwave-node.lock"
	nodeStatePath = "/run/configwave-node.json"
)

// kubeletSysctls are the kernel settings kubelet gives these values once, at every start,
// before it reports the node ready (setupKernelTunables in its container manager). There is no
// way to keep it from that: with protectKernelDefaults it refuses to start instead, unless the
// host has them already. A test node needs none of them, and kernel.panic=10 with
// kernel.panic_on_oops=1 turn any oops on the host into a reboot, so the node writes the host's
// values back as soon as kubelet is ready (putBackKubeletSysctls), and again at stop.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// ipForwardSysctl is what the bridge CNI plugin turns on, for good, when it is the pods'
// gateway. The node's network never makes it one (cniConfig); the host's value is recorded and
// written back at stop all the same, so that no plugin version leaves the host forwarding.
const ipForwardSysctl = "net/ipv4/ip_forward"

// hostDir is a folder kubelet, containerd or libcni use outside the node's own folder, whatever
// they are configured with (each hard-codes it). The node makes it, and each missing parent,
// before it starts them, and records each folder before it makes it: at stop it removes the
// folders it made once they are empty, and never one it did not make. ours says which entries
// of the folder are the node's, removed at stop; anything else is another program's, left
// there, and with it the folder.
type hostDir struct {
	path string
	mode os.FileMode
	ours func(s *hostState, name string) bool
}

var nodeHostDirs = []hostDir{
	// kubelet's device-plugin socket, its device manager's checkpoint and the notice it writes
	// for plugins. A kubelet of the host's own uses the same names, so they go only from a
	// folder the node made.
	{"/var/lib/kubelet/device-plugins", 0o750, func(s *hostState, name string) bool {
		return s.made("/var/lib/kubelet/device-plugins") && slices.Contains([]string{"kubelet.sock", "kubelet_internal_checkpoint", "DEPRECATION"}, name)
	}},
	// kubelet's links to its containers' logs, which are in the node's folder (podLogsDir):
	// the links pointing there are the node's, whoever made the folder.
	{"/var/log/containers", 0o755, func(s *hostState, name string) bool {
		target, err := os.Readlink(filepath.Join("/var/log/containers", name))
		return err == nil && s.Dir != "" && strings.HasPrefix(target, s.Dir+"/")
	}},
	// containerd's shim sockets: the node's shims name theirs in their bundles.
	{"/run/containerd/s", 0o700, func(s *hostState, name string) bool { return slices.Contains(s.shimSockets(), name) }},
	// libcni's cache of the results of the node's network, named after the network, and of the
	// loopback network containerd adds to every sandbox ("cni-loopback-SANDBOX-lo"). A
	// containerd of the host's own names its loopback alike, so those go only from a folder the
	// node made.
	{"/var/lib/cni/results", 0o700, func(s *hostState, name string) bool {
		return strings.HasPrefix(name, cniNetwork+"-") || s.made("/var/lib/cni/results") && strings.HasPrefix(name, "cni-loopback-")
	}},
}

// hostState is what a node changed on the host, written before the change.
type hostState struct {
	Dir     string            `json:"dir"`
	Bridge  string            `json:"bridge"`
	Dummy   string            `json:"dummy,omitempty"`   // an interface made for kubelet's node IP, without a default route
	Service string            `json:"service,omitempty"` // the interface holding the kubernetes Service's ClusterIP
	Sysctls map[string]string `json:"sysctls"`           // the host's values of those the node's programs set
	Created []string          `json:"created"`           // host and cgroup folders the node made, each recorded before it was made
}

// lockNodeHost takes the host-wide node lock, waiting (and saying so on out) while another test
// binary's node runs.
func lockNodeHost(out io.Writer) (func(), error) {
	f, err := os.OpenFile(nodeLockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the real node's host lock %s: %w", nodeLockPath, err)
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
	}
	fmt.Fprintf(out, "Waiting for the real node another test binary runs (one per host) to stop\n")
	waited := waitingForNode(f)
	defer waited()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("take the real node's host lock %s: %w", nodeLockPath, err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// recordHost notes the host's state before the node changes it and writes it down.
func recordHost(dir, bridge string) (*hostState, error) {
	s := &hostState{Dir: dir, Bridge: bridge, Sysctls: map[string]string{}}
	keys := append(slices.Sorted(maps.Keys(kubeletSysctls)), ipForwardSysctl)
	for _, k := range keys {
		b, err := os.ReadFile("/proc/sys/" + k)
		if errors.Is(err, os.ErrNotExist) { // not in this kernel: nothing sets it
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read sysctl %s: %w", k, err)
		}
		s.Sysctls[k] = strings.TrimSpace(string(b))
	}
	if err := s.save(); err != nil {
		return nil, err
	}
	return s, nil
}

// save writes the record down, before the change it describes.
func (s *hostState) save() error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := os.WriteFile(nodeStatePath, b, 0o644); err != nil {
		return fmt.Errorf("record the host's state in %s: %w", nodeStatePath, err)
	}
	return nil
}

// made says whether the node made the folder path.
func (s *hostState) made(path string) bool { return slices.Contains(s.Created, path) }

// makeHostDirs makes the hard-coded folders kubelet, containerd and libcni will use and the
// k8s.io cgroup of every hierarchy (where runc puts the containers), as far as they are
// missing: what the node made is then known for certain, whatever another program makes or
// puts in them while the node runs.
func (s *hostState) makeHostDirs() error {
	for _, d := range nodeHostDirs {
		if err := s.makeDir(d.path, d.mode); err != nil {
			return err
		}
	}
	for _, c := range nodeCgroupDirs() {
		if err := s.makeDir(c, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// makeDir makes path and its missing parents, top down, recording each before it is made.
func (s *hostState) makeDir(path string, mode os.FileMode) error {
	var missing []string
	for p := path; p != "/"; p = filepath.Dir(p) {
		_, err := os.Lstat(p)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("look for %s before the real node starts: %w", p, err)
		}
		missing = append(missing, p)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		p := missing[i]
		s.Created = append(s.Created, p)
		if err := s.save(); err != nil {
			return err
		}
		if err := os.Mkdir(p, mode); err != nil {
			s.Created = s.Created[:len(s.Created)-1]
			if errors.Is(err, os.ErrExist) { // another program made it meanwhile: not the node's
				if err := s.save(); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("make %s for the real node: %w", p, err)
		}
	}
	return nil
}

// putBackKubeletSysctls writes back the host's values of the kernel settings kubelet changed
// at its start; it sets them only then (see kubeletSysctls).
func (s *hostState) putBackKubeletSysctls() error {
	var errs []error
	for k := range kubeletSysctls {
		if v, ok := s.Sysctls[k]; ok {
			errs = append(errs, writeSysctl(k, v))
		}
	}
	return errors.Join(errs...)
}

// writeSysctl writes v to the kernel setting k unless it holds v already.
func writeSysctl(k, v string) error {
	if b, err := os.ReadFile("/proc/sys/" + k); err == nil && strings.TrimSpace(string(b)) == v {
		return nil
	}
	if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
		return fmt.Errorf("restore sysctl %s=%s: %w", k, v, err)
	}
	return nil
}

// cgroupRoots are the roots of the host's cgroup hierarchies: every mounted one on cgroup v1
// (hybrid or not), the single one on cgroup v2 alone.
func cgroupRoots() []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup"}
	}
	var roots []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		if e.IsDir() {
			roots = append(roots, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return roots
}

// nodeCgroupDirs are the cgroup folders under which runc makes the containers' (cgroupfs
// driver, no per-QoS cgroups: containerd's namespace, then the container's ID): k8s.io at the
// root of every hierarchy.
func nodeCgroupDirs() []string {
	var dirs []string
	for _, r := range cgroupRoots() {
		dirs = append(dirs, filepath.Join(r, "k8s.io"))
	}
	return dirs
}

// containerIDs are the node's containers (pod sandboxes included) that still have a bundle in
// its containerd's state: those its containerd never deleted, after a kill or a failed stop.
func (s *hostState) containerIDs() []string {
	if s.Dir == "" {
		return nil
	}
	bundles, _ := filepath.Glob(filepath.Join(s.Dir, "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io", "*"))
	ids := make([]string, 0, len(bundles))
	for _, b := range bundles {
		ids = append(ids, filepath.Base(b))
	}
	return ids
}

// shimSockets are the names, in /run/containerd/s, of the sockets of the node's shims, as their
// bundles record them.
func (s *hostState) shimSockets() []string {
	if s.Dir == "" {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(s.Dir, "containerd", "state", "io.containerd.runtime.v2.task", "*", "*", "address"))
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if p := strings.TrimPrefix(strings.TrimSpace(string(b)), "unix://"); filepath.Dir(p) == "/run/containerd/s" {
			names = append(names, filepath.Base(p))
		}
	}
	return names
}

// putBackHost undoes what a node changed and, once all of it is back, removes the record; a
// record left says what the next start must still undo.
func putBackHost(s *hostState) error {
	if err := restoreHost(s); err != nil {
		return err
	}
	if err := os.Remove(nodeStatePath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the real node's record %s: %w", nodeStatePath, err)
	}
	return nil
}

// restoreHost undoes what a node changed, as far as it can. It is safe to call for a node whose
// processes are gone (a killed run): its shims, and what still runs in its containers'
// cgroups, are killed first. It touches nothing the node did not make.
func restoreHost(s *hostState) error {
	var errs []error
	ids := s.containerIDs()
	killShims(s.Dir)
	killContainers(ids)
	unmountErr := unmountUnder(s.Dir)
	errs = append(errs, unmountErr)
	for _, link := range []string{s.Bridge, s.Dummy, s.Service} {
		if link == "" {
			continue
		}
		if out, err := exec.Command("ip", "link", "del", link).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
			errs = append(errs, fmt.Errorf("delete interface %s: %v: %s (delete it with ip link del %s)", link, err, out, link))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Sysctls)) {
		errs = append(errs, writeSysctl(k, s.Sysctls[k]))
	}
	// Before the node's folder goes: the shims' sockets are named in it.
	errs = append(errs, s.removeEntries())
	for _, id := range ids {
		for _, r := range cgroupRoots() {
			errs = append(errs, removeCgroupTree(filepath.Join(r, "k8s.io", id)))
		}
	}
	errs = append(errs, s.removeCreated())
	if s.Dir != "" {
		if unmountErr != nil {
			// os.RemoveAll would go on into what is still mounted, and delete through it.
			errs = append(errs, fmt.Errorf("left the node's folder %s in place, since something is still mounted under it: unmount what /proc/self/mountinfo lists under it (umount, or umount -l when busy); the next node start then removes the folder", s.Dir))
		} else if err := os.RemoveAll(s.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove the node's folder %s: %w", s.Dir, err))
		}
	}
	return errors.Join(errs...)
}

// removeEntries removes the node's entries from the hard-coded folders (see hostDir.ours).
func (s *hostState) removeEntries() error {
	var errs []error
	for _, d := range nodeHostDirs {
		entries, err := os.ReadDir(d.path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s for the real node's entries: %w", d.path, err))
			continue
		}
		for _, e := range entries {
			if !d.ours(s, e.Name()) {
				continue
			}
			p := filepath.Join(d.path, e.Name())
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove the real node's %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeCreated removes the folders the node made, deepest first, where they are empty: one
// that holds anything else is another program's now, and stays.
func (s *hostState) removeCreated() error {
	created := slices.Clone(s.Created)
	sort.Sort(sort.Reverse(sort.StringSlice(created)))
	var errs []error
	for _, p := range created {
		err := syscall.Rmdir(p)
		switch {
		case err == nil, errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
		case errors.Is(err, syscall.EBUSY) && strings.HasPrefix(p, "/sys/fs/cgroup/"): // a cgroup another program put processes in
		default:
			errs = append(errs, fmt.Errorf("remove %s, which the real node made: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// restoreStaleHost undoes a node a killed run left behind, if its record is there.
func restoreStaleHost() error {
	b, err := os.ReadFile(nodeStatePath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var s hostState
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s is not a node record (%w): remove it once no node runs", nodeStatePath, err)
	}
	if err := putBackHost(&s); err != nil {
		return fmt.Errorf("undo the node a killed run left in %s: %w", s.Dir, err)
	}
	return nil
}

// killShims ends containerd's shims for the node's containerd: they outlive containerd.
func killShims(dir string) {
	if dir == "" {
		return
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "containerd-shim") || !strings.Contains(string(b), dir+"/") {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// killContainers kills what still runs in the cgroups of the node's containers (never in
// another cgroup under k8s.io).
func killContainers(ids []string) {
	for _, id := range ids {
		for _, r := range cgroupRoots() {
			_ = filepath.WalkDir(filepath.Join(r, "k8s.io", id), func(path string, d os.DirEntry, err error) error {
				if err != nil || d.Name() != "cgroup.procs" {
					return nil
				}
				b, _ := os.ReadFile(path)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				return nil
			})
		}
	}
}

// removeCgroupTree removes a cgroup folder and the ones below it, retrying while killed
// processes leave.
func removeCgroupTree(root string) error {
	var last error
	for range 50 {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		if len(dirs) == 0 {
			return nil
		}
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		last = nil
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				last = fmt.Errorf("remove cgroup %s of the real node's container: %w", d, err)
			}
		}
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%w (processes still in it after SIGKILL: see its cgroup.procs)", last)
}

// unmount is syscall.Unmount; a test makes it fail.
var unmount = syscall.Unmount

// unmountUnder unmounts every mount under dir, deepest first: kubelet's rshared bind of its
// root folder, the pods' tmpfs volumes, the containers' overlays and the sandboxes' netns. It
// fails while anything is still mounted there.
func unmountUnder(dir string) error {
	if dir == "" {
		return nil
	}
	var errs []error
	for range 3 { // a bind may hide mounts below it until it is gone
		points, err := mountsIn(dir)
		if err != nil {
			return err
		}
		if len(points) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, p := range points {
			if err := unmount(p, 0); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				if err := unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
					errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
				}
			}
		}
	}
	points, err := mountsIn(dir)
	if err != nil {
		return err
	}
	if len(points) > 0 {
		errs = append(errs, fmt.Errorf("still mounted under the node's folder: %s", strings.Join(points, ", ")))
	}
	return errors.Join(errs...)
}

// mountsIn lists the mount points at or under dir, deepest first.
func mountsIn(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("list the mounts under %s: %w", dir, err)
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	return points, nil
}
