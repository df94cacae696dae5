package testcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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

// nodeSysctls are the kernel settings kubelet sets on every start.
var nodeSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"}

// nodeHostPaths are the folders kubelet, containerd and the CNI plugins create outside the
// node's own folder, whatever they are configured with.
var nodeHostPaths = []string{"/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/run/containerd", "/var/lib/cni"}

// hostState is what a node changed on the host, written before the change.
type hostState struct {
	Dir     string            `json:"dir"`
	Bridge  string            `json:"bridge"`
	Dummy   string            `json:"dummy,omitempty"`   // an interface made for kubelet's node IP, without a default route
	Service string            `json:"service,omitempty"` // the interface holding the kubernetes Service's ClusterIP
	Sysctls map[string]string `json:"sysctls"`
	Created []string          `json:"created"` // host paths and cgroup folders that did not exist before
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
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("take the real node's host lock %s: %w", nodeLockPath, err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// recordHost notes the host's state before the node changes it and writes it down.
func recordHost(dir, bridge string) (*hostState, error) {
	s := &hostState{Dir: dir, Bridge: bridge, Sysctls: map[string]string{}}
	for _, k := range nodeSysctls {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			return nil, fmt.Errorf("read sysctl %s: %w", k, err)
		}
		s.Sysctls[k] = strings.TrimSpace(string(b))
	}
	for _, p := range append(nodeHostPaths, nodeCgroupDirs()...) {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			s.Created = append(s.Created, p)
		}
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

// nodeCgroupDirs are the cgroup folders runc makes for the pods (cgroupfs driver, no per-QoS
// cgroups): k8s.io at the root of every hierarchy.
func nodeCgroupDirs() []string {
	var dirs []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", e.Name(), "k8s.io"))
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil { // cgroup v2 alone
		dirs = append(dirs, "/sys/fs/cgroup/k8s.io")
	}
	return dirs
}

// restoreHost undoes what a node changed, as far as it can, and removes the record. It is safe
// to call for a node whose processes are gone (a killed run): what still runs in the pods'
// cgroups is killed first.
func restoreHost(s *hostState) error {
	var errs []error
	killShims(s.Dir)
	killCgroupProcs(s.Created)
	errs = append(errs, unmountUnder(s.Dir))
	for _, link := range []string{s.Bridge, s.Dummy, s.Service} {
		if link == "" {
			continue
		}
		if out, err := exec.Command("ip", "link", "del", link).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
			errs = append(errs, fmt.Errorf("delete interface %s: %v: %s", link, err, out))
		}
	}
	for k, v := range s.Sysctls {
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", k, v, err))
		}
	}
	// Deepest first, so the pods' cgroups go before their k8s.io parent.
	created := append([]string(nil), s.Created...)
	sort.Sort(sort.Reverse(sort.StringSlice(created)))
	for _, p := range created {
		if strings.HasPrefix(p, "/sys/fs/cgroup/") {
			removeCgroupTree(p)
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", p, err))
		}
	}
	if s.Dir != "" {
		if err := os.RemoveAll(s.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove the node's folder: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.Remove(nodeStatePath)
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
	if err := restoreHost(&s); err != nil {
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

// killCgroupProcs kills what still runs in the pods' cgroups, in the k8s.io folders the node
// created (never in ones that were there before).
func killCgroupProcs(created []string) {
	for _, c := range created {
		if !strings.HasPrefix(c, "/sys/fs/cgroup/") {
			continue
		}
		_ = filepath.WalkDir(c, func(path string, d os.DirEntry, err error) error {
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

// removeCgroupTree removes a cgroup folder and the ones below it, retrying while killed
// processes leave.
func removeCgroupTree(root string) {
	for range 50 {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		if len(dirs) == 0 {
			return
		}
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		busy := false
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				busy = true
			}
		}
		if !busy {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unmountUnder unmounts every mount under dir, deepest first: kubelet's rshared bind of its
// root folder, the pods' tmpfs volumes, the containers' overlays and the sandboxes' netns.
func unmountUnder(dir string) error {
	if dir == "" {
		return nil
	}
	var errs []error
	for range 3 { // a bind may hide mounts below it until it is gone
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return err
		}
		var points []string
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
				points = append(points, f[4])
			}
		}
		if len(points) == 0 {
			return nil
		}
		sort.Sort(sort.Reverse(sort.StringSlice(points)))
		errs = errs[:0]
		for _, p := range points {
			if err := syscall.Unmount(p, 0); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
					errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}
