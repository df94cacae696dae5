package onefirst

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// LeaseStore keeps the Record on a coordination.k8s.io/v1 Lease, read and written as JSON
// through the reloader's REST client (coreclient), whose scheme knows no Lease.
type LeaseStore struct {
	Client    rest.Interface
	Namespace string
	Name      string // LeaseName
	Expiry    time.Duration
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
	since, _ := time.Parse(microTime, l.Spec.AcquireTime)
	renewed, _ := time.Parse(microTime, l.Spec.RenewTime)
	r, err := ParseRecord(l.Metadata.Annotations, l.Spec.HolderIdentity, since, renewed)
	if err != nil {
		klog.InfoS("warning: the rollout Lease holds no valid record; the next claim writes over it", "lease", s.Namespace+"/"+s.Name, "err", err.Error())
		return nil, l.Metadata.ResourceVersion, nil
	}
	return r, l.Metadata.ResourceVersion, nil
}

// Put writes r over version ("": creates the Lease).
func (s *LeaseStore) Put(ctx context.Context, r Record, version string) error {
	l := lease{APIVersion: "coordination.k8s.io/v1", Kind: "Lease",
		Metadata: leaseMetadata{Name: s.Name, Namespace: s.Namespace, ResourceVersion: version,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "configwave-reloader"}, Annotations: r.Annotations()},
		Spec: leaseSpec{HolderIdentity: r.First, LeaseDurationSeconds: int32(max(s.Expiry/time.Second, 1)),
			AcquireTime: r.Since.UTC().Format(microTime), RenewTime: r.Renewed.UTC().Format(microTime)}}
	body, err := json.Marshal(l)
	if err != nil {
		return err
	}
	req := s.Client.Put().AbsPath(s.path(s.Name))
	if version == "" {
		req = s.Client.Post().AbsPath(s.path())
	}
	err = req.SetHeader("Content-Type", "application/json").SetHeader("Accept", "application/json").Body(body).Do(ctx).Error()
	switch {
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		return ErrConflict
	case err != nil:
		return fmt.Errorf("write Lease %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// LeaseName names the Lease of one workload and its sources: a name the API accepts
// (at most 253 characters), the same for every sidecar of the workload.
func LeaseName(workloadKind, workload string, sources []string) string {
	sum := sha256.Sum256([]byte(strings.Join(sources, "\n")))
	suffix := "-" + hex.EncodeToString(sum[:4])
	prefix := "configwave-" + strings.ToLower(workloadKind) + "-" + workload
	if len(prefix) > 253-len(suffix) {
		prefix = strings.TrimRight(prefix[:253-len(suffix)], "-.")
	}
	return prefix + suffix
}
