"""Pinned versions of every upstream component the testbed builds or reads.

This is the one place versions are chosen.  Binaries are cached under
``$XDG_CACHE_HOME/model-serving-addon/bin/<tool>-<version>/`` so a change
here rebuilds exactly what changed and nothing else.
"""

from __future__ import annotations

KUBERNETES = "v1.34.4"
"""kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes)."""

ETCD = "v3.6.6"
"""etcd server (go.etcd.io/etcd/server/v3, whose main package calls etcdmain)."""

KWOK = "v0.7.0"
"""Fake kubelets: pods on fake nodes become Running and Ready."""

OCM = "v1.2.1"
"""open-cluster-management.io/ocm: work, placement, registration, addon binaries."""

OCM_API = "v1.2.0"
"""open-cluster-management.io/api: OCM CRDs (the version OCM above requires)."""

HELM = "v3.19.0"
"""helm.sh/helm/v3 cmd/helm, for chart checks."""

KSERVE = "v0.17.0"
"""github.com/kserve/kserve: CRDs, config overlays, controller manager."""

MODELMESH = "v0.12.0"
"""github.com/kserve/modelmesh-serving: last release (the project is archived)."""

PROMETHEUS_OPERATOR = "v0.85.0"
"""github.com/prometheus-operator/prometheus-operator: ServiceMonitor/PodMonitor CRDs."""
