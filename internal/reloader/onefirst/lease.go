package onefirst

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// LeaseStore keeps the Record on a coordination.k8s.io/v1 Lease, read and written as JSON
// through the reloader's REST client (coreclient), whose scheme knows no Lease. While Watch
// runs, Get answers from what the watch last brought, so that the sidecars that wait for their
// turn cost the API server one watch each, not a read a second; a write goes to the server
// with the version read, and a stale one comes back as ErrConflict.
type LeaseStore struct {
	Client    rest.Interface
	Namespace string
	Name      string // LeaseName
	Expiry    time.Duration
	// OnRequest, when set, is told of each request to the API server (metrics).
	OnRequest func(method string)

	mu      sync.Mutex
	cached  bool // rec and version hold what the watch last brought
	rec     *Record
	version string
	changes chan struct{}
}

// Changes signals each change of the Lease that Watch sees.
func (s *LeaseStore) Changes() <-chan struct{} { return s.changeChan() }

func (s *LeaseStore) changeChan() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changes == nil {
		s.changes = make(chan struct{}, 1)
	}
	return s.changes
}

// Watch watches the Lease until ctx ends, keeping what it brings for Get and signalling
// Changes; a watch that ends is opened again a second later.
func (s *LeaseStore) Watch(ctx context.Context) {
	changes := s.changeChan()
	warned := false
	for ctx.Err() == nil {
		err := s.watchOnce(ctx, changes)
		s.forget()
		switch {
		case ctx.Err() != nil:
		case apierrors.IsForbidden(err) && !warned:
			warned = true
			klog.InfoS("warning: cannot watch the rollout Lease; reading it every 10 s instead, so each pod's turn comes later: give the reloader's ServiceAccount watch on leases (config/reloader-rbac-one-first)", "lease", s.Namespace+"/"+s.Name)
		default:
			klog.V(2).InfoS("the rollout Lease's watch ended; opening it again", "lease", s.Namespace+"/"+s.Name, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (s *LeaseStore) watchOnce(ctx context.Context, changes chan struct{}) error {
	s.request("WATCH")
	stream, err := s.Client.Get().AbsPath(s.path()).Param("watch", "true").Param("allowWatchBookmarks", "false").
		Param("fieldSelector", "metadata.name="+s.Name).SetHeader("Accept", "application/json").Stream(ctx)
	if err != nil {
		return err
	}
	defer stream.Close()
	dec := json.NewDecoder(stream)
	for {
		var ev struct {
			Type   string `json:"type"`
			Object lease  `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			return err
		}
		switch ev.Type {
		case "ADDED", "MODIFIED":
			rec, _ := s.parse(ev.Object)
			s.keep(rec, ev.Object.Metadata.ResourceVersion)
		case "DELETED":
			s.keep(nil, "")
		default: // ERROR (the version is too old): start over
			return fmt.Errorf("watch event %s", ev.Type)
		}
		select {
		case changes <- struct{}{}:
		default:
		}
	}
}

func (s *LeaseStore) request(method string) {
	if s.OnRequest != nil {
		s.OnRequest(method)
	}
}

func (s *LeaseStore) keep(rec *Record, version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cached, s.rec, s.version = true, rec, version
}

func (s *LeaseStore) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cached, s.rec, s.version = false, nil, ""
}

// lease is the part of a Lease the store reads and writes.
type lease struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Metadata   leaseMetadata `json:"metadata"`
	Spec       leaseSpec     `json:"spec"`
}

type leaseMetadata struct {
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace,omitempty"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	Annotations     map[string]string `json:"annotations,omitempty"`
}

type leaseSpec struct {
	HolderIdentity       string `json:"holderIdentity,omitempty"`
	LeaseDurationSeconds int32  `json:"leaseDurationSeconds,omitempty"`
	AcquireTime          string `json:"acquireTime,omitempty"`
	RenewTime            string `json:"renewTime,omitempty"`
}

// microTime is the Lease's time format (metav1.MicroTime).
const microTime = "2006-01-02T15:04:05.000000Z07:00"

func (s *LeaseStore) path(name ...string) string {
	p := "/apis/coordination.k8s.io/v1/namespaces/" + s.Namespace + "/leases"
	if len(name) > 0 {
		p += "/" + name[0]
	}
	return p
}

// Get reads the record; a Lease that holds no valid record is returned as nil with its
// version, so that a claim writes over it.
func (s *LeaseStore) Get(ctx context.Context) (*Record, string, error) {
	s.mu.Lock()
	if s.cached {
		rec, version := s.rec, s.version
		s.mu.Unlock()
		if rec != nil {
			cp := *rec
			rec = &cp
		}
		return rec, version, nil
	}
	s.mu.Unlock()
	s.request("GET")
	raw, err := s.Client.Get().AbsPath(s.path(s.Name)).SetHeader("Accept", "application/json").Do(ctx).Raw()
	if apierrors.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read Lease %s/%s: %w", s.Namespace, s.Name, err)
	}
	var l lease
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, "", fmt.Errorf("read Lease %s/%s: %w", s.Namespace, s.Name, err)
	}
	r, _ := s.parse(l)
	return r, l.Metadata.ResourceVersion, nil
}

// parse reads the record a Lease holds; one that holds none valid is nil, logged.
func (s *LeaseStore) parse(l lease) (*Record, error) {
	since, _ := time.Parse(microTime, l.Spec.AcquireTime)
	renewed, _ := time.Parse(microTime, l.Spec.RenewTime)
	r, err := ParseRecord(l.Metadata.Annotations, l.Spec.HolderIdentity, since, renewed)
	if err == nil {
		r.Duration = time.Duration(l.Spec.LeaseDurationSeconds) * time.Second
	}
	if err != nil {
		klog.InfoS("warning: the rollout Lease holds no valid record; the next claim writes over it", "lease", s.Namespace+"/"+s.Name, "err", err.Error())
		return nil, err
	}
	return r, nil
}

// Put writes r over version ("": creates the Lease).
func (s *LeaseStore) Put(ctx context.Context, r Record, version string) error {
	l := lease{APIVersion: "coordination.k8s.io/v1", Kind: "Lease",
		Metadata: leaseMetadata{Name: s.Name, Namespace: s.Namespace, ResourceVersion: version,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "configwave-reloader"}, Annotations: r.Annotations()},
		// The claim's duration is its holder's: a batch pod with another --rollout-soak writes
		// back the one it read (r.Duration), not its own.
		Spec: leaseSpec{HolderIdentity: r.First, LeaseDurationSeconds: int32(max(cmp.Or(r.Duration, s.Expiry)/time.Second, 1)),
			AcquireTime: r.Since.UTC().Format(microTime), RenewTime: r.Renewed.UTC().Format(microTime)}}
	body, err := json.Marshal(l)
	if err != nil {
		return err
	}
	req := s.Client.Put().AbsPath(s.path(s.Name))
	method := "PUT"
	if version == "" {
		req, method = s.Client.Post().AbsPath(s.path()), "POST"
	}
	s.request(method)
	raw, err := req.SetHeader("Content-Type", "application/json").SetHeader("Accept", "application/json").Body(body).Do(ctx).Raw()
	err = withServerStatus(err, raw)
	if err == nil {
		// What was written is the record now, at the version the server gave it: the watch
		// brings the same, or something newer after it.
		var written lease
		if json.Unmarshal(raw, &written) == nil && written.Metadata.ResourceVersion != "" {
			s.mu.Lock()
			if s.cached {
				cp := r
				s.rec, s.version = &cp, written.Metadata.ResourceVersion
			}
			s.mu.Unlock()
		}
	} else {
		s.mu.Lock()
		if s.cached && (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) {
			s.cached = false // read it from the server until the watch catches up
		}
		s.mu.Unlock()
	}
	switch {
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		return ErrConflict
	case apierrors.IsForbidden(err):
		return fmt.Errorf("write Lease %s/%s: %w; give the reloader's ServiceAccount create and update on leases (config/reloader-rbac-one-first)", s.Namespace, s.Name, err)
	case err != nil:
		return fmt.Errorf("write Lease %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// withServerStatus is err with the message the API server sent in its Status (an admission
// policy's denial among them), where the client could not read it from this client's scheme.
func withServerStatus(err error, raw []byte) error {
	var status metav1.Status
	if err == nil || len(raw) == 0 || json.Unmarshal(raw, &status) != nil || status.Kind != "Status" || status.Message == "" {
		return err
	}
	return &apierrors.StatusError{ErrStatus: status}
}

// LeaseName names the Lease of one workload and its sources: a name the API accepts
// (at most 253 characters), the same for every sidecar of the workload whatever the order of
// its flags, so that a Role can name it (resourceNames) and the sidecar's log says it.
func LeaseName(workloadKind, workload string, sources []string) string {
	sources = slices.Sorted(slices.Values(sources))
	sum := sha256.Sum256([]byte(strings.Join(sources, "\n")))
	suffix := "-" + hex.EncodeToString(sum[:4])
	prefix := "configwave-" + strings.ToLower(workloadKind) + "-" + workload
	if len(prefix) > 253-len(suffix) {
		prefix = strings.TrimRight(prefix[:253-len(suffix)], "-.")
	}
	return prefix + suffix
}
