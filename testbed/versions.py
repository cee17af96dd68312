"""Pinned versions of every upstream component the testbed builds or reads.

This is the one place the testbed's versions are chosen; the serving stacks' versions are
the agent's (``addon_agent.stacks``), imported here.  Binaries are cached under
``$XDG_CACHE_HOME/model-serving-addon/bin/<tool>-<version>/`` so a change
here rebuilds exactly what changed and nothing else.
"""

from __future__ import annotations

from addon_agent.stacks import KSERVE_VERSION, KSERVE_VERSIONS, MODELMESH_VERSION

KUBERNETES = "v1.34.12"
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

KSERVE = KSERVE_VERSION
"""github.com/kserve/kserve: CRDs, controller manager (the agent's pin, not repeated here)."""

KSERVE_ALL = KSERVE_VERSIONS
"""Every KServe release the agent carries: the testbed builds each one's controller (an
upgrade runs them in turn)."""

MODELMESH = MODELMESH_VERSION
"""github.com/kserve/modelmesh-serving: CRDs (the agent's pin: the last release)."""

PROMETHEUS = "v0.316.0"
"""github.com/prometheus/prometheus (Prometheus 3.16.0: Go module versions are v0.3MM.P):
``prometheus`` for the testbed's per-spoke and hub servers, ``promtool`` for rule tests."""

KUBE_RBAC_PROXY = "v0.18.0"
"""github.com/brancz/kube-rbac-proxy: the sidecar KServe's bundle puts in front of its
controller's metrics (the bundle's image tag; a test checks they agree)."""

OPENSHIFT_API = "v0.0.0-20251125174858-5cf710f68a92"
"""github.com/openshift/api: the Route CRD the spokes serve, as OpenShift does (the pseudo-version
OCM above requires; the module has no release tags)."""

MCS_API = "v0.3.0"
"""sigs.k8s.io/mcs-api: the Multi-Cluster Services CRDs (ServiceExport, ServiceImport) a spoke
serves where an MCS implementation (Submariner, Cilium ClusterMesh) would install them."""

INFERENCE_EXTENSION = "v1.5.0"
"""sigs.k8s.io/gateway-api-inference-extension: the InferencePoolImport CRD a hub serves where a
multi-cluster inference gateway would read it."""

VERSITYGW = "v1.8.0"
"""github.com/versity/versitygw: the testbed's S3 server (its posix backend), holding the models
the storage initializer downloads. Apache-2.0; MinIO, the obvious other choice, is under the
AGPL, which this project does not take in."""

CADDY = "v2.11.9"
"""github.com/caddyserver/caddy/v2: the ingress of each spoke of a fleet with a data plane
(routes by Host to the predictor pods' processes, changed through its admin API). Apache-2.0."""

HELM_DOCS = "v1.14.2"
"""github.com/norwoodj/helm-docs: the chart's README, generated from the comments of its
values.yaml (``make chart-docs``; a test regenerates it and compares)."""

PROMETHEUS_OPERATOR = "v0.85.0"
"""github.com/prometheus-operator/prometheus-operator: ServiceMonitor/PodMonitor CRDs."""

OPERATOR_FRAMEWORK_API = "v0.34.0"
"""github.com/operator-framework/api: the OLM bundle's validators (``operator-verify``, with the
validation library ``operator-sdk bundle validate`` runs; operator-sdk itself is not served by
the module proxy here)."""

DISTRIBUTION = "v3.0.0"
"""github.com/distribution/distribution/v3: the OCI registry the release test pushes the image
and the chart to (built only for that test)."""

OPERATOR_REGISTRY = "v1.57.0"
"""github.com/operator-framework/operator-registry: the kinds a bundle may carry besides its
ClusterServiceVersion (``pkg/lib/bundle/supported_resources.go``), read from the module cache."""

# --------------------------------------------------------------- the data plane (Python)
# The real model servers of the testbed's data plane run from PyPI packages, each server in a
# virtualenv of its own under the cache (testbed/dataplane/envs.py): KServe's releases require
# starlette >= 1.0.1 while MLServer's pinned FastAPI requires starlette < 0.47, so the two
# cannot share one environment, and neither may enter the product's.

KSERVE_PYTHON = KSERVE.removeprefix("v")
"""``kserve`` and ``kserve-storage`` on PyPI: the Python release of the carried controller."""

MLSERVER = "1.7.1"
"""``mlserver`` and ``mlserver-sklearn`` (the server of KServe's ``kserve-mlserver`` runtime)."""

SCIKIT_LEARN = "1.9.1"
"""scikit-learn in both servers' environments: the testbed's iris model is trained with it
and loaded by both, so they must agree (a pickle of another release warns or fails)."""

MLSERVER_UVLOOP = "0.21.0"
"""uvloop in MLServer's environment: the last release before 0.22, whose get_event_loop()
raises in MLServer's worker processes (MLServer requires uvloop without a bound)."""

JOBLIB = "1.6.0"
"""joblib, which both servers load ``model.joblib`` with."""
