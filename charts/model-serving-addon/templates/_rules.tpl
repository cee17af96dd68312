{{/* Alert rules, shared by the PrometheusRule and ACM's thanos-ruler custom rules. */}}
{{- define "msa.alertGroups" -}}
- name: model-serving
  rules:
    - alert: ModelServingAgentMetricsAbsent
      expr: absent(model_serving_platform_ready)
      for: 15m
      labels: {severity: warning}
      annotations:
        summary: 'No model-serving agent reports metrics.'
        description: 'The add-on is unavailable or its metrics are not federated (check the ManagedClusterAddOn and the allowlist).'
    - alert: ModelServingPlatformNotAvailable
      expr: max by (cluster, platform) (model_serving_platform_ready) == 0
      for: 15m
      labels: {severity: warning}
      annotations:
        summary: 'Serving platform {{ "{{ $labels.platform }}" }} is not available on {{ "{{ $labels.cluster }}" }}.'
        description: 'Check the ServingPlatform status on that cluster and the ModelServing on the hub.'
    - alert: ModelServingModelNotReady
      expr: sum by (kind, namespace, name) (model_serving_intent_clusters_ready) < sum by (kind, namespace, name) (model_serving_intent_clusters_desired)
      for: {{ .Values.observability.modelNotReadyMinutes }}m
      labels: {severity: warning}
      annotations:
        summary: '{{ "{{ $labels.kind }} {{ $labels.namespace }}/{{ $labels.name }}" }} is not ready on every cluster.'
        description: 'The per-cluster status of the intent on the hub (kubectl get -o yaml) gives the reason per cluster.'
    - alert: ModelServingManifestWorkErrors
      expr: sum by (kind, reason) (rate(model_serving_manifestwork_errors_total[10m])) > 0
      for: 10m
      labels: {severity: warning}
      annotations:
        summary: 'The manager fails to write ManifestWorks ({{ "{{ $labels.reason }}" }}).'
        description: 'See the manager log and the Degraded condition of the intents.'
{{- end -}}
