{{/* Common names and labels. */}}
{{- define "msa.name" -}}model-serving{{- end -}}
{{- define "msa.manager" -}}model-serving-addon-manager{{- end -}}
{{- define "msa.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}
{{/* manager.policy.targetNamespaces as --target-namespaces takes it: hub=a,b;hub2=c */}}
{{- define "msa.targetNamespaces" -}}
{{- $out := list -}}
{{- range $hub, $spokes := .Values.manager.policy.targetNamespaces -}}
{{- $out = append $out (printf "%s=%s" $hub (join "," $spokes)) -}}
{{- end -}}
{{- join ";" $out -}}
{{- end -}}
{{/* Hub namespaces whose works run as a tenant executor the manager must be let to name:
     the keys of targetNamespaces whose targets are explicit, and manager.secretNamespaces. */}}
{{- define "msa.executorTenants" -}}
{{- $out := list -}}
{{- range $hub, $spokes := .Values.manager.policy.targetNamespaces -}}
{{- if and (ne $hub "*") (not (has "*" $spokes)) -}}
{{- $out = append $out $hub -}}
{{- end -}}
{{- end -}}
{{- $wildcard := index .Values.manager.policy.targetNamespaces "*" | default list -}}
{{- if not (has "*" $wildcard) -}}
{{- range .Values.manager.secretNamespaces -}}
{{- if not (hasKey $.Values.manager.policy.targetNamespaces .) -}}
{{- $out = append $out . -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $out | uniq | sortAlpha | join " " -}}
{{- end -}}
{{- define "msa.labels" -}}
app.kubernetes.io/name: model-serving-addon
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* The spec of the add-on's default AddOnDeploymentConfig, less the manager's verify key. */}}
{{- define "msa.agentConfigSpec" -}}
agentInstallNamespace: {{ .Values.agent.installNamespace }}
customizedVariables:
  - name: LOG_LEVEL
    value: {{ upper .Values.agent.logLevel | quote }}
  - name: IMAGE
    value: {{ include "msa.image" . | quote }}
  - name: METRICS_PORT
    value: {{ .Values.agent.metricsPort | quote }}
  # Whether the agent accepts devFlags: manager.policy.allowDevFlags again, on the spoke.
  - name: ALLOW_DEV_FLAGS
    value: {{ .Values.manager.policy.allowDevFlags | toString | quote }}
resourceRequirements:
  - containerID: "deployments:model-serving-agent:agent"
    resources: {{- toYaml .Values.agent.resources | nindent 6 }}
{{- end -}}
