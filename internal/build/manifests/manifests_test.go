package manifests_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) { testcluster.Main(m, &cluster) }

const root = "../../.."

func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
	require.NoError(t, err, "kustomize build %s", dir)
	out, err := res.AsYaml()
	require.NoError(t, err)
	return out
}

// helm runs Helm's own CLI (testcluster.Helm).
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(testcluster.Helm(t), args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New(stderr.String())
	}
	return out, nil
}

func helmTemplate(t *testing.T, set ...string) []byte {
	t.Helper()
	args := []string{"template", "configwave", filepath.Join(root, "charts", "configwave"), "--namespace", "configwave-system"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	require.NoError(t, err, "helm template %v", set)
	return out
}

// helmTemplateWithAPIs renders the chart as if the cluster served apis (GROUP/VERSION/KIND).
func helmTemplateWithAPIs(t *testing.T, apis []string, set ...string) []byte {
	t.Helper()
	args := []string{"template", "configwave", filepath.Join(root, "charts", "configwave"), "--namespace", "configwave-system"}
	for _, a := range apis {
		args = append(args, "--api-versions", a)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	require.NoError(t, err, "helm template --api-versions %v %v", apis, set)
	return out
}

func decode(t *testing.T, docs []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(docs), 4096)
	for {
		var raw map[string]any
		err := d.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if len(raw) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: raw})
	}
	require.NotEmpty(t, objs)
	return objs
}

// applyDryRun sends every object to the API server as a server-side apply with dry-run: the
// server validates fields, types and API versions, and stores nothing.
func applyDryRun(t *testing.T, objs []*unstructured.Unstructured, namespace string) {
	t.Helper()
	cfg := cluster.Config()
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s %s: the API server does not know this kind", gvk, o.GetName())
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == "namespace" {
			ns := o.GetNamespace()
			if ns == "" {
				ns = namespace
			}
			ri = dyn.Resource(mapping.Resource).Namespace(ns)
		}
		_, err = ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "configwave-manifest-test", DryRun: []string{metav1.DryRunAll}, Force: true})
		assert.NoError(t, err, "%s %s/%s rejected by the API server", gvk.Kind, o.GetNamespace(), o.GetName())
	}
}

// checkAppConfigs runs the real applications' own checks on the configs the examples carry:
// nginx -t on every nginx.conf and promtool on every prometheus.yml.
func checkAppConfigs(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "ConfigMap" {
			continue
		}
		data, _, err := unstructured.NestedStringMap(o.Object, "data")
		require.NoError(t, err)
		for key, content := range data {
			if key != "nginx.conf" && key != "prometheus.yml" {
				continue
			}
			dir := t.TempDir()
			file := filepath.Join(dir, key)
			var cmd *exec.Cmd
			if key == "nginx.conf" {
				nginx := testcluster.NeedProgram(t, "nginx", "nginx-light")
				cmd = exec.Command(nginx, "-t", "-q", "-c", file, "-p", dir+"/", "-e", filepath.Join(dir, "error.log"))
			} else {
				promtool := testcluster.NeedProgram(t, "promtool", "prometheus")
				cmd = exec.Command(promtool, "check", "config", "--syntax-only", file)
			}
			require.NoError(t, os.WriteFile(file, []byte(content), 0o644))
			out, err := cmd.CombinedOutput()
			assert.NoError(t, err, "ConfigMap %s key %s: %s", o.GetName(), key, out)
		}
	}
}

