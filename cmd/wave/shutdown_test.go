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
// the grace period; the ones that cannot be are counted.
func TestEventsQueuedAtStopAreWritten(t *testing.T) {
	client := fake.NewSimpleClientset()
	tally := &eventTally{}
	b := record.NewBroadcaster(record.WithContext(context.Background()))
	b.StartRecordingToSink(talliedSink{&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}, tally})
	rec := talliedRecorder{b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "test"}), tally}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}}
	for i := range 5 { // fewer than the 10 client-go combines into one
		rec.Eventf(pod, corev1.EventTypeNormal, "Test", "event %d", i)
	}
	assert.Zero(t, tally.wait(5*time.Second))
	b.Shutdown()
	list, err := client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, list.Items, 5, "every Event emitted before the stop is written")

	stuck := &eventTally{}
	stuck.emitted.Add(3)
	stuck.written.Add(1)
	start := time.Now()
	assert.EqualValues(t, 2, stuck.wait(50*time.Millisecond))
	assert.Less(t, time.Since(start), 2*time.Second)
}
