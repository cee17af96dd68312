{{/* Common names and labels. */}}
{{- define "msa.name" -}}model-serving{{- end -}}
{{- define "msa.manager" -}}model-serving-addon-manager{{- end -}}
{{- define "msa.image" -}}{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{- end -}}
{{- define "msa.labels" -}}
app.kubernetes.io/name: model-serving-addon
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}