// assertRestricted creates, with server-side dry-run, a Pod from every pod template among objs
// in a namespace that enforces the restricted Pod Security profile. The profile is enforced on
// Pods only (a Deployment whose template breaks it is stored, and its ReplicaSet then makes no
// pods), so the templates are checked as the Pods they become.
func assertRestricted(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	const ns = "pod-security-restricted"
	client, err := kubernetes.NewForConfig(cluster.Config())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}, metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		require.NoError(t, err)
	}
	checked := 0
	for _, o := range objs {
		path := []string{"spec", "template"}
		if o.GetKind() == "CronJob" {
			path = []string{"spec", "jobTemplate", "spec", "template"}
		}
		tmpl, found, err := unstructured.NestedMap(o.Object, path...)
		require.NoError(t, err)
		if !found {
			continue
		}
		var pod corev1.Pod
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pod))
		pod.Name = strings.ToLower(o.GetKind()) + "-" + o.GetName()
		pod.Namespace = ns
		// Pod Security does not look at the ServiceAccount, and the namespace has none of the
		// example's.
		pod.Spec.ServiceAccountName = ""
		_, err = client.CoreV1().Pods(ns).Create(ctx, &pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		assert.NoError(t, err, "%s %s: its pods fail the restricted Pod Security profile", o.GetKind(), o.GetName())
		checked++
	}
	assert.NotZero(t, checked, "no pod template found")
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	testcluster.Need(t, cluster)
	client, err := kubernetes.NewForConfig(cluster.Config())
	require.NoError(t, err)
	_, err = client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		require.NoError(t, err)
	}
}

func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind())
	}
	return out
}

func TestKustomizeBasesApply(t *testing.T) {
	testcluster.Need(t, cluster)
	ensureNamespace(t, "configwave-system")
	for _, dir := range []string{"config/wave", "config/wave-hash-key", "config/wave-migrate", "config/wave-revisions", "config/reloader-rbac", "config/reloader-rbac-one-first"} {
		t.Run(dir, func(t *testing.T) {
			objs := decode(t, kustomize(t, dir))
			applyDryRun(t, objs, "default")
			if !strings.HasPrefix(dir, "config/reloader-rbac") && dir != "config/wave-revisions" { // RBAC and a policy only: no pod to be restricted
				assertRestricted(t, objs)
			}
		})
	}
	assert.ElementsMatch(t, []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Role", "RoleBinding", "Deployment", "PodDisruptionBudget", "Service"},
		kinds(decode(t, kustomize(t, "config/wave"))))
	keyed := string(kustomize(t, "config/wave-hash-key"))
	for _, want := range []string{"--hash-key-file=/var/run/secrets/configwave/hash-key/key", "secretName: configwave-hash-key", "mountPath: /var/run/secrets/configwave/hash-key"} {
		assert.Contains(t, keyed, want)
	}
}

