{{- define "configwave.name" -}}{{ .Release.Name }}-wave{{- end -}}
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
