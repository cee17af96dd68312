"""What the data plane's tests send and expect: the iris input, the runtimes, JSON requests."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from testbed import documents

REPO = Path(__file__).resolve().parents[2]

IRIS = [[6.8, 2.8, 4.8, 1.4], [6.0, 3.4, 4.5, 1.6]]
"""The iris input of KServe's sklearn samples."""
IRIS_CLASSES = [1, 1]
"""What the testbed's iris model answers for :data:`IRIS` (versicolor, twice)."""

MLSERVER_RUNTIME: dict[str, Any] = {
    # KServe's kserve-mlserver ClusterServingRuntime of the carried release (its bundle's
    # runtimes.yaml, which tests/integration/test_dataplane_bundle.py compares this with).
    "containers": [{
        "name": "kserve-container",
        "image": "docker.io/seldonio/mlserver:1.7.1",
        "env": [
            {"name": "MLSERVER_MODEL_IMPLEMENTATION", "value": "{{.Labels.modelClass}}"},
            {"name": "MLSERVER_HTTP_PORT", "value": "8080"},
            {"name": "MLSERVER_GRPC_PORT", "value": "9000"},
        ],
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"},
                      "limits": {"cpu": "1", "memory": "2Gi"}},
    }],
}


def sklearn_runtime() -> dict[str, Any]:
    """The repository's kserve-sklearnserver runtime spec (what the demo sends the fleet)."""
    doc = yaml.safe_load((REPO / "examples" / "servingruntime.yaml").read_text())
    return dict(doc["spec"]["template"])


def post_json(url: str, body: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
    """POST ``body`` as JSON; the decoded JSON answer (HTTP errors raise)."""
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return dict(json.loads(response.read()))


def post_via_ingress(base: str, host: str, path: str, body: dict[str, Any],
                     timeout: float = 30) -> tuple[dict[str, Any], str]:
    """POST ``body`` as JSON to ``path`` through a spoke's ingress at ``base`` for ``host``.

    Returns the decoded answer and the upstream (``127.0.0.1:PORT``) the ingress sent the
    request to (HTTP errors raise).
    """
    from testbed.dataplane.ingress import UPSTREAM_HEADER

    request = urllib.request.Request(f"{base}{path}", json.dumps(body).encode(),
                                     {"Content-Type": "application/json", "Host": host})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return dict(json.loads(response.read())), str(response.headers.get(UPSTREAM_HEADER))


def v2_iris() -> dict[str, Any]:
    """:data:`IRIS` as a V2 (Open Inference Protocol) request."""
    return {"inputs": [{"name": "input-0", "shape": [2, 4], "datatype": "FP32", "data": IRIS}]}


def bundle_runtimes(bundles: Path, version: str) -> dict[str, dict[str, Any]]:
    """The ClusterServingRuntimes of the rendered KServe bundle of ``version``, by name."""
    from addon_agent.bundle_render import RUNTIMES_FILE

    text = (bundles / "KServe" / version / RUNTIMES_FILE).read_text()
    return {d["metadata"]["name"]: d for d in documents.load_all(text)
            if d and d.get("kind") == "ClusterServingRuntime"}


def storage_initializer_image(bundles: Path, version: str) -> str:
    """The storage initializer's image in the bundle's ``inferenceservice-config``."""
    import json

    from addon_agent.bundle_render import BUNDLE_FILE

    text = (bundles / "KServe" / version / BUNDLE_FILE).read_text()
    for doc in documents.load_all(text):
        if doc and doc.get("kind") == "ConfigMap" and (
                doc["metadata"]["name"] == "inferenceservice-config"):
            return str(json.loads(doc["data"]["storageInitializer"])["image"])
    raise LookupError("no inferenceservice-config in the bundle")