func TestHelmChartApplies(t *testing.T) {
	testcluster.Need(t, cluster)
	ensureNamespace(t, "configwave-system")
	cases := map[string][]string{
		"defaults": nil,
		"narrowed, single replica": {"namespaces={team-a,team-b}", "labelSelector=team=a", "leaderElection.enabled=false",
			"replicaCount=1", "podDisruptionBudget.enabled=false", "hashFormat=wave-v05", "dryRun=true"},
		"every optional value": {"imagePullSecrets[0].name=regcred", "priorityClassName=system-cluster-critical",
			"topologySpreadConstraints[0].maxSkew=1", "topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname",
			"topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway", "topologySpreadConstraints[0].labelSelector.matchLabels.app\\.kubernetes\\.io/name=configwave-wave",
			"podLabels.team=platform", "podAnnotations.example\\.com/x=y", "extraArgs={--v=2}", "hashKeySecret.name=wave-hash-key",
			"allowCrossNamespaceRefs=true", "networkPolicy.metricsFrom[0].podSelector.matchLabels.app=prometheus",
			"namespaceSelector={team:a}", "crashLoopDetection=false", "hashFormat=wave-v07"},
		"namespace-scoped RBAC": {"rbac.clusterWide=false", "namespaces={team-a,team-b}"},
		"names, the ServiceAccount, the image digest, more env and volumes, the notify webhook, Reloader's filters": {
			"fullnameOverride=cw", "serviceAccount.name=cw-sa", "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/wave",
			"deploymentAnnotations.example\\.com/owner=platform", "image.digest=sha256:" + strings.Repeat("a", 64),
			"extraEnv[0].name=GOMEMLIMIT", "extraEnv[0].value=200MiB", "extraVolumes[0].name=tmp", "extraVolumes[0].emptyDir.medium=Memory",
			"extraVolumeMounts[0].name=tmp", "extraVolumeMounts[0].mountPath=/tmp", "notifyWebhook.existingSecret=wave-hooks",
			"reloader.namespacesToIgnore={kube-system}", "reloader.resourceLabelSelector={reloader:enabled}", "reloader.reloadOnCreate=true",
			"reloader.reloadOnDelete=true", "reloader.autoReloadAll=true"},
		// Checked against the Prometheus Operator's own CRDs.
		"a ServiceMonitor and the PrometheusRule in the operator's namespace": {"metrics.serviceMonitor.enabled=true",
			"metrics.serviceMonitor.namespace=monitoring", "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
			"metrics.serviceMonitor.scrapeTimeout=10s", "metrics.serviceMonitor.interval=1m30s", "metrics.serviceMonitor.relabelings[0].action=replace",
			"metrics.serviceMonitor.relabelings[0].sourceLabels={__meta_kubernetes_pod_node_name}", "metrics.serviceMonitor.relabelings[0].targetLabel=node",
			"metrics.serviceMonitor.metricRelabelings[0].action=drop", "metrics.serviceMonitor.metricRelabelings[0].sourceLabels={__name__}",
			"metrics.serviceMonitor.metricRelabelings[0].regex=go_gc_.*",
			"metrics.prometheusRule.enabled=true", "metrics.prometheusRule.namespace=monitoring"},
		"config revisions with the webhook, its CA injected by cert-manager": {"revisions.enabled=true", "revisions.allWorkloads=true",
			"revisions.webhook.certSecret=wave-webhook-tls", "revisions.webhook.annotations.cert-manager\\.io/inject-ca-from=configwave-system/wave-webhook"},
		"config revisions with the webhook in two namespaces, its CA given": {"revisions.enabled=true", "namespaces={team-a,team-b}",
			"revisions.webhook.certSecret=wave-webhook-tls", "revisions.webhook.caBundle=" + base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"))},
		"config revisions with the webhook's certificate made by wave": {"revisions.enabled=true", "revisions.webhook.makeCertificate=true"},
		"config revisions with the webhook's port open to the API server's address only": {"revisions.enabled=true", "revisions.webhook.makeCertificate=true",
			"networkPolicy.webhookFrom[0].ipBlock.cidr=10.0.0.10/32"},
		"a PodMonitor and the Grafana dashboard": {"metrics.podMonitor.enabled=true", "metrics.grafanaDashboard.enabled=true",
			"metrics.grafanaDashboard.annotations.grafana_folder=Platform", "metrics.podMonitor.labels.release=kube-prometheus-stack",
			"metrics.podMonitor.relabelings[0].action=labeldrop", "metrics.podMonitor.relabelings[0].regex=container"},
	}
	testcluster.InstallPrometheusOperatorCRDs(t, cluster)
	ensureNamespace(t, "monitoring")
	ensureNamespace(t, "team-a")
	ensureNamespace(t, "team-b")
	for name, set := range cases {
		t.Run(name, func(t *testing.T) {
			objs := decode(t, helmTemplate(t, set...))
			applyDryRun(t, objs, "configwave-system")
			assertRestricted(t, objs)
		})
	}
	out := string(helmTemplate(t, "namespaces={team-a,team-b}", "labelSelector=team=a"))
	assert.Contains(t, out, "--namespaces=team-a,team-b")
	assert.Contains(t, out, "--label-selector=team=a")
	out = string(helmTemplate(t, "hashKeySecret.name=wave-hash-key", "extraArgs={--v=2}", "allowCrossNamespaceRefs=true", "networkPolicy.enabled=true"))
	for _, want := range []string{"--hash-key-file=/var/run/secrets/configwave/hash-key/hash-key", "secretName: wave-hash-key", `- "--v=2"`,
		"--allow-cross-namespace-refs", "kind: NetworkPolicy"} {
		assert.Contains(t, out, want)
	}
	assert.Contains(t, string(helmTemplate(t)), "kind: NetworkPolicy", "on by default: only the metrics port is reachable")
	out = string(helmTemplate(t, "fullnameOverride=cw", "serviceAccount.name=cw-sa", "image.digest=sha256:"+strings.Repeat("a", 64),
		"notifyWebhook.existingSecret=wave-hooks", "reloader.namespacesToIgnore={kube-system,monitoring}", "reloader.resourceLabelSelector={reloader:enabled}",
		"reloader.reloadOnCreate=true", "reloader.reloadOnDelete=true", "reloader.autoReloadAll=true"))
	for _, want := range []string{"name: cw\n", "serviceAccountName: cw-sa", "configwave@sha256:" + strings.Repeat("a", 64),
		"--notify-webhook=@/var/run/secrets/configwave/notify-webhook/url", "secretName: wave-hooks", "--namespaces-to-ignore=kube-system,monitoring",
		"--resource-label-selector=reloader:enabled", "--reload-on-create=true", "--reload-on-delete=true", "--auto-reload-all=true"} {
		assert.Contains(t, out, want)
	}
	hooked := string(helmTemplate(t, "revisions.enabled=true", "revisions.webhook.certSecret=wave-webhook-tls", "revisions.webhook.annotations.cert-manager\\.io/inject-ca-from=configwave-system/wave-webhook"))
	for _, want := range []string{"--revisions-webhook-address=:9443", "--revisions-webhook-cert-dir=/var/run/secrets/configwave/webhook", "secretName: wave-webhook-tls",
		"kind: MutatingWebhookConfiguration", "failurePolicy: Ignore", "cert-manager.io/inject-ca-from: configwave-system/wave-webhook", "path: /mutate-pods", "port: webhook"} {
		assert.Contains(t, hooked, want)
	}
	_, err := helm(t, "template", "x", filepath.Join(root, "charts", "configwave"), "--set", "revisions.enabled=true")
	require.Error(t, err, "the webhook without a certificate")
	assert.Contains(t, err.Error(), "revisions.webhook.enabled needs revisions.webhook.certSecret")
	_, err = helm(t, "template", "x", filepath.Join(root, "charts", "configwave"), "--set", "revisions.enabled=true", "--set", "revisions.webhook.certSecret=x")
	require.Error(t, err, "a certificate nobody can check")
	assert.Contains(t, err.Error(), "revisions.webhook needs the CA that signed its certificate")
	noRBAC := kinds(decode(t, helmTemplate(t, "rbac.create=false", "serviceAccount.create=false", "serviceAccount.name=mine")))
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"} {
		assert.NotContains(t, noRBAC, kind, "rbac.create=false, serviceAccount.create=false: the platform team grants it")
	}
	_, err = helm(t, "template", "x", filepath.Join(root, "charts", "configwave"), "--set", "image.digest=latest")
	require.Error(t, err, "values.schema.json rejects a digest that is not one")
	lint, err := helm(t, "lint", filepath.Join(root, "charts", "configwave"), "--strict", "--set", "rbac.create=false")
	require.NoError(t, err, "helm lint, NOTES.txt included: %s", lint)
	assert.NotContains(t, string(helmTemplate(t, "networkPolicy.enabled=false")), "NetworkPolicy")
	out = string(helmTemplate(t, "namespaceSelector={team:a,env:*}", "crashLoopDetection=false"))
	assert.Contains(t, out, "--namespace-selector=team:a,env:*")
	assert.Contains(t, out, "--crash-loop-detection=false")
	// The install key: wave makes it on first start; the chart names it to wave and lets wave
	// create it, and renders nothing random, so that `helm template` (Argo CD, Flux) gives the
	// same output every time. Not with a hash key, nor when told not to.
	first, second := helmTemplate(t), helmTemplate(t)
	assert.Equal(t, string(first), string(second), "two renders are the same: no drift under GitOps")
	defaults := decode(t, first)
	assert.NotContains(t, kinds(defaults), "Secret", "the chart makes no Secret")
	var keyRole *unstructured.Unstructured
	for _, o := range defaults {
		if o.GetKind() == "Role" && strings.HasSuffix(o.GetName(), "-install-key") {
			keyRole = o
		}
	}
	require.NotNil(t, keyRole, "wave may create its install key")
	var role rbacv1.Role
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(keyRole.Object, &role))
	assert.Contains(t, role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}})
	assert.Contains(t, string(first), "--install-key-secret="+keyRole.GetName())
	for _, set := range [][]string{{"hashKeySecret.name=wave-hash-key"}, {"installKey.create=false", "installKey.secretName=ops/k"}} {
		assert.NotContains(t, string(helmTemplate(t, set...)), "-install-key\n", "%v", set)
	}
	assert.Contains(t, string(helmTemplate(t, "installKey.create=false", "installKey.secretName=ops/wave-key")), "--install-key-secret=ops/wave-key")
	_, err = helm(t, "template", "x", filepath.Join(root, "charts", "configwave"), "--set", "extraArgs={v=2}")
	require.Error(t, err, "values.schema.json rejects an extra argument that is not a flag")

	// Values that would make a broken install stop the render, saying what to set.
	for set, want := range map[string]string{
		"leaderElection.enabled=false": "replicaCount above 1 without leaderElection.enabled",
		"replicaCount=1":               "podDisruptionBudget.minAvailable is not below replicaCount",
		"metrics.service.enabled=false,metrics.serviceMonitor.enabled=true":   "metrics.serviceMonitor.enabled scrapes through the metrics Service",
		"metrics.serviceMonitor.enabled=true,metrics.podMonitor.enabled=true": "would scrape every replica twice: enable one",
		// values.schema.json requires the name; the template says the same past --skip-schema-validation.
		"installKey.create=false": "/installKey/secretName",
	} {
		args := []string{"template", "x", filepath.Join(root, "charts", "configwave")}
		for _, s := range strings.Split(set, ",") {
			args = append(args, "--set", s)
		}
		_, err := helm(t, args...)
		require.Error(t, err, set)
		assert.Contains(t, err.Error(), want, set)
	}
	_, err = helm(t, "template", "x", filepath.Join(root, "charts", "configwave"), "--skip-schema-validation", "--set", "installKey.create=false")
	require.Error(t, err, "the template guards the install key past --skip-schema-validation")
	assert.Contains(t, err.Error(), "installKey.create=false needs installKey.secretName")
	assert.NotEmpty(t, helmTemplate(t, "replicaCount=1", "podDisruptionBudget.enabled=false", "leaderElection.enabled=false"), "one replica, no PDB, no election")
	for _, o := range decode(t, helmTemplate(t, "metrics.grafanaDashboard.enabled=true", "metrics.grafanaDashboard.labels=null")) {
		if o.GetKind() == "ConfigMap" && strings.HasSuffix(o.GetName(), "-dashboard") {
			assert.NotEmpty(t, o.GetLabels()["app.kubernetes.io/name"], "labels: null leaves the chart's labels, valid YAML")
		}
	}
	assert.NotEmpty(t, helmTemplate(t, "global.imageRegistry=registry.example.com"), "a subchart: the schema accepts global")
	assert.NotContains(t, string(helmTemplate(t, "podSecurityContext.runAsUser=null")), "runAsUser", "OpenShift: its SCC assigns the user")

	// A monitor in the operator's namespace selects wave's pods in the release's; one in the
	// release's namespace needs no selector.
	for _, o := range decode(t, helmTemplate(t, "metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.namespace=monitoring",
		"metrics.serviceMonitor.relabelings[0].action=labeldrop", "metrics.serviceMonitor.relabelings[0].regex=container")) {
		if o.GetKind() == "ServiceMonitor" {
			assert.Equal(t, "monitoring", o.GetNamespace())
			names, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "namespaceSelector", "matchNames")
			assert.Equal(t, []string{"configwave-system"}, names)
			endpoints, _, _ := unstructured.NestedSlice(o.Object, "spec", "endpoints")
			require.Len(t, endpoints, 1)
			assert.Equal(t, []any{map[string]any{"action": "labeldrop", "regex": "container"}}, endpoints[0].(map[string]any)["relabelings"])
		}
	}
	for _, o := range decode(t, helmTemplate(t, "metrics.podMonitor.enabled=true")) {
		if o.GetKind() == "PodMonitor" {
			assert.Equal(t, "configwave-system", o.GetNamespace())
			_, found, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "namespaceSelector")
			assert.False(t, found)
		}
	}

	_, err = helm(t, "template", "x", filepath.Join(root, "charts", "configwave"), "--set", "hashFormat=md5")
	require.Error(t, err, "values.schema.json rejects a bad hash format")
	assert.Contains(t, err.Error(), "hashFormat")
}

