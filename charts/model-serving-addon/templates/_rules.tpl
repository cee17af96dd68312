{{/* Per-cluster aggregates of the histograms: what the hub gets instead of their buckets.
     ACM's metrics collector evaluates them on each cluster (the allowlist's recording_rules)
     and federates the results labelled with the cluster; the PrometheusRule records them for
     a hub Prometheus that has the raw series. Each keeps the labels the dashboard and alerts
     group by, so a histogram of B buckets costs one series per quantile there, not B. No
     double quote in an expression: ACM's collector takes each as a JSON string it builds
     without escaping (PromQL's single quotes serve). */}}
{{- define "msa.recordingRules" -}}
- record: model_serving:agent_reconcile_duration_seconds:p95
  expr: histogram_quantile(0.95, sum by (cluster, kind, le) (rate(model_serving_agent_reconcile_duration_seconds_bucket[5m])))
- record: model_serving:reconcile_duration_seconds:p95
  expr: histogram_quantile(0.95, sum by (cluster, kind, le) (rate(model_serving_reconcile_duration_seconds_bucket[5m])))
- record: model_serving:fanout_duration_seconds:p95
  expr: histogram_quantile(0.95, sum by (cluster, kind, le) (rate(model_serving_fanout_duration_seconds_bucket[5m])))
{{- range $q := list "0.5" "0.99" }}
{{- $name := ternary "p50" "p99" (eq $q "0.5") }}
- record: model_serving:request_predict_seconds:{{ $name }}
  expr: histogram_quantile({{ $q }}, sum by (cluster, namespace, inferenceservice, le) (rate(request_predict_seconds_bucket[5m])))
- record: model_serving:rest_infer_duration_seconds:{{ $name }}
  expr: histogram_quantile({{ $q }}, sum by (cluster, namespace, inferenceservice, le) (rate(rest_server_request_duration_seconds_bucket{path=~'.*/infer'}[5m])))
{{- end }}
{{- end -}}

