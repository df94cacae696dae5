package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Events emitted just before a stop are written before the broadcaster is shut down, within
// the grace period; Events the correlator filters hold nothing up; writes still under way at
// the end of the grace period are counted.
func TestEventsQueuedAtStopAreWritten(t *testing.T) {
	client := fake.NewSimpleClientset()
	sink := &sinkActivity{}
	b := record.NewBroadcaster(record.WithContext(context.Background()))
	b.StartRecordingToSink(countedSink{&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}, sink})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "test"})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}}
	for i := range 5 { // fewer than the 10 client-go combines into one
		rec.Eventf(pod, corev1.EventTypeNormal, "Test", "event %d", i)
	}
	for range 40 { // past the spam filter's burst of 25 for one object: filtered, never written
		rec.Eventf(pod, corev1.EventTypeNormal, "Same", "the same")
	}
	assert.Zero(t, sink.wait(5*time.Second, eventQuiet), "nothing under way once the sink is quiet")
	b.Shutdown()
	list, err := client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	tests := 0
	for _, e := range list.Items {
		if e.Reason == "Test" {
			tests++
		}
	}
	assert.Equal(t, 5, tests, "every Event emitted before the stop is written")

	stuck := &sinkActivity{}
	stuck.begin() // a write that never ends
	assert.EqualValues(t, 1, stuck.wait(50*time.Millisecond, eventQuiet), "counted as dropped at the end of the grace period")
}
