package leader

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Through an upgrade, a replica of the build before (client-go's leaderelection) and one of
// this build share the Lease: each waits while the other holds it, and takes it at the
// other's release.
func TestSharesTheLeaseWithClientGosElection(t *testing.T) {
	client := fake.NewClientset()
	leases := client.CoordinationV1().Leases("ns")

	theirs := make(chan struct{})
	ctx, stopTheirs := context.WithCancel(context.Background())
	theirsDone := make(chan struct{})
	go func() {
		defer close(theirsDone)
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wave"}, Client: client.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: "client-go"}},
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond, ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) { close(theirs) }, OnStoppedLeading: func() {}},
		})
	}()
	defer func() { stopTheirs(); <-theirsDone }()
	select {
	case <-theirs:
	case <-time.After(5 * time.Second):
		t.Fatal("client-go's elector never led")
	}

	standby := &lookout{Leases: leases}
	ours := campaign(t, standby, "configwave")
	time.Sleep(2500 * time.Millisecond) // longer than the lease: client-go renews it
	assert.False(t, ours.leading.Load(), "never leads while client-go's replica renews")

	stopTheirs()
	<-theirsDone
	waitLed(t, ours, 10*time.Second)
	assert.EqualValues(t, 1, standby.sawReleased.Load(), "client-go's release is taken at the next try")
	l, err := leases.Get(context.Background(), "wave", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "configwave", *l.Spec.HolderIdentity)
	assert.Equal(t, int32(1), *l.Spec.LeaseTransitions)

	// And back: ours releases, client-go's takes it.
	again := make(chan struct{})
	ctx2, stop2 := context.WithCancel(context.Background())
	done2 := make(chan struct{})
	go func() {
		defer close(done2)
		leaderelection.RunOrDie(ctx2, leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wave"}, Client: client.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: "client-go-2"}},
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond, ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) { close(again) }, OnStoppedLeading: func() {}},
		})
	}()
	defer func() { stop2(); <-done2 }()
	ours.stop()
	<-ours.done
	select {
	case <-again:
	case <-time.After(5 * time.Second):
		t.Fatal("client-go's elector did not take the Lease ours released")
	}
}