{{/* Alert rules, shared by the PrometheusRule and ACM's thanos-ruler custom rules.
     Tested with promtool (tests/data/alert_rules_test.yaml) and live on the testbed. */}}
{{- define "msa.alertGroups" -}}
- name: model-serving
  rules:
    - alert: ModelServingAgentMetricsAbsent
      expr: absent(model_serving_agent_up)
      for: 15m
      labels: {severity: warning}
      annotations:
        {{- with $.Values.observability.runbookBaseUrl }}
        runbook_url: '{{ . }}#modelservingagentmetricsabsent'
        {{- end }}
        summary: 'No model-serving agent reports metrics.'
        description: 'The add-on is unavailable on every cluster or its metrics are not federated (check the ManagedClusterAddOns and the allowlist).'
    - alert: ModelServingAgentUnavailable
      expr: max by (managed_cluster) (model_serving_addon_available) == 0
      for: 10m
      labels: {severity: warning}
      annotations:
        {{- with $.Values.observability.runbookBaseUrl }}
        runbook_url: '{{ . }}#modelservingagentunavailable'
        {{- end }}
        summary: 'The model-serving agent on {{ "{{ $labels.managed_cluster }}" }} is unavailable.'
        description: 'OCM marks the add-on unavailable there (its agent stopped renewing its lease): models keep serving, but nothing changes and nothing is reported until the agent is back. Check the agent pod on that cluster.'
    - alert: ModelServingAgentMetricsMissing
      expr: max by (managed_cluster) (model_serving_addon_available == 1) unless on (managed_cluster) label_replace(max by (cluster) (model_serving_agent_up), "managed_cluster", "$1", "cluster", "(.+)")
      for: 10m
      labels: {severity: warning}
      annotations:
        {{- with $.Values.observability.runbookBaseUrl }}
        runbook_url: '{{ . }}#modelservingagentmetricsmissing'
        {{- end }}
        summary: 'No metrics from the model-serving agent on {{ "{{ $labels.managed_cluster }}" }}.'
        description: 'OCM reports the add-on available there, but its agent''s metrics do not reach the hub: the agent stopped, or its scrape (ServiceMonitor, user-workload monitoring) or federation (allowlist) is broken on that cluster.'
    - alert: ModelServingPlatformNotAvailable
      expr: max by (cluster, platform) (model_serving_platform_ready) == 0
      for: 15m
      labels: {severity: warning}
      annotations:
        {{- with $.Values.observability.runbookBaseUrl }}
        runbook_url: '{{ . }}#modelservingplatformnotavailable'
        {{- end }}
        summary: 'Serving platform {{ "{{ $labels.platform }}" }} is not available on {{ "{{ $labels.cluster }}" }}.'
        description: 'Only the platform a cluster is asked to run is measured. Check the ServingPlatform status on that cluster and the ModelServing on the hub.'
    - alert: ModelServingComponentNotAvailable
      expr: max by (cluster, component) (model_serving_component_ready) == 0
      for: 15m
      labels: {severity: warning}
      annotations:
        {{- with $.Values.observability.runbookBaseUrl }}
        runbook_url: '{{ . }}#modelservingcomponentnotavailable'
        {{- end }}
        summary: 'Stack component {{ "{{ $labels.component }}" }} is not available on {{ "{{ $labels.cluster }}" }}.'
        description: 'A controller Deployment of the serving stack has no available replica; see its pods on that cluster.'
    - alert: ModelServingModelLoadFailed
      expr: max by (cluster, model_namespace, name, reason) (model_serving_model_load_failed) == 1
      for: 5m
      labels: {severity: warning}
      annotations:
        {{- with $.Values.observability.runbookBaseUrl }}
        runbook_url: '{{ . }}#modelservingmodelloadfailed'
        {{- end }}
        summary: 'Model {{ "{{ $labels.model_namespace }}/{{ $labels.name }}" }} failed to load on {{ "{{ $labels.cluster }}" }} ({{ "{{ $labels.reason }}" }}).'
        description: 'KServe reports the model will not load (status.modelStatus of the InferenceService on that cluster); docs/troubleshooting.md has the reason.'
    - alert: ModelServingModelNotReady
      expr: sum by (kind, intent_namespace, name) (model_serving_intent_clusters_ready) < sum by (kind, intent_namespace, name) (model_serving_intent_clusters_desired)
      for: {{ .Values.observability.modelNotReadyMinutes }}m
      labels: {severity: warning}
      annotations:
        {{- with $.Values.observability.runbookBaseUrl }}
        runbook_url: '{{ . }}#modelservingmodelnotready'
        {{- end }}
        summary: '{{ "{{ $labels.kind }} {{ $labels.intent_namespace }}/{{ $labels.name }}" }} is not ready on every cluster.'
        description: 'The per-cluster status of the intent on the hub (kubectl get -o yaml) gives the reason per cluster.'
    - alert: ModelServingClusterStale
      expr: max by (managed_cluster) (model_serving_cluster_stale) > 0
      for: 10m
      labels: {severity: warning}
      annotations:
        {{- with $.Values.observability.runbookBaseUrl }}
        runbook_url: '{{ . }}#modelservingclusterstale'
        {{- end }}
        summary: 'Cluster {{ "{{ $labels.managed_cluster }}" }} does not report on {{ "{{ $value }}" }} intent(s).'
        description: 'Its work agent has not picked up new ManifestWorks for longer than the manager''s --stale-after, or OCM marks it unavailable; check the ManagedCluster and its agents.'
    - alert: ModelServingManifestWorkErrors
      expr: sum by (kind, reason) (rate(model_serving_manifestwork_errors_total[10m])) > 0
      for: 10m
      labels: {severity: warning}
      annotations:
        {{- with $.Values.observability.runbookBaseUrl }}
        runbook_url: '{{ . }}#modelservingmanifestworkerrors'
        {{- end }}
        summary: 'The manager fails to write ManifestWorks ({{ "{{ $labels.reason }}" }}).'
        description: 'See the manager log and the Degraded condition of the intents.'
    - alert: ModelServingRolloutRolledBack
      expr: max by (kind, intent_namespace, name) (model_serving_rollout_phase{phase=~"RolledBack|Halted"}) == 1
      for: 1m
      labels: {severity: warning}
      annotations:
        {{- with $.Values.observability.runbookBaseUrl }}
        runbook_url: '{{ . }}#modelservingrolloutrolledback'
        {{- end }}
        summary: '{{ "{{ $labels.kind }} {{ $labels.intent_namespace }}/{{ $labels.name }}" }}: its last change failed a rollout step and is not in effect.'
        description: 'status.rollout.message names the cluster, the gate and what it saw; the clusters serve the last good revision (RolledBack) or stay where the rollout halted. Change the spec to try again.'
    - alert: ModelServingModelErrorRatioHigh
      expr: sum by (cluster, namespace, inferenceservice) (rate(model_infer_request_failure_total[5m])) / ((sum by (cluster, namespace, inferenceservice) (rate(model_infer_request_success_total[5m])) + sum by (cluster, namespace, inferenceservice) (rate(model_infer_request_failure_total[5m]))) or sum by (cluster, namespace, inferenceservice) (rate(model_infer_request_success_total[5m])) or sum by (cluster, namespace, inferenceservice) (rate(model_infer_request_failure_total[5m]))) > {{ .Values.observability.modelErrorRatio }}
      for: {{ .Values.observability.modelAlertMinutes }}m
      labels: {severity: warning}
      annotations:
        {{- with $.Values.observability.runbookBaseUrl }}
        runbook_url: '{{ . }}#modelservingmodelerrorratiohigh'
        {{- end }}
        summary: 'Model {{ "{{ $labels.namespace }}/{{ $labels.inferenceservice }}" }} fails {{ "{{ $value | humanizePercentage }}" }} of its inference requests on {{ "{{ $labels.cluster }}" }}.'
        description: 'From the model server''s own counters (MLServer''s model_infer_request_failure_total), over 5 minutes. The predictor pods'' logs on that cluster say why; a progressive rollout''s metric gate can hold such a revision back.'
    - alert: ModelServingModelLatencyHigh
      expr: (model_serving:request_predict_seconds:p99 > {{ .Values.observability.modelLatencyP99Seconds }}) or (model_serving:rest_infer_duration_seconds:p99 > {{ .Values.observability.modelLatencyP99Seconds }})
      for: {{ .Values.observability.modelAlertMinutes }}m
      labels: {severity: warning}
      annotations:
        {{- with $.Values.observability.runbookBaseUrl }}
        runbook_url: '{{ . }}#modelservingmodellatencyhigh'
        {{- end }}
        summary: 'Model {{ "{{ $labels.namespace }}/{{ $labels.inferenceservice }}" }} answers in {{ "{{ $value | humanizeDuration }}" }} at p99 on {{ "{{ $labels.cluster }}" }}.'
        description: 'The p99 latency over 5 minutes from the model server''s own histogram (KServe''s request_predict_seconds, MLServer''s REST request duration; the per-cluster aggregates model_serving:*:p99) exceeds observability.modelLatencyP99Seconds. Check the predictor pods'' CPU and replicas on that cluster.'
{{- end -}}
