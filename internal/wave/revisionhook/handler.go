package revisionhook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/revisions"
)

// InputsHashAnnotation is the pod's revision, as wave writes it on the template (the rollout
// package's InputsHashAnnotation; named here so that the webhook links no controller).
const InputsHashAnnotation = "configwave.io/config-inputs-hash"

// lookWithin bounds the reads of one admission: the API server waits for the webhook only as
// long as its timeoutSeconds (the chart's 5 s), then admits the pod unchanged.
const lookWithin = 3 * time.Second

// Look is what the handler reads: a revision's index (immutable, so it may be kept), and
// whether a snapshot is there.
type Look interface {
	Index(ctx context.Context, namespace, name string) (data map[string]string, found bool, err error)
	Exists(ctx context.Context, ref configref.Ref) bool
}

// Handler answers the API server's AdmissionReviews.
type Handler struct {
	Look Look
	// Tell, when set, says why a pod of a revision reads some or all of its sources live, once
	// per revision and reason (an Event on its workload): called from the request, so it must
	// not block.
	Tell func(pod *corev1.Pod, why string)
	// Adopt, when set, makes what a new pod reads live as long as its revision.
	Adopt *Adopter

	mu   sync.Mutex
	told map[string]bool

	inFlight chan struct{} // bounds the reviews decided at once (maxInFlight)
	reading  atomic.Int64  // bytes of bodies being read, against readBudget
	once     sync.Once
}

// The port answers whoever reaches it (the API server, but also any pod that can route to it),
// so what a request may hold is bounded before its body is read, and nothing scarce is taken
// until it has been read in full:
//   - a body must come within bodyWithin: a client that trickles it is cut off, and its
//     connection closed, long before the API server's own timeout (the chart's 5 s);
//   - a body over maxReview is refused from its Content-Length, unread;
//   - the bodies being read at once hold at most readBudget bytes between them, counted as they
//     arrive, so that slow clients cost a bounded amount of memory; past it a request is
//     answered 429 at once;
//   - only a whole, parsed review takes one of maxInFlight places to be decided, which may
//     read the API server. A request over that bound is answered 429, which the API server,
//     under failurePolicy Ignore, takes as admitting the pod unchanged.
//
// So clients that open many connections and send slowly hold connections and a little memory,
// not the places the API server's reviews are decided in.
const (
	maxInFlight = 64
	bodyWithin  = 2 * time.Second
	readBudget  = 64 << 20
)

// maxTold bounds what Handler remembers of what it told; past it, it forgets all and may say a
// reason once more.
const maxTold = 4096

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an admission.k8s.io/v1 AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	h.once.Do(func() { h.inFlight = make(chan struct{}, maxInFlight) })
	body, status, err := h.readBody(w, r)
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	select {
	case h.inFlight <- struct{}{}:
		defer func() { <-h.inFlight }()
	default:
		http.Error(w, "too many reviews at once", http.StatusTooManyRequests)
		return
	}
	review, req, err := Parse(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var d revisions.Decision
	if req.Pod != nil {
		// Not the request's context: the server cancels it when a read of the (idle) connection
		// fails, and the API server's own timeout bounds the wait anyway.
		ctx, cancel := context.WithTimeout(context.Background(), lookWithin)
		d = revisions.Decide(h.gather(ctx, req.Pod))
		cancel()
		// The registration promises sideEffects NoneOnDryRun: a dry run (kubectl apply
		// --dry-run=server, or anyone who reaches the port) leaves no Event behind.
		if d.Why != "" && !req.DryRun {
			h.tell(req.Pod, d.Why)
		}
		if owner, ok := revisions.OwnerOf(req.Pod); ok && h.Adopt != nil && len(d.Use) > 0 && !req.Ephemeral && !req.DryRun {
			objects := []configref.Ref{{Kind: configref.ConfigMap, Namespace: req.Pod.Namespace, Name: revisions.IndexName(req.Pod.Annotations[InputsHashAnnotation])}}
			for ref, snap := range d.Use {
				objects = append(objects, configref.Ref{Kind: ref.Kind, Namespace: req.Pod.Namespace, Name: snap})
			}
			h.Adopt.Add(req.Pod.Namespace, owner, req.Pod.Annotations[InputsHashAnnotation], objects)
		}
	}
	out, err := Respond(review, req, d)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// readBody reads a review's body within bodyWithin, counting the bytes it holds against
// readBudget as they arrive (a client that announces a large body and trickles it holds only
// what it sent); it answers the status to reply with on error.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	if r.ContentLength > maxReview {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("an AdmissionReview of %d bytes is over the %d this webhook reads: a pod's review is far smaller", r.ContentLength, maxReview)
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyWithin))
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }() // the body is in: the deadline was for it alone
	in := http.MaxBytesReader(w, r.Body, maxReview)
	var body []byte
	held := int64(0)
	defer func() { h.reading.Add(-held) }()
	chunk := make([]byte, 32<<10)
	for {
		n, err := in.Read(chunk)
		if n > 0 {
			if h.reading.Add(int64(n)) > readBudget {
				h.reading.Add(-int64(n))
				return nil, http.StatusTooManyRequests, errors.New("too many review bodies being read at once")
			}
			held += int64(n)
			body = append(body, chunk[:n]...)
		}
		if errors.Is(err, io.EOF) {
			return body, 0, nil
		}
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("read the request: %w", err)
		case err != nil:
			return nil, http.StatusRequestTimeout, fmt.Errorf("read the request within %s: %w", bodyWithin, err)
		}
	}
}

