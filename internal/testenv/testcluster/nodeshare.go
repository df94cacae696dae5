package testcluster

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes"
)

// One real node runs on a host at a time, and a test binary that started one keeps it while
// its tests use it. Between its tests it gives the node up when another test binary waits for
// it: go test runs packages side by side, and a package that holds the node through the rest of
// its tests would keep every other package's real-node tests waiting (cmd/wave's kwok tests
// after its real-node ones held hack/demo back for a minute). A test that needs the node again
// later starts it again, once the other binary is done with it.

// nodeIdleRelease is how long a node stays up with no test using it before a waiting binary
// gets it: longer than the set-up between two real-node tests of one package, so that
// consecutive ones share one node. After it, the holder looks for a waiter every nodeIdleLook.
const (
	nodeIdleRelease = 10 * time.Second
	nodeIdleLook    = 2 * time.Second
)

// holdNode marks the real node in use by one more test until the returned release, which
// starts the idle countdown when it was the last.
func (c *Cluster) holdNode() (release func()) {
	c.useMu.Lock()
	defer c.useMu.Unlock()
	c.nodeUsers++
	c.idleGen++ // a look already under way gives up
	if c.idle != nil {
		c.idle.Stop()
		c.idle = nil
	}
	return func() {
		c.useMu.Lock()
		defer c.useMu.Unlock()
		c.nodeUsers--
		if c.nodeUsers == 0 {
			c.lookForWaiterLocked(nodeIdleRelease)
		}
	}
}

// lookForWaiterLocked arms the next look; c.useMu is held.
func (c *Cluster) lookForWaiterLocked(after time.Duration) {
	gen := c.idleGen
	c.idle = time.AfterFunc(after, func() { c.releaseIdleNode(gen) })
}

// releaseIdleNode stops the node when no test of this binary uses it, another binary waits,
// and the API server answers (a test of this binary may have stopped it or etcd, and the node's
// pods are deleted through it); otherwise it looks again a little later, while the node is up.
func (c *Cluster) releaseIdleNode(gen int) {
	c.useMu.Lock()
	defer c.useMu.Unlock()
	if c.nodeUsers > 0 || gen != c.idleGen || !c.hasNode() {
		return
	}
	if !othersWaitForNode(nodeLockPath) || !c.apiServerReady() {
		c.lookForWaiterLocked(nodeIdleLook)
		return
	}
	c.stopNode()
}

func (c *Cluster) hasNode() bool {
	c.nodeMu.Lock()
	defer c.nodeMu.Unlock()
	return c.node != nil
}

// apiServerReady says whether the API server answers /readyz within a second.
func (c *Cluster) apiServerReady() bool {
	client, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil
}

// A binary waiting for the node host lock (a flock of nodeLockPath) also holds a read lock on
// the file's first byte, an open file description lock of fcntl, which flock's does not
// conflict with; the holder asks whether a write lock there would conflict. The same file, so
// that the host gets no second one.
var waitRange = unix.Flock_t{Whence: 0, Start: 0, Len: 1}

// othersWaitForNode says whether another test binary waits for the node host lock at path.
func othersWaitForNode(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	lk := waitRange
	lk.Type = unix.F_WRLCK
	if unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk) != nil {
		return false
	}
	return lk.Type != unix.F_UNLCK
}

// waitingForNode marks this binary as waiting for the node host lock, through f (open on
// nodeLockPath), until the returned func.
func waitingForNode(f *os.File) (done func()) {
	lk := waitRange
	lk.Type = unix.F_RDLCK
	if unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk) != nil {
		return func() {}
	}
	return func() {
		un := waitRange
		un.Type = unix.F_UNLCK
		_ = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &un)
	}
}