// The chart and the Kustomize base grant exactly the same rules, and never a write to
// ConfigMaps or Secrets. The wave integration tests run under config/wave/clusterrole.yaml.
func TestChartRBACEqualsKustomizeRBAC(t *testing.T) {
	rules := func(objs []*unstructured.Unstructured) []rbacv1.PolicyRule {
		for _, o := range objs {
			if o.GetKind() == "ClusterRole" {
				var role rbacv1.ClusterRole
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role))
				return role.Rules
			}
		}
		t.Fatal("no ClusterRole")
		return nil
	}
	kust := rules(decode(t, kustomize(t, "config/wave")))
	assert.Equal(t, kust, rules(decode(t, helmTemplate(t))))

	// What shows every pod spec, or every namespace, is granted only when used: pods for the
	// crash-loop check (on by default), namespaces for --namespace-selector (cluster-wide).
	resources := func(rules []rbacv1.PolicyRule) []string {
		var out []string
		for _, r := range rules {
			out = append(out, r.Resources...)
		}
		return out
	}
	assert.Contains(t, resources(kust), "pods")
	assert.NotContains(t, resources(kust), "namespaces")
	assert.NotContains(t, resources(rules(decode(t, helmTemplate(t, "crashLoopDetection=false")))), "pods")
	selecting := decode(t, helmTemplate(t, "namespaceSelector={team:a}"))
	assert.Contains(t, resources(rules(selecting)), "namespaces")
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}}},
		rules(decode(t, kustomize(t, "config/wave-namespace-selector"))), "the Kustomize component for --namespace-selector")
	csiRules := []rbacv1.PolicyRule{{APIGroups: []string{"secrets-store.csi.x-k8s.io"}, Resources: []string{"secretproviderclasspodstatuses", "secretproviderclasses"}, Verbs: []string{"get", "list", "watch"}}}
	assert.NotContains(t, resources(kust), "secretproviderclasspodstatuses")
	assert.Equal(t, append(kust, csiRules...), rules(decode(t, helmTemplate(t, "enableCSIIntegration=true"))), "enableCSIIntegration: read access to the driver's objects")
	assert.Contains(t, string(helmTemplate(t, "enableCSIIntegration=true")), "--enable-csi-integration=true")
	assert.Equal(t, csiRules, rules(decode(t, kustomize(t, "config/wave-csi"))), "the Kustomize component for --enable-csi-integration")
	// cert-manager's and External Secrets' objects are read only where their CRDs are served
	// when the chart is rendered (helm install asks the cluster; helm template takes --api-versions).
	certRules := []rbacv1.PolicyRule{{APIGroups: []string{"cert-manager.io"}, Resources: []string{"certificates"}, Verbs: []string{"get", "list", "watch"}}}
	esoRules := []rbacv1.PolicyRule{{APIGroups: []string{"external-secrets.io"}, Resources: []string{"externalsecrets"}, Verbs: []string{"get", "list", "watch"}}}
	assert.NotContains(t, resources(kust), "certificates")
	withAPIs := func(apis ...string) []rbacv1.PolicyRule { return rules(decode(t, helmTemplateWithAPIs(t, apis))) }
	assert.Equal(t, append(slices.Clone(kust), certRules...), withAPIs("cert-manager.io/v1/Certificate"), "cert-manager installed: its Certificates, and no ExternalSecrets")
	assert.Equal(t, append(slices.Clone(kust), esoRules...), withAPIs("external-secrets.io/v1beta1/ExternalSecret"), "an older External Secrets, v1beta1 only")
	assert.Equal(t, append(append(slices.Clone(kust), certRules...), esoRules...), withAPIs("cert-manager.io/v1/Certificate", "external-secrets.io/v1/ExternalSecret"))
	assert.Equal(t, kust, rules(decode(t, helmTemplateWithAPIs(t, []string{"cert-manager.io/v1/Certificate"}, "waitForSecretWriters=false"))), "waitForSecretWriters=false grants neither")
	assert.Contains(t, string(helmTemplateWithAPIs(t, []string{"cert-manager.io/v1/Certificate"}, "waitForSecretWriters=false")), "--wait-for-secret-writers=false")
	assert.Contains(t, string(helmTemplateWithAPIs(t, []string{"cert-manager.io/v1/Certificate"}, "podAnnotations.a=b")), `configwave.io/secret-writers: "certificates.cert-manager.io"`,
		"the pod template names what is granted, so that a helm upgrade that grants more restarts wave")
	assert.Contains(t, string(helmTemplateWithAPIs(t, []string{"cert-manager.io/v1/Certificate"}, "podAnnotations.a=b")), "a: b", "beside the user's own")
	assert.NotContains(t, string(helmTemplate(t)), "configwave.io/secret-writers")
	assert.Equal(t, certRules, rules(decode(t, kustomize(t, "config/wave-cert-manager"))), "the Kustomize component for cert-manager")
	assert.Equal(t, esoRules, rules(decode(t, kustomize(t, "config/wave-external-secrets"))), "the Kustomize component for External Secrets")
	revisionRules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "controllerrevisions"}, Verbs: []string{"get"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "controllerrevisions"}, Verbs: []string{"list"}},
		{APIGroups: []string{"argoproj.io"}, Resources: []string{"rollouts/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "delete"}}}
	assert.Equal(t, append(kust, revisionRules...), rules(decode(t, helmTemplate(t, "revisions.enabled=true", "revisions.webhook.enabled=false"))), "revisions.enabled: create for the snapshots, a patch the policy narrows, nothing else")
	assert.Contains(t, kinds(decode(t, helmTemplate(t, "revisions.enabled=true", "revisions.webhook.enabled=false"))), "ValidatingAdmissionPolicy", "the policy that narrows the patch comes with it")
	assert.NotContains(t, string(helmTemplate(t, "revisions.enabled=true", "revisions.webhook.enabled=false")), "--config-revisions", "per workload, by its annotation")
	assert.Contains(t, string(helmTemplate(t, "revisions.enabled=true", "revisions.allWorkloads=true", "revisions.webhook.enabled=false")), "--config-revisions=true")
	assert.Equal(t, revisionRules, rules(decode(t, kustomize(t, "config/wave-revisions"))), "the Kustomize component for revisions")
	_, err := helm(t, "template", "x", filepath.Join(root, "charts", "configwave"), "--set", "rbac.clusterWide=false", "--set", "namespaces={team-a}", "--set", "namespaceSelector={team:a}")
	require.Error(t, err, "a namespaced install cannot read namespaces")
	assert.Contains(t, err.Error(), "namespaceSelector reads the labels of namespaces")

	// rbac.clusterWide=false: no ClusterRole; the same rules in a Role in each namespace.
	scoped := decode(t, helmTemplate(t, "rbac.clusterWide=false", "namespaces={team-a,team-b}"))
	assert.NotContains(t, kinds(scoped), "ClusterRole")
	assert.NotContains(t, kinds(scoped), "ClusterRoleBinding")
	perNamespace := map[string][]rbacv1.PolicyRule{}
	for _, o := range scoped {
		if o.GetKind() == "Role" && (o.GetNamespace() == "team-a" || o.GetNamespace() == "team-b") {
			var role rbacv1.Role
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role))
			perNamespace[o.GetNamespace()] = role.Rules
		}
	}
	assert.Equal(t, map[string][]rbacv1.PolicyRule{"team-a": kust, "team-b": kust}, perNamespace)
	_, err = helm(t, "template", "x", filepath.Join(root, "charts", "configwave"), "--set", "rbac.clusterWide=false")
	require.Error(t, err, "a namespace-scoped install needs its namespaces")
	assert.Contains(t, err.Error(), "list them in namespaces")
	for _, r := range kust {
		for _, res := range r.Resources {
			if res == "configmaps" || res == "secrets" {
				assert.ElementsMatch(t, []string{"get", "list", "watch"}, r.Verbs)
			}
		}
	}
}

