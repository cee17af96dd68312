{{/*
The agent's rights on its managed cluster: exactly the kinds the KServe and ModelMesh bundles
contain, plus its own kinds. No wildcards. `bind` and `escalate` on RBAC kinds are needed because
the agent installs the stacks' own ClusterRoles and bindings.
*/}}
{{- define "msa.agentClusterRole" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: model-serving-agent
rules:
  - apiGroups: [modelserving.opendatahub.io]
    resources: [servingplatforms, sealedstorageconnections]
    verbs: [get, list, watch, patch, update]
  - apiGroups: [modelserving.opendatahub.io]
    resources: [servingplatforms/status, sealedstorageconnections/status, servingplatforms/finalizers, sealedstorageconnections/finalizers]
    verbs: [get, patch, update]
  - apiGroups: [apiextensions.k8s.io]
    resources: [customresourcedefinitions]
    verbs: [get, list, watch, create, patch, update, delete]
  - apiGroups: [admissionregistration.k8s.io]
    resources: [mutatingwebhookconfigurations, validatingwebhookconfigurations]
    verbs: [get, list, watch, create, patch, update, delete]
  - apiGroups: [""]
    resources: [namespaces, configmaps, secrets, services, serviceaccounts]
    verbs: [get, list, watch, create, patch, update, delete]
  - apiGroups: [""]
    resources: [pods, endpoints]
    verbs: [get, list, watch]
  # Namespaced kinds Kubernetes' view role (bound too) leaves out: read, to know what a
  # namespace holds before deleting it.
  - apiGroups: [""]
    resources: [podtemplates]
    verbs: [get, list]
  - apiGroups: [storage.k8s.io]
    resources: [csistoragecapacities]
    verbs: [get, list]
  - apiGroups: [resource.k8s.io]
    resources: [resourceclaims, resourceclaimtemplates]
    verbs: [get, list]
  - apiGroups: ["", events.k8s.io]
    resources: [events]
    verbs: [create, patch]
  - apiGroups: [apps]
    resources: [deployments, statefulsets]
    verbs: [get, list, watch, create, patch, update, delete]
  - apiGroups: [autoscaling]
    resources: [horizontalpodautoscalers]
    verbs: [get, list, watch, create, patch, update, delete]
  - apiGroups: [policy]
    resources: [poddisruptionbudgets]
    verbs: [get, list, watch, create, patch, update, delete]
  - apiGroups: [networking.k8s.io]
    resources: [networkpolicies]
    verbs: [get, list, watch, create, patch, update, delete]
  - apiGroups: [rbac.authorization.k8s.io]
    resources: [clusterroles, clusterrolebindings, roles, rolebindings]
    verbs: [get, list, watch, create, patch, update, delete, bind, escalate]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [get, list, watch, create, patch, update]
  - apiGroups: [serving.kserve.io]
    resources: [inferenceservices, servingruntimes, clusterservingruntimes, trainedmodels, inferencegraphs, predictors, clusterstoragecontainers, localmodelcaches, localmodelnodes, localmodelnodegroups]
    verbs: [get, list, watch, create, patch, update, delete]
  - apiGroups: [monitoring.coreos.com]
    resources: [servicemonitors, podmonitors]
    verbs: [get, list, watch, create, patch, update, delete]
  - apiGroups: [cert-manager.io]
    resources: [certificates, issuers]
    verbs: [get, list, watch, create, patch, update, delete]
{{- end -}}

{{/*
What OCM's work agent needs, beyond the klusterlet's own roles, to apply the add-on's
ManifestWorks: exactly the kinds the manager renders. The klusterlet aggregates every
ClusterRole labelled aggregate-to-work into the work agent's role. The identity ConfigMap is
only read (ReadOnly work); the `admin` ClusterRole the klusterlet binds already covers that.
*/}}
{{- define "msa.workAgentClusterRole" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: open-cluster-management:model-serving:work
  labels:
    open-cluster-management.io/aggregate-to-work: "true"
rules:
  - apiGroups: [modelserving.opendatahub.io]
    resources: [servingplatforms, sealedstorageconnections]
    verbs: [get, list, watch, create, patch, update, delete]
  - apiGroups: [serving.kserve.io]
    resources: [servingruntimes, inferenceservices]
    verbs: [get, list, watch, create, patch, update, delete]
  # A model's Route (spec.exposure); custom-host lets a Route carry the host the intent names.
  - apiGroups: [route.openshift.io]
    resources: [routes]
    verbs: [get, list, watch, create, patch, update, delete]
  - apiGroups: [route.openshift.io]
    resources: [routes/custom-host]
    verbs: [create, update]
  # A model's MCS ServiceExport (spec.endpoint.serviceExport) on the clusters serving it.
  - apiGroups: [multicluster.x-k8s.io]
    resources: [serviceexports]
    verbs: [get, list, watch, create, patch, update, delete]
{{- end -}}