// mountableLook is a Look that can tell whether a ServiceAccount enforces mountable secrets.
type mountableLook interface {
	EnforcesMountableSecrets(ctx context.Context, namespace, serviceAccount string) bool
}

func hasSecret(index revisions.Snapshots) bool {
	for ref := range index {
		if ref.Kind == configref.Secret {
			return true
		}
	}
	return false
}

// gather reads what Decide needs; a pod of no revision costs no read.
func (h *Handler) gather(ctx context.Context, pod *corev1.Pod) revisions.Admission {
	a := revisions.Admission{Pod: pod, InputsHash: pod.Annotations[InputsHashAnnotation]}
	name := revisions.IndexName(a.InputsHash)
	if name == "" {
		return a
	}
	data, found, err := h.Look.Index(ctx, pod.Namespace, name)
	a.IndexFound = found
	switch {
	case err != nil:
		a.IndexFound, a.IndexErr = true, fmt.Errorf("read configmap %s/%s: %w", pod.Namespace, name, err)
	case found:
		a.Index, a.IndexErr = revisions.ParseIndex(pod.Namespace, data)
		if a.IndexErr != nil {
			a.IndexErr = fmt.Errorf("configmap %s/%s: %w", pod.Namespace, name, a.IndexErr)
		}
	}
	a.SnapshotExists = func(kind configref.Kind, snap string) bool {
		return h.Look.Exists(ctx, configref.Ref{Kind: kind, Namespace: pod.Namespace, Name: snap})
	}
	if m, ok := h.Look.(mountableLook); ok && a.IndexFound && a.IndexErr == nil && hasSecret(a.Index) {
		a.MountableSecretsOnly = m.EnforcesMountableSecrets(ctx, pod.Namespace, cmp.Or(pod.Spec.ServiceAccountName, "default"))
	}
	return a
}

func (h *Handler) tell(pod *corev1.Pod, why string) {
	key := pod.Namespace + "\x00" + pod.Annotations[InputsHashAnnotation] + "\x00" + why
	h.mu.Lock()
	if h.told == nil || len(h.told) >= maxTold {
		h.told = map[string]bool{}
	}
	said := h.told[key]
	h.told[key] = true
	h.mu.Unlock()
	if said {
		return
	}
	klog.InfoS("a pod of a revision reads config live", "namespace", pod.Namespace, "revision", pod.Annotations[InputsHashAnnotation], "why", why)
	if h.Tell != nil {
		h.Tell(pod, why)
	}
}
