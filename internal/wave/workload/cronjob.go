package workload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configwave/configwave/internal/wave/waveclient"
)

// CronJob is batch/v1 CronJob. Its next scheduled Job reads the current config anyway; what a
// config change adds, as Stakater Reloader does it, is one Job started at once from the
// CronJob's template. Jobs already running are left alone.
const CronJob Kind = "CronJob"

type cronJobType struct {
	typed[*batchv1.CronJob, *batchv1.CronJobList]
}

var cronJobs = cronJobType{typed[*batchv1.CronJob, *batchv1.CronJobList]{
	kind:     CronJob,
	resource: schema.GroupResource{Group: "batch", Resource: "cronjobs"},
	client: func(c waveclient.Interface, ns string) waveclient.Resource[*batchv1.CronJob, *batchv1.CronJobList] {
		return c.BatchV1().CronJobs(ns)
	},
	view: func(o *batchv1.CronJob) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
		return &o.ObjectMeta, &o.Spec.JobTemplate.Spec.Template
	},
	selector: func(*batchv1.CronJob) *metav1.LabelSelector { return nil }, // its Jobs' pods come and go
	// Nothing rolls: the Job started at once is the whole effect, so there is no rollout to
	// follow.
	progress: func(*batchv1.CronJob) Progress { return Progress{Observed: true, Done: true, Untracked: true} },
	items:    func(l *batchv1.CronJobList) ([]*batchv1.CronJob, string) { return pointers(l.Items), l.Continue },
	// No slim: Restart copies the whole cached template into a Job.
}}

// Restart starts one Job from the CronJob's template, as `kubectl create job --from=cronjob/`
// and Stakater Reloader do: marked as started by hand, owned by the CronJob. Its name is the
// CronJob's and change's, so that a try repeated after a timeout, a failed write or a restart
// of wave finds the Job made and starts no second one.
func (cronJobType) Restart(ctx context.Context, c Clients, w Workload, change string) error {
	cj, ok := w.Object.(*batchv1.CronJob)
	if !ok {
		return fmt.Errorf("%s is not a CronJob", w)
	}
	annotations := map[string]string{"cronjob.kubernetes.io/instantiate": "manual"}
	maps.Copy(annotations, cj.Spec.JobTemplate.Annotations)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            JobName(cj.Name, change),
			Namespace:       cj.Namespace,
			Annotations:     annotations,
			Labels:          cj.Spec.JobTemplate.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))},
		},
		Spec: *cj.Spec.JobTemplate.Spec.DeepCopy(),
	}
	_, err := c.Kube.BatchV1().Jobs(cj.Namespace).Create(ctx, job, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("start Job %s from %s: %w", job.Name, w, err)
	}
	return nil
}

// WithTemplateAnnotations is w with annotations set on a copy of its pod template, for a Job
// started with a rollout: the Job is made from the template as the rollout writes it (its new
// inputs hash names the config revision its pods read), not as the cache held it before.
func WithTemplateAnnotations(w Workload, annotations map[string]string) Workload {
	cj, ok := w.Object.(*batchv1.CronJob)
	if !ok || len(annotations) == 0 {
		return w
	}
	cj = cj.DeepCopy()
	tmpl := &cj.Spec.JobTemplate.Spec.Template
	if tmpl.Annotations == nil {
		tmpl.Annotations = map[string]string{}
	}
	maps.Copy(tmpl.Annotations, annotations)
	out := w
	out.Object, out.Template = cj, tmpl
	return out
}

// TemplatePath: a CronJob's pod template is its Job template's.
func (cronJobType) TemplatePath() []string {
	return []string{"spec", "jobTemplate", "spec", "template"}
}

// JobName names the Job started for one change: the CronJob's name (at most 52 characters)
// and 10 hex digits of the change, within the 63 a Job's name may have.
func JobName(cronJob, change string) string {
	sum := sha256.Sum256([]byte(change))
	return cronJob[:min(len(cronJob), 52)] + "-" + hex.EncodeToString(sum[:5])
}

// RestartBlocked is why a CronJob starts no Job now ("" when it may): it is suspended, being
// deleted, or forbids concurrent runs while one runs. Its next run uses the new config.
func (cronJobType) RestartBlocked(w Workload) string {
	cj, ok := w.Object.(*batchv1.CronJob)
	switch {
	case !ok:
		return ""
	case cj.DeletionTimestamp != nil:
		return "the CronJob is being deleted"
	case cj.Spec.Suspend != nil && *cj.Spec.Suspend:
		return "the CronJob is suspended (spec.suspend); its next run after it is resumed uses the new config"
	case cj.Spec.ConcurrencyPolicy == batchv1.ForbidConcurrent && len(cj.Status.Active) > 0:
		return fmt.Sprintf("a Job of it still runs and its concurrencyPolicy is Forbid; its next scheduled run uses the new config (running: %s)", cj.Status.Active[0].Name)
	}
	return ""
}
