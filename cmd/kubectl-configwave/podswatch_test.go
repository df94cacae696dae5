package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/revisions"
)

// lockedBuffer is what the plugin writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// `kubectl configwave pods deploy/web -w` shows a rollout as it happens: started before a config
// change, it draws the pods of the revision they run, then (each frame after a "---") the new
// revision's pod beside the old one's, then only the new one's, each under its revision.
func TestPodsWatchShowsARolloutAsItHappens(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"app.conf": "color=blue\n"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	startWave(t, ns)
	d := testcluster.Deployment(ns, "web", 1)
	d.Spec.MinReadySeconds = 2 // the old pod stays until the new one has been ready that long: a frame shows both
	d.Annotations = map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true", revisions.OptInAnnotation: "true"}
	d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}
	_, err = client.AppsV1().Deployments(ns).Create(ctx(t), d, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return revisions.IsRevision(newestHash(t, client, ns, "web")) }, eventually, tick, "wave turns revisions on")
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, "web", time.Minute))

	out := &lockedBuffer{}
	watchCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		root := newRoot(out, out)
		root.SetArgs([]string{"--kubeconfig=" + cluster.Kubeconfig(), "pods", "deploy/web", "-n", ns, "-w", "--watch-interval=200ms"})
		done <- root.ExecuteContext(watchCtx)
	}()
	defer func() {
		stop()
		select {
		case err := <-done:
			assert.NoError(t, err, "pods -w ends without an error when its context does")
		case <-time.After(time.Minute):
			t.Error("pods -w did not stop")
		}
	}()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "pod/web-") }, eventually, tick, "the first frame")
	before := newestHash(t, client, ns, "web")

	_, err = client.CoreV1().ConfigMaps(ns).Update(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"app.conf": "color=green\n"}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return newestHash(t, client, ns, "web") != before }, eventually, tick, "wave rolls the change")
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, "web", time.Minute))
	// frames are what was drawn, each a tree of revisions and their pods.
	podLine := regexp.MustCompile(`pod/(web-[a-z0-9]+-[a-z0-9]+)`)
	revLine := regexp.MustCompile(`revision (\d+) `)
	podsIn := func(frame string) map[string]string { // pod → revision it is drawn under
		got, rev := map[string]string{}, ""
		for _, line := range strings.Split(frame, "\n") {
			if m := revLine.FindStringSubmatch(line); m != nil {
				rev = m[1]
			}
			if m := podLine.FindStringSubmatch(line); m != nil {
				got[m[1]] = rev
			}
		}
		return got
	}
	var frames []map[string]string
	require.Eventually(t, func() bool {
		frames = nil
		for _, f := range strings.Split(out.String(), "\n---\n") {
			frames = append(frames, podsIn(f))
		}
		last := frames[len(frames)-1]
		if len(last) != 1 {
			return false
		}
		for _, rev := range last {
			return rev != frames[0][firstKey(frames[0])]
		}
		return false
	}, eventually, tick, "a frame with only the new revision's pod: %q", out)
	assert.Len(t, frames[0], 1, "the first frame: the one pod of the first revision")
	both := false
	for _, f := range frames {
		revs := map[string]bool{}
		for _, rev := range f {
			revs[rev] = true
		}
		both = both || len(revs) == 2
	}
	assert.True(t, both, "a frame while it rolled: the new revision's pod beside the old one's")
	t.Logf("pods -w drew %d frames:\n%s", len(frames), out)
}

func firstKey(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}
