package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/configwave/configwave/internal/wave/rollout"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

// The leader election's part of "two replicas never write at once": the work learns why it
// stops (a lost Lease makes it abandon its writes, a stop lets them finish), and runLeader
// returns only once the work has, so nothing this replica started writes after it exits.
func TestRunLeaderStopsTheWork(t *testing.T) {
	for _, tt := range []struct {
		name        string
		lose        bool
		wantErr     string
		wantCause   error
		wantHolder  string
		wantRelease bool
	}{
		{name: "the Lease taken over", lose: true, wantErr: "lost the lease ns/wave", wantCause: rollout.ErrLeaseLost, wantHolder: "intruder"},
		{name: "asked to stop", wantCause: context.Canceled, wantHolder: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			// The fake keeps no resourceVersions: once the Lease is taken over, answer the old
			// leader's renewals as the API server does, with a conflict.
			var takenOver atomic.Bool
			client.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
				l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
				if !takenOver.Load() || *l.Spec.HolderIdentity == "intruder" {
					return false, nil, nil
				}
				return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), l.Name, errors.New("the object has been modified"))
			})
			cfg := &config{options: options{leaderID: "wave", leaderNamespace: "ns", leaseDuration: time.Second, renewDeadline: 500 * time.Millisecond, retryPeriod: 100 * time.Millisecond}}
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			started := make(chan struct{})
			var cause atomic.Value
			var finished atomic.Bool
			work := func(ctx context.Context) error {
				close(started)
				<-ctx.Done()
				cause.Store(context.Cause(ctx))
				time.Sleep(200 * time.Millisecond) // the writes under way, stopping
				finished.Store(true)
				return nil
			}
			returned := make(chan error, 1)
			go func() { returned <- runLeader(ctx, cfg, waveclienttest.Wrap(client), work) }()
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("never led")
			}
			if tt.lose {
				leases := client.CoordinationV1().Leases("ns")
				l, err := leases.Get(ctx, "wave", metav1.GetOptions{})
				require.NoError(t, err)
				intruder, long := "intruder", int32(60)
				l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &intruder, &long
				l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
				takenOver.Store(true)
				_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
				require.NoError(t, err)
			} else {
				stop()
			}
			var err error
			select {
			case err = <-returned:
			case <-time.After(10 * time.Second):
				t.Fatal("runLeader did not return")
			}
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
			} else {
				assert.NoError(t, err)
			}
			assert.True(t, finished.Load(), "runLeader returned before the work had stopped")
			got, _ := cause.Load().(error)
			assert.ErrorIs(t, got, tt.wantCause)
			l, err := client.CoordinationV1().Leases("ns").Get(context.Background(), "wave", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, tt.wantHolder, *l.Spec.HolderIdentity, "who holds the Lease after")
		})
	}
}