func TestExamplesApply(t *testing.T) {
	testcluster.Need(t, cluster)
	files, err := filepath.Glob(filepath.Join(root, "examples", "*", "manifest.yaml"))
	require.NoError(t, err)
	require.Len(t, files, 7)
	for _, f := range files {
		t.Run(filepath.Base(filepath.Dir(f)), func(t *testing.T) {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			_, err = os.Stat(filepath.Join(filepath.Dir(f), "README.md"))
			require.NoError(t, err, "every example has a README")
			objs := decode(t, b)
			applyDryRun(t, objs, "default")
			assertRestricted(t, objs)
			checkAppConfigs(t, objs)
			// The reloader's Events name its pod by POD_NAME and POD_UID: kubectl describe pod
			// shows only Events whose UID is the pod's.
			assert.Equal(t, strings.Count(string(b), "name: POD_NAME,"), strings.Count(string(b), "name: POD_UID,"), "POD_UID beside every POD_NAME")
			if filepath.Base(filepath.Dir(f)) == "prometheus-volume" {
				// The file-mode example reads no API: no RBAC, no token in the pod.
				assert.Contains(t, string(b), "automountServiceAccountToken: false")
				assert.NotRegexp(t, `kind: (Role|ClusterRole|RoleBinding|ServiceAccount)\b`, string(b))
				assert.Contains(t, string(b), "- --volume-dir=/etc/config\n            - --webhook-url=http://127.0.0.1:9090/-/reload\n",
					"configmap-reload's own arguments")
			}
		})
	}
}

