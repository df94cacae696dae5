package testcluster

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// CutAPI's relay: a pod's address cut off loses its open connections and gets none new,
// another address keeps its own, and after the restore the cut address connects again.
func TestRelayCutsOneAddressOff(t *testing.T) {
	upstream, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { upstream.Close() })
	go func() { // an echo server in the API server's place
		for {
			c, err := upstream.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s := bufio.NewScanner(c)
				for s.Scan() {
					if _, err := c.Write(append(s.Bytes(), '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := startRelay(ln, upstream.Addr().String())
	t.Cleanup(func() { assert.NoError(t, r.stop()) })

	// Two clients from two addresses of loopback: the pod cut off and one beside it.
	dial := func(from string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		return d.Dial("tcp", ln.Addr().String())
	}
	echoes := func(c net.Conn) bool {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return false
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		return err == nil && line == "ping\n"
	}
	cutPod, otherPod := "127.0.0.2", "127.0.0.3"
	watch, err := dial(cutPod)
	require.NoError(t, err)
	other, err := dial(otherPod)
	require.NoError(t, err)
	require.True(t, echoes(watch))
	require.True(t, echoes(other))

	restore := r.cutOff(cutPod)
	assert.False(t, echoes(watch), "the cut address's open connection is closed")
	again, err := dial(cutPod)
	if err == nil { // accepted by the kernel, then closed by the relay
		assert.False(t, echoes(again), "a new connection of the cut address carries nothing")
		again.Close()
	}
	assert.True(t, echoes(other), "another address keeps its connection")

	restore()
	back, err := dial(cutPod)
	require.NoError(t, err)
	assert.True(t, echoes(back), "after the restore the address connects again")
	for _, c := range []net.Conn{watch, other, back} {
		c.Close()
	}
}
