// Package leader is leader election on a coordination.k8s.io Lease, read and written as
// client-go's leaderelection does (the same fields, expiry judged by this replica's own clock
// from when it last saw the Lease change, a release that leaves no holder), so that replicas of
// either kind share one Lease through an upgrade. client-go's package is not used because it
// links the whole generated clientset (its resourcelock package imports every typed client).
package leader

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// Leases is the part of a typed Lease client the election uses.
type Leases interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// Config is one election: client-go's LeaderElectionConfig with ReleaseOnCancel, for a Lease.
type Config struct {
	Leases          Leases // in the Lease's namespace
	Namespace, Name string
	Identity        string
	// LeaseDuration is how long a standby waits, from when it last saw the Lease change, before
	// it takes the Lease over; RenewDeadline how long the leader keeps trying to renew before
	// it stops leading; RetryPeriod the wait between tries.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnStartedLeading runs in a goroutine of its own once the Lease is held, with a context
	// that ends when it is lost or Run's context ends.
	OnStartedLeading func(context.Context)
	// OnStoppedLeading runs when Run returns, led or not.
	OnStoppedLeading func()
	// OnNewLeader is told every holder this replica sees, itself included; nil for none.
	OnNewLeader func(identity string)
}

// Jitter spreads the standbys' tries, as client-go's JitterFactor does: a try waits between one
// and 1+Jitter retry periods.
const Jitter = 1.2

// Run campaigns until the Lease is held, leads until it is lost or ctx ends, then releases
// it (when ctx ended) and returns.
func Run(ctx context.Context, c Config) {
	if err := c.validate(); err != nil {
		panic(err) // a programming error, as client-go's RunOrDie
	}
	e := &elector{c: c}
	defer c.OnStoppedLeading()
	if !e.acquire(ctx) {
		return
	}
	leadCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go c.OnStartedLeading(leadCtx)
	e.renew(leadCtx)
	e.release()
}

func (c Config) validate() error {
	switch {
	case c.Leases == nil || c.Name == "" || c.Identity == "":
		return fmt.Errorf("leader election: the Lease client, name and identity are required")
	case c.LeaseDuration <= c.RenewDeadline:
		return fmt.Errorf("leader election: the lease duration (%v) must be longer than the renew deadline (%v)", c.LeaseDuration, c.RenewDeadline)
	case float64(c.RenewDeadline) <= Jitter*float64(c.RetryPeriod):
		return fmt.Errorf("leader election: the renew deadline (%v) must be longer than %v times the retry period (%v)", c.RenewDeadline, Jitter, c.RetryPeriod)
	case c.OnStartedLeading == nil || c.OnStoppedLeading == nil:
		return fmt.Errorf("leader election: OnStartedLeading and OnStoppedLeading are required")
	}
	return nil
}

// elector is one replica's state: the Lease as last read or written (for its
// resourceVersion), and the spec it last saw change, with when.
type elector struct {
	c          Config
	lease      *coordinationv1.Lease
	observed   coordinationv1.LeaseSpec
	observedAt time.Time
	reported   string
}

func (e *elector) describe() string { return e.c.Namespace + "/" + e.c.Name }

func (e *elector) acquire(ctx context.Context) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	acquired := false
	klog.InfoS("Attempting to acquire the leader lease", "lease", e.describe())
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
		acquired = e.tryAcquireOrRenew(ctx)
		e.reportHolder()
		if acquired {
			klog.InfoS("Acquired the leader lease", "lease", e.describe())
			cancel()
		}
	}, e.c.RetryPeriod, Jitter, true)
	return acquired
}

// renew returns when a renewal kept failing for RenewDeadline, or ctx ended.
func (e *elector) renew(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		err := wait.PollUntilContextTimeout(ctx, e.c.RetryPeriod, e.c.RenewDeadline, true, func(ctx context.Context) (bool, error) {
			return e.tryAcquireOrRenew(ctx), nil
		})
		e.reportHolder()
		if err != nil {
			klog.InfoS("Failed to renew the leader lease", "lease", e.describe(), "err", err)
			cancel()
		}
	}, 0)
}

func (e *elector) leading() bool {
	return e.observed.HolderIdentity != nil && *e.observed.HolderIdentity == e.c.Identity
}

func (e *elector) observe(l *coordinationv1.Lease, now time.Time) {
	e.lease = l
	if !equality.Semantic.DeepEqual(l.Spec, e.observed) {
		e.observed, e.observedAt = l.Spec, now
	}
}

