package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/workload"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

func TestFinishing(t *testing.T) {
	tests := []struct {
		name     string
		cause    error
		wantDone bool
	}{
		{"wave asked to stop: the look's writes finish", nil, false},
		{"the Lease lost: they stop at once", ErrLeaseLost, true},
		{"the Lease lost, wrapped", fmt.Errorf("renewing: %w", ErrLeaseLost), true},
		{"another cause: they finish", errors.New("shutting down"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent, cancel := context.WithCancelCause(context.Background())
			wctx, done := finishing(parent)
			defer done()
			require.NoError(t, wctx.Err(), "alive while the parent is")
			cancel(tt.cause)
			if tt.wantDone {
				require.Eventually(t, func() bool { return wctx.Err() != nil }, time.Second, time.Millisecond)
				assert.ErrorIs(t, context.Cause(wctx), ErrLeaseLost)
				return
			}
			time.Sleep(20 * time.Millisecond) // AfterFunc runs in its own goroutine
			assert.NoError(t, wctx.Err())
			_, hasDeadline := wctx.Deadline()
			assert.True(t, hasDeadline, "bounded all the same")
		})
	}
}

// A leader whose write is in flight when it loses the Lease abandons the write (the API server
// sees the request cancelled), where a leader asked to stop lets it finish: another replica may
// already lead, and two replicas must never write at once.
func TestWriteInFlightStopsWhenTheLeaseIsLost(t *testing.T) {
	for _, tt := range []struct {
		name        string
		cause       error
		wantAborted bool
	}{
		{"lease lost", ErrLeaseLost, true},
		{"asked to stop", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", ResourceVersion: "3",
				Annotations: map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}}}
			d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}}}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", ResourceVersion: "7"}, Data: map[string]string{"k": "1"}}
			digested, err := confighash.Digester{}.Transform(cm)
			require.NoError(t, err)

			patching, aborted, answered := make(chan struct{}, 1), make(chan bool, 1), make(chan struct{})
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPatch || !strings.HasSuffix(r.URL.Path, "/deployments/app") {
					http.Error(w, "unexpected", http.StatusNotFound)
					return
				}
				_, _ = io.Copy(io.Discard, r.Body) // the server notices a cancelled request only once the body is read
				patching <- struct{}{}
				select {
				case <-r.Context().Done():
					aborted <- true
				case <-answered:
					aborted <- false
					w.Header().Set("Content-Type", "application/json")
					_ = json.NewEncoder(w).Encode(d)
				}
			}))
			defer api.Close()
			var answer sync.Once
			defer answer.Do(func() { close(answered) }) // before Close, so a failing test ends
			client, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL})
			require.NoError(t, err)

			cached := fake.NewSimpleClientset()
			inf := NewInformers(workload.Clients{Kube: waveclienttest.Wrap(cached)}, workload.Builtin(), []string{"ns"}, labels.Everything(), time.Minute, confighash.Digester{})
			c, err := NewController(Config{Client: waveclienttest.Wrap(client), Informers: inf, Recorder: record.NewFakeRecorder(20), Metrics: testMetrics(), RolloutDeadline: time.Hour})
			require.NoError(t, err)
			defer c.queue.ShutDown()
			require.NoError(t, inf.workloads["Deployment"][0].GetIndexer().Add(d))
			require.NoError(t, inf.configs[configref.ConfigMap][0].GetIndexer().Add(digested))

			ctx, cancel := context.WithCancelCause(context.Background())
			c.queue.Add("Deployment/ns/app")
			looked := make(chan struct{})
			go func() { defer close(looked); c.processNextWorkItem(ctx) }()
			select {
			case <-patching:
			case <-time.After(10 * time.Second):
				t.Fatal("the look never wrote")
			}
			cancel(tt.cause)
			if !tt.wantAborted {
				time.Sleep(100 * time.Millisecond) // a write cancelled now would show below
				answer.Do(func() { close(answered) })
			}
			select {
			case got := <-aborted:
				assert.Equal(t, tt.wantAborted, got, "the write in flight was abandoned")
			case <-time.After(10 * time.Second):
				t.Fatal("the write in flight neither finished nor stopped")
			}
			select {
			case <-looked:
			case <-time.After(10 * time.Second):
				t.Fatal("the look did not return")
			}
		})
	}
}
