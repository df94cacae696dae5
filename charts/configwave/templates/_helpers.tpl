{{- define "configwave.name" -}}{{ default (printf "%s-wave" .Release.Name) .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "configwave.serviceAccountName" -}}{{ default (include "configwave.name" .) .Values.serviceAccount.name }}{{- end -}}
{{- define "configwave.labels" -}}
app.kubernetes.io/name: configwave-wave
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}
{{- define "configwave.selector" -}}
app.kubernetes.io/name: configwave-wave
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* wave's RBAC rules, the same as config/wave/clusterrole.yaml (a test keeps them equal). */}}
{{/* "true" when the chart serves and registers the revisions webhook; it needs a certificate. */}}
{{- define "configwave.revisionsWebhook" -}}
{{- if and .Values.revisions.enabled .Values.revisions.webhook.enabled -}}
{{- if not .Values.revisions.webhook.makeCertificate -}}
{{- if not .Values.revisions.webhook.certSecret -}}
{{- fail "revisions.webhook.enabled needs revisions.webhook.certSecret: a Secret in the release's namespace with tls.crt and tls.key for the webhook's Service (a cert-manager Certificate's secretName, with its CA injected by revisions.webhook.annotations; docs/revisions.md); or revisions.webhook.makeCertificate=true, for wave to make and renew it; or set revisions.webhook.enabled=false and register the webhook yourself" -}}
{{- end -}}
{{- if not (or .Values.revisions.webhook.caBundle .Values.revisions.webhook.annotations) -}}
{{- fail "revisions.webhook needs the CA that signed its certificate: revisions.webhook.caBundle (base64 PEM), or revisions.webhook.annotations with cert-manager.io/inject-ca-from: NAMESPACE/CERTIFICATE for cert-manager's CA injector" -}}
{{- end -}}
{{- end -}}
true
{{- end -}}
{{- end -}}
{{/* The webhook's certificate is mounted from a Secret (not made by wave). */}}
{{- define "configwave.webhookCertMounted" -}}
{{- if and (include "configwave.revisionsWebhook" .) (not .Values.revisions.webhook.makeCertificate) -}}
true
{{- end -}}
{{- end -}}
{{/* The Secret writers wave reads (waitForSecretWriters), comma-joined: those whose CRDs the
cluster serves when the chart is rendered. */}}
{{- define "configwave.secretWriters" -}}
{{- $w := list -}}
{{- if .Values.waitForSecretWriters -}}
{{- if .Capabilities.APIVersions.Has "cert-manager.io/v1/Certificate" -}}
{{- $w = append $w "certificates.cert-manager.io" -}}
{{- end -}}
{{- if or (.Capabilities.APIVersions.Has "external-secrets.io/v1/ExternalSecret") (.Capabilities.APIVersions.Has "external-secrets.io/v1beta1/ExternalSecret") -}}
{{- $w = append $w "externalsecrets.external-secrets.io" -}}
{{- end -}}
{{- end -}}
{{- join "," $w -}}
{{- end -}}

{{- define "configwave.rules" -}}
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets", "daemonsets"]
  verbs: ["get", "list", "watch", "patch"]
# CronJobs: a config change starts one Job from the CronJob's template
- apiGroups: ["batch"]
  resources: ["cronjobs"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["create"]
# Argo Rollouts, used where their CustomResourceDefinition is served
- apiGroups: ["argoproj.io"]
  resources: ["rollouts"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: [""]
  resources: ["configmaps", "secrets"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- if .Values.crashLoopDetection }}
# to see the new pods of a config rollout crash-loop, and say so at once (crashLoopDetection;
# listing pods shows every pod spec of the namespace); only the newest revision's pods count
# (its ReplicaSet or ControllerRevision)
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
- apiGroups: ["apps"]
  resources: ["replicasets", "controllerrevisions"]
  verbs: ["list"]
{{- end }}
{{- $writers := include "configwave.secretWriters" . }}
{{- if contains "certificates.cert-manager.io" $writers }}
# cert-manager is installed: a rollout of a change of a Secret a Certificate writes waits until
# the Certificate says it is done (waitForSecretWriters)
- apiGroups: ["cert-manager.io"]
  resources: ["certificates"]
  verbs: ["get", "list", "watch"]
{{- end }}
{{- if contains "externalsecrets.external-secrets.io" $writers }}
# External Secrets is installed: a rollout of a change of a Secret an ExternalSecret writes
# waits until the ExternalSecret says it synced (waitForSecretWriters)
- apiGroups: ["external-secrets.io"]
  resources: ["externalsecrets"]
  verbs: ["get", "list", "watch"]
{{- end }}
{{- if .Values.enableCSIIntegration }}
# the versions pods mounted through the Secrets Store CSI driver, and the classes' annotations
# (enableCSIIntegration)
- apiGroups: ["secrets-store.csi.x-k8s.io"]
  resources: ["secretproviderclasspodstatuses", "secretproviderclasses"]
  verbs: ["get", "list", "watch"]
{{- end }}
{{- if .Values.revisions.enabled }}
# snapshots of ConfigMaps and Secrets and each revision's index (a ConfigMap): created once,
# then patched only to add an owner reference to a revision that uses them, which the
# ValidatingAdmissionPolicy beside this enforces; never deleted by wave: Kubernetes' garbage
# collector removes them with their last revision (revisions)
- apiGroups: [""]
  resources: ["configmaps", "secrets"]
  verbs: ["create", "patch"]
# the revision a new pod names as its owner, read to check that it is one of the pod's config
# before it owns the pod's snapshots
- apiGroups: ["apps"]
  resources: ["replicasets", "controllerrevisions"]
  verbs: ["get"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get"]
# a new pod's ServiceAccount: one that enforces mountable secrets refuses a pod that names a
# snapshot of a Secret, so that pod reads its Secrets live
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get"]
# configwave.io/rollback-on-failure: a Deployment's ReplicaSets and a StatefulSet's or
# DaemonSet's ControllerRevisions, to undo it to the one before, and an Argo Rollout's abort;
# listed too to tell an undo from a template put in without wave's annotation (kubectl replace)
- apiGroups: ["apps"]
  resources: ["replicasets", "controllerrevisions"]
  verbs: ["list"]
- apiGroups: ["argoproj.io"]
  resources: ["rollouts/status"]
  verbs: ["patch"]
# ... and, after the undo of a StatefulSet of OrderedReady pods, its pod that is not ready on
# the failed config, which its controller would wait for forever; a ValidatingAdmissionPolicy
# lets wave delete no other pod
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "delete"]
{{- end }}
{{- if or .Values.namespaceSelector .Values.namespaceRolloutWindows }}
# their labels, for Stakater Reloader's --namespace-selector (namespaceSelector), and their
# configwave.io/rollout-window, a window for all their workloads (namespaceRolloutWindows);
# cluster-wide only: a namespace is not in a namespace
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get", "list", "watch"]
{{- end }}
{{- end }}

{{/* The scrape settings a ServiceMonitor endpoint and a PodMonitor endpoint share. */}}
{{- define "configwave.scrapeEndpoint" -}}
interval: {{ .interval }}
{{- with .scrapeTimeout }}
scrapeTimeout: {{ . }}
{{- end }}
{{- with .relabelings }}
relabelings: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .metricRelabelings }}
metricRelabelings: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