func (e *elector) tryAcquireOrRenew(ctx context.Context) bool {
	now := time.Now()
	if e.lease != nil && e.leading() && valid(e.observed, e.observedAt, now) {
		// The fast path: one write, which the API server refuses if anyone wrote in between.
		if spec, take := Decide(e.observed, e.observedAt, e.c.Identity, e.c.LeaseDuration, now); take && e.write(ctx, spec, now) == nil {
			return true
		}
	}
	l, err := e.c.Leases.Get(ctx, e.c.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		spec, _ := Decide(coordinationv1.LeaseSpec{}, time.Time{}, e.c.Identity, e.c.LeaseDuration, now)
		spec.LeaseTransitions = ptr(int32(0)) // the first holder, as client-go counts
		created, err := e.c.Leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: e.c.Namespace, Name: e.c.Name}, Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			klog.ErrorS(err, "Could not create the leader lease", "lease", e.describe())
			return false
		}
		e.lease, e.observed, e.observedAt = created, created.Spec, now
		return true
	case err != nil:
		klog.ErrorS(err, "Could not read the leader lease", "lease", e.describe())
		return false
	}
	e.observe(l, now)
	spec, take := Decide(e.observed, e.observedAt, e.c.Identity, e.c.LeaseDuration, now)
	return take && e.write(ctx, spec, now) == nil
}

// write updates the Lease to spec.
func (e *elector) write(ctx context.Context, spec coordinationv1.LeaseSpec, now time.Time) error {
	l := e.lease.DeepCopy()
	l.Spec = spec
	updated, err := e.c.Leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		klog.V(2).InfoS("Could not write the leader lease", "lease", e.describe(), "err", err)
		return err
	}
	e.lease, e.observed, e.observedAt = updated, updated.Spec, now
	return nil
}

// release leaves the Lease with no holder, so that a standby takes it at its next try rather
// than after LeaseDuration.
func (e *elector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), e.c.RenewDeadline)
	defer cancel()
	for ctx.Err() == nil {
		l, err := e.c.Leases.Get(ctx, e.c.Name, metav1.GetOptions{})
		if err != nil {
			klog.ErrorS(err, "Could not read the leader lease to release it", "lease", e.describe())
			return
		}
		if !e.leading() {
			return
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr(""), LeaseDurationSeconds: ptr(int32(1)), AcquireTime: &now, RenewTime: &now, LeaseTransitions: l.Spec.LeaseTransitions}
		updated, err := e.c.Leases.Update(ctx, l, metav1.UpdateOptions{})
		switch {
		case apierrors.IsConflict(err):
			continue
		case err != nil:
			klog.ErrorS(err, "Could not release the leader lease", "lease", e.describe())
			return
		}
		e.lease, e.observed, e.observedAt = updated, updated.Spec, now.Time
		return
	}
}

func (e *elector) reportHolder() {
	h := ""
	if e.observed.HolderIdentity != nil {
		h = *e.observed.HolderIdentity
	}
	if h == e.reported {
		return
	}
	e.reported = h
	if e.c.OnNewLeader != nil {
		go e.c.OnNewLeader(h)
	}
}

// valid reports whether a Lease last seen to change at observedAt, with spec, is still held.
func valid(spec coordinationv1.LeaseSpec, observedAt, now time.Time) bool {
	var seconds int32
	if spec.LeaseDurationSeconds != nil {
		seconds = *spec.LeaseDurationSeconds
	}
	return observedAt.Add(time.Duration(seconds) * time.Second).After(now)
}

// Decide is what identity writes into a Lease last seen to change at observedAt, holding
// observed: take is false while another replica holds it and its lease runs. A renewal keeps
// when the holder acquired it and the count of transitions; a takeover counts one more.
func Decide(observed coordinationv1.LeaseSpec, observedAt time.Time, identity string, leaseDuration time.Duration, now time.Time) (spec coordinationv1.LeaseSpec, take bool) {
	holder := ""
	if observed.HolderIdentity != nil {
		holder = *observed.HolderIdentity
	}
	if holder != "" && holder != identity && valid(observed, observedAt, now) {
		return coordinationv1.LeaseSpec{}, false
	}
	at := metav1.NewMicroTime(now)
	spec = coordinationv1.LeaseSpec{HolderIdentity: ptr(identity), LeaseDurationSeconds: ptr(int32(leaseDuration / time.Second)), AcquireTime: &at, RenewTime: &at}
	var transitions int32
	if observed.LeaseTransitions != nil {
		transitions = *observed.LeaseTransitions
	}
	if holder == identity {
		spec.AcquireTime = observed.AcquireTime
	} else {
		transitions++
	}
	spec.LeaseTransitions = ptr(transitions)
	return spec, true
}

func ptr[T any](v T) *T { return &v }