// The alerts: promtool accepts the rule file and its unit tests pass (each alert fires on the
// series that should raise it, and not before); the chart's PrometheusRule carries exactly
// those groups.
func TestPrometheusRules(t *testing.T) {
	promtool := testcluster.NeedProgram(t, "promtool", "prometheus")
	rules := filepath.Join(root, "charts", "configwave", "files", "prometheus-rules.yaml")
	out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput()
	require.NoError(t, err, string(out))
	cmd := exec.Command(promtool, "test", "rules", "prometheus-rules_test.yaml")
	cmd.Dir = "testdata"
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, string(out))

	var file map[string]any
	b, err := os.ReadFile(rules)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &file))
	var rule *unstructured.Unstructured
	for _, o := range decode(t, helmTemplate(t, "metrics.prometheusRule.enabled=true", "metrics.prometheusRule.labels.release=kube-prometheus-stack")) {
		if o.GetKind() == "PrometheusRule" {
			rule = o
		}
	}
	require.NotNil(t, rule)
	assert.Equal(t, "kube-prometheus-stack", rule.GetLabels()["release"], "the labels its ruleSelector matches")
	spec, _, _ := unstructured.NestedMap(rule.Object, "spec")
	assert.Equal(t, file["groups"], spec["groups"])
	assert.NotContains(t, kinds(decode(t, helmTemplate(t))), "PrometheusRule", "off by default: it needs the operator's CRDs")
}

// Every top-level value of the chart is in docs/install.md's table, so that a new value is
// never one only values.yaml knows of.
func TestChartValuesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "charts", "configwave", "values.yaml"))
	require.NoError(t, err)
	var values map[string]any
	require.NoError(t, yaml.Unmarshal(b, &values))
	doc, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	require.NoError(t, err)
	for key := range values {
		assert.Contains(t, string(doc), "`"+key, "docs/install.md does not name the chart value %s", key)
	}
}
