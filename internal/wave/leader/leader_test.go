package leader

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.MicroTime { m := metav1.NewMicroTime(now.Add(d)); return &m }
	held := func(holder string, transitions int32) coordinationv1.LeaseSpec {
		return coordinationv1.LeaseSpec{HolderIdentity: ptr(holder), LeaseDurationSeconds: ptr(int32(15)), AcquireTime: at(-time.Hour), RenewTime: at(-time.Second), LeaseTransitions: ptr(transitions)}
	}
	for _, tt := range []struct {
		name            string
		observed        coordinationv1.LeaseSpec
		seenAgo         time.Duration // since the Lease was last seen to change
		wantTake        bool
		wantTransitions int32
		wantAcquired    *metav1.MicroTime
	}{
		{name: "another holder, its lease running", observed: held("other", 3), seenAgo: 14 * time.Second},
		{name: "another holder, its lease run out", observed: held("other", 3), seenAgo: 16 * time.Second, wantTake: true, wantTransitions: 4, wantAcquired: at(0)},
		{name: "released: no holder", observed: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr(int32(1)), LeaseTransitions: ptr(int32(3))}, wantTake: true, wantTransitions: 4, wantAcquired: at(0)},
		{name: "held here: a renewal keeps the acquire time and the count", observed: held("me", 3), seenAgo: time.Second, wantTake: true, wantTransitions: 3, wantAcquired: at(-time.Hour)},
		{name: "held here, lease run out: still a renewal", observed: held("me", 3), seenAgo: time.Minute, wantTake: true, wantTransitions: 3, wantAcquired: at(-time.Hour)},
		{name: "never held: no transitions field", observed: coordinationv1.LeaseSpec{HolderIdentity: ptr("")}, wantTake: true, wantTransitions: 1, wantAcquired: at(0)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec, take := Decide(tt.observed, now.Add(-tt.seenAgo), "me", 10*time.Second, now)
			require.Equal(t, tt.wantTake, take)
			if !take {
				return
			}
			assert.Equal(t, "me", *spec.HolderIdentity)
			assert.Equal(t, int32(10), *spec.LeaseDurationSeconds)
			assert.Equal(t, tt.wantTransitions, *spec.LeaseTransitions)
			assert.Equal(t, tt.wantAcquired.UnixMicro(), spec.AcquireTime.UnixMicro())
			assert.Equal(t, now.UnixMicro(), spec.RenewTime.UnixMicro())
		})
	}
}

// candidate runs one elector until stop; leading tells whether it leads now.
type candidate struct {
	leading atomic.Bool
	led     chan struct{}
	stop    context.CancelFunc
	done    chan struct{}
}

func campaign(t *testing.T, leases Leases, id string) *candidate {
	ctx, stop := context.WithCancel(context.Background())
	c := &candidate{led: make(chan struct{}), stop: stop, done: make(chan struct{})}
	var once sync.Once
	go func() {
		defer close(c.done)
		Run(ctx, Config{Leases: leases, Namespace: "ns", Name: "wave", Identity: id,
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond,
			OnStartedLeading: func(ctx context.Context) {
				c.leading.Store(true)
				once.Do(func() { close(c.led) })
				<-ctx.Done()
				c.leading.Store(false)
			},
			OnStoppedLeading: func() {},
		})
	}()
	t.Cleanup(func() { stop(); <-c.done })
	return c
}

// lookout is a standby's Leases that counts the reads that found the Lease released (no
// holder). A standby that takes a released Lease at the next try reads it so once; one that
// waited out the release's duration would read it so at every try until then.
type lookout struct {
	Leases
	sawReleased atomic.Int32
}

func (l *lookout) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	lease, err := l.Leases.Get(ctx, name, opts)
	if err == nil && (lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "") {
		l.sawReleased.Add(1)
	}
	return lease, err
}

func waitLed(t *testing.T, c *candidate, within time.Duration) {
	t.Helper()
	select {
	case <-c.led:
	case <-time.After(within):
		t.Fatalf("did not lead within %v", within)
	}
}

func TestOneLeadsAndAStandbyTakesOverAtTheRelease(t *testing.T) {
	client := fake.NewClientset()
	leases := client.CoordinationV1().Leases("ns")
	a := campaign(t, leases, "a")
	waitLed(t, a, 5*time.Second)
	standby := &lookout{Leases: leases}
	b := campaign(t, standby, "b")
	time.Sleep(2500 * time.Millisecond) // longer than the lease: a renews it, so b waits
	assert.False(t, b.leading.Load(), "a standby never leads while the holder renews")

	a.stop()
	<-a.done
	l, err := leases.Get(context.Background(), "wave", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, "a", *l.Spec.HolderIdentity, "a stop releases the Lease (b may hold it already)")
	waitLed(t, b, 10*time.Second)
	// Counted in tries, not in time: a slow machine stretches a try, never adds one.
	assert.EqualValues(t, 1, standby.sawReleased.Load(), "a released Lease is taken at the next try, not after its duration")
	l, err = leases.Get(context.Background(), "wave", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "b", *l.Spec.HolderIdentity)
	assert.Equal(t, int32(1), *l.Spec.LeaseTransitions)
}

// A holder that stops renewing without a release (killed, partitioned) loses the Lease once
// its duration has run on the standby's clock.
func TestAStandbyTakesOverAnAbandonedLease(t *testing.T) {
	client := fake.NewClientset()
	leases := client.CoordinationV1().Leases("ns")
	renew := metav1.NewMicroTime(time.Now())
	_, err := leases.Create(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wave"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("gone"), LeaseDurationSeconds: ptr(int32(2)), AcquireTime: &renew, RenewTime: &renew, LeaseTransitions: ptr(int32(5))}}, metav1.CreateOptions{})
	require.NoError(t, err)
	start := time.Now()
	b := campaign(t, leases, "b")
	waitLed(t, b, 10*time.Second)
	assert.GreaterOrEqual(t, time.Since(start), 2*time.Second, "not before the lease ran out")
	l, err := leases.Get(context.Background(), "wave", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(6), *l.Spec.LeaseTransitions)
}

func TestConfigRefusesTimingsThatCannotWork(t *testing.T) {
	base := Config{Leases: fake.NewClientset().CoordinationV1().Leases("ns"), Name: "wave", Identity: "a",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}}
	require.NoError(t, base.validate())
	short := base
	short.RenewDeadline = 2100 * time.Millisecond
	assert.ErrorContains(t, short.validate(), "1.2 times the retry period")
	long := base
	long.RenewDeadline = 15 * time.Second
	assert.ErrorContains(t, long.validate(), "must be longer than the renew deadline")
}
