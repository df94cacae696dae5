package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// Revisions compares, in one run, a Deployment whose pods mount their ConfigMap by name with
// one under configwave.io/revisions (snapshots, the webhook): the time from the patch to the
// template written and to the last pod of the new revision running, what each change creates,
// and wave's writes to the API server per change.
type Revisions struct {
	Replicas int           `json:"replicas"`
	Rows     []RevisionRow `json:"rows"`
}

type RevisionRow struct {
	Mode     string `json:"mode"` // "by name" or "revisions"
	Changes  int    `json:"changes"`
	Template Stats  `json:"patch_to_template"`
	LastPod  Stats  `json:"patch_to_last_pod"`
	// ObjectsPerChange: snapshots and indexes created per change; WritesPerChange: wave's
	// POST, PUT and PATCH requests per change (the webhook's owner references included).
	ObjectsPerChange float64 `json:"objects_per_change"`
	WritesPerChange  float64 `json:"wave_writes_per_change"`
}

const revisionsReplicas, revisionsChanges = 3, 5

func waveRevisions(e *env, r *report) error {
	ns, err := e.namespace("wave-revisions")
	if err != nil {
		return err
	}
	certDir, caPEM, err := webhookCerts()
	if err != nil {
		return err
	}
	defer os.RemoveAll(certDir)
	hook, err := freeAddr()
	if err != nil {
		return err
	}
	p, err := e.startWave(ns, "--revisions-webhook-address="+hook, "--revisions-webhook-cert-dir="+certDir)
	if err != nil {
		return err
	}
	defer p.stop()
	if err := e.registerWebhook(ns, "https://"+hook+"/mutate-pods", caPEM); err != nil {
		return err
	}
	out := &Revisions{Replicas: revisionsReplicas}
	for _, mode := range []string{"by name", "revisions"} {
		row, err := revisionRow(e, p, ns, mode)
		if err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
		out.Rows = append(out.Rows, row)
	}
	r.Revisions = out
	return nil
}

func revisionRow(e *env, p *proc, ns, mode string) (RevisionRow, error) {
	name := map[string]string{"by name": "plain", "revisions": "revs"}[mode]
	if err := e.createConfigMap(ns, name, map[string]string{"a": "0"}); err != nil {
		return RevisionRow{}, err
	}
	d := testcluster.Deployment(ns, name, revisionsReplicas)
	d.Annotations = map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}
	if mode == "revisions" {
		d.Annotations[revisions.OptInAnnotation] = "true"
	}
	d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}
	d.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/app"}}
	if _, err := e.client.AppsV1().Deployments(ns).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		return RevisionRow{}, err
	}
	settled := func() bool {
		got, err := e.client.AppsV1().Deployments(ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		h := got.Spec.Template.Annotations[rollout.InputsHashAnnotation]
		st := got.Status
		return (mode != "revisions" || revisions.IsRevision(h)) && got.Annotations[rollout.InputsAnnotation] != "" &&
			st.ObservedGeneration >= got.Generation && st.UpdatedReplicas == revisionsReplicas && st.Replicas == revisionsReplicas && st.AvailableReplicas == revisionsReplicas
	}
	if err := waitFor(e.ctx, 2*time.Minute, settled); err != nil {
		return RevisionRow{}, fmt.Errorf("the Deployment never settled: %w", err)
	}
	row := RevisionRow{Mode: mode, Changes: revisionsChanges}
	objects, writes := managedObjects(e, ns), waveWrites(p)
	var toTemplate, toLast []time.Duration
	for i := 1; i <= revisionsChanges; i++ {
		before, err := e.client.AppsV1().Deployments(ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return row, err
		}
		t0 := time.Now()
		if err := e.patchConfigMap(ns, name, "a", strconv.Itoa(i)); err != nil {
			return row, err
		}
		var after *appsv1.Deployment
		if err := waitFor(e.ctx, time.Minute, func() bool {
			after, err = e.client.AppsV1().Deployments(ns).Get(e.ctx, name, metav1.GetOptions{})
			return err == nil && after.Spec.Template.Annotations[rollout.InputsHashAnnotation] != before.Spec.Template.Annotations[rollout.InputsHashAnnotation]
		}); err != nil {
			return row, fmt.Errorf("change %d never reached the template: %w", i, err)
		}
		toTemplate = append(toTemplate, time.Since(t0))
		if err := waitFor(e.ctx, 2*time.Minute, func() bool { return newRevisionRuns(e, ns, after) }); err != nil {
			return row, fmt.Errorf("change %d: the new pods never all ran: %w", i, err)
		}
		toLast = append(toLast, time.Since(t0))
	}
	row.Template, row.LastPod = stats(toTemplate), stats(toLast)
	// The owner references come a moment after the pods: counted once they settle.
	time.Sleep(time.Second)
	row.ObjectsPerChange = float64(managedObjects(e, ns)-objects) / revisionsChanges
	row.WritesPerChange = (waveWrites(p) - writes) / revisionsChanges
	return row, nil
}

