package workload

import (
	"context"
	"fmt"
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// CronJob is batch/v1 CronJob. Its next scheduled Job reads the current config anyway; what a
// config change adds, as Stakater Reloader does it, is one Job started at once from the
// CronJob's template. Jobs already running are left alone.
const CronJob Kind = "CronJob"

type cronJobType struct {
	typed[*batchv1.CronJob, *batchv1.CronJobList]
}

var cronJobs = cronJobType{typed[*batchv1.CronJob, *batchv1.CronJobList]{
	kind: CronJob,
	informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Batch().V1().CronJobs().Informer()
	},
	client: func(c kubernetes.Interface, ns string) typedClient[*batchv1.CronJob, *batchv1.CronJobList] {
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
// and Stakater Reloader do: named after the CronJob, marked as started by hand, owned by it.
func (cronJobType) Restart(ctx context.Context, c Clients, w Workload) error {
	cj, ok := w.Object.(*batchv1.CronJob)
	if !ok {
		return fmt.Errorf("%s is not a CronJob", w)
	}
	annotations := map[string]string{"cronjob.kubernetes.io/instantiate": "manual"}
	maps.Copy(annotations, cj.Spec.JobTemplate.Annotations)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    cj.Name + "-",
			Namespace:       cj.Namespace,
			Annotations:     annotations,
			Labels:          cj.Spec.JobTemplate.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))},
		},
		Spec: *cj.Spec.JobTemplate.Spec.DeepCopy(),
	}
	if _, err := c.Kube.BatchV1().Jobs(cj.Namespace).Create(ctx, job, metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("start a Job from %s: %w", w, err)
	}
	return nil
}
