package testcluster

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The holder of the node sees a binary waiting for it, and no longer once it stopped waiting;
// its own flock of the same file does not count.
func TestOthersWaitingForTheNodeAreSeen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.lock")
	holder, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer holder.Close()
	require.NoError(t, syscall.Flock(int(holder.Fd()), syscall.LOCK_EX))
	assert.False(t, othersWaitForNode(path), "nobody waits yet")

	waiter, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer waiter.Close()
	done := waitingForNode(waiter)
	assert.True(t, othersWaitForNode(path), "a waiter is seen")
	done()
	assert.False(t, othersWaitForNode(path), "a waiter that got the lock or gave up is not")
}