// newRevisionRuns: every pod of the Deployment is of its template's revision and running
// (kwok's), and there are as many as it wants: the last old pod is gone.
func newRevisionRuns(e *env, ns string, d *appsv1.Deployment) bool {
	pods, err := e.client.CoreV1().Pods(ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + d.Spec.Template.Labels["app"]})
	if err != nil {
		return false
	}
	want, n := d.Spec.Template.Annotations[rollout.InputsHashAnnotation], 0
	for _, pod := range pods.Items {
		if pod.Annotations[rollout.InputsHashAnnotation] != want || pod.Status.Phase != corev1.PodRunning {
			return false
		}
		n++
	}
	return n == int(*d.Spec.Replicas)
}

// managedObjects counts the snapshots and indexes in ns.
func managedObjects(e *env, ns string) int {
	sel := metav1.ListOptions{LabelSelector: revisions.ManagedByLabel + "=" + revisions.ManagedBy}
	cms, err1 := e.client.CoreV1().ConfigMaps(ns).List(e.ctx, sel)
	secs, err2 := e.client.CoreV1().Secrets(ns).List(e.ctx, sel)
	if err1 != nil || err2 != nil {
		return 0
	}
	return len(cms.Items) + len(secs.Items)
}

// waveWrites sums wave's POST, PUT and PATCH requests, every client's.
func waveWrites(p *proc) float64 {
	_, body := p.get("/metrics")
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "configwave_wave_api_requests_total{") {
			continue
		}
		if strings.Contains(line, `method="POST"`) || strings.Contains(line, `method="PUT"`) || strings.Contains(line, `method="PATCH"`) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// registerWebhook registers wave's webhook for the pods of ns, as docs/revisions.md shows.
func (e *env) registerWebhook(ns, url string, caPEM []byte) error {
	ignore, none, timeout := admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNoneOnDryRun, int32(5)
	_, err := e.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(e.ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "configwave-revisions-" + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "pods.revisions.configwave.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			FailurePolicy: &ignore, SideEffects: &none, TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		}},
	}, metav1.CreateOptions{})
	return err
}

// webhookCerts writes a certificate for 127.0.0.1 as tls.crt and tls.key into a new folder,
// and returns the folder and the certificate, which is its own CA.
func webhookCerts() (dir string, caPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "configwave-bench-webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", nil, err
	}
	if dir, err = os.MkdirTemp("", "configwave-bench-webhook-"); err != nil {
		return "", nil, err
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), caPEM, 0o600); err != nil {
		return "", nil, err
	}
	return dir, caPEM, os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}

func (v *Revisions) markdown() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "\n### Config revisions\n\nA Deployment of %d kwok pods mounting one ConfigMap, by name and with `configwave.io/revisions` (snapshots, and wave's webhook on Pod CREATE), in the same run; %d changes each, one at a time; medians (p90):\n\n",
		v.Replicas, revisionsChanges)
	b.WriteString("| pods read their config | patch → template | patch → last pod of the new revision running | objects created per change | wave's writes per change |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range v.Rows {
		fmt.Fprintf(&b, "| %s | %.1f ms (%.1f) | %.0f ms (%.0f) | %.1f | %.1f |\n", r.Mode, r.Template.Median, r.Template.P90, r.LastPod.Median, r.LastPod.P90, r.ObjectsPerChange, r.WritesPerChange)
	}
	return b.String()
}
