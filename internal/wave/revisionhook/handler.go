package revisionhook

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
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

	inFlight chan struct{} // bounds the reviews answered at once (maxInFlight)
	once     sync.Once
}

// maxInFlight bounds the reviews answered at once: the port answers whoever reaches it, and each
// review may read the API server. One over the bound is answered 429, which the API server,
// under failurePolicy Ignore, takes as admitting the pod unchanged.
const maxInFlight = 64

// maxTold bounds what Handler remembers of what it told; past it, it forgets all and may say a
// reason once more.
const maxTold = 4096

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an admission.k8s.io/v1 AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	h.once.Do(func() { h.inFlight = make(chan struct{}, maxInFlight) })
	select {
	case h.inFlight <- struct{}{}:
		defer func() { <-h.inFlight }()
	default:
		http.Error(w, "too many reviews at once", http.StatusTooManyRequests)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReview))
	if err != nil {
		http.Error(w, "read the request: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	review, req, err := Parse(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var d revisions.Decision
	if req.Pod != nil {
		ctx, cancel := context.WithTimeout(r.Context(), lookWithin)
		d = revisions.Decide(h.gather(ctx, req.Pod))
		cancel()
		if d.Why != "" {
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
