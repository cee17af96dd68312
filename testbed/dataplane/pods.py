"""Predictor pods shaped as KServe's controller writes them, for tests without a controller.

On the fleet the pods come from KServe's real controller; a test of the data plane alone
builds one from a ServingRuntime's spec with what the controller and its webhooks add (the
facts, not their code): the runtime's container with its ``{{.Name}}``/``{{.Labels.*}}``
placeholders filled, the ``storage-initializer`` init container with ``[storageUri,
/mnt/models]``, the ``kserve-provision-location`` emptyDir mounted at ``/mnt/models`` in both,
and for MLServer runtimes ``MLSERVER_MODEL_NAME``/``MLSERVER_MODEL_URI`` and the ``modelClass``
label its defaulting webhook sets.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from testbed import versions

Obj = dict[str, Any]

MODEL_MOUNT = "/mnt/models"
PROVISION_VOLUME = "kserve-provision-location"
STORAGE_INITIALIZER_IMAGE = f"kserve/storage-initializer:{versions.KSERVE}"
MLSERVER_SKLEARN_CLASS = "mlserver_sklearn.SKLearnModel"
"""The ``modelClass`` label KServe's webhook gives an sklearn model on MLServer."""

_PLACEHOLDER = re.compile(r"\{\{\s*\.(Name|Namespace|Labels\.(\w+)|Annotations\.(\w+))\s*\}\}")


def fill(text: str, name: str, namespace: str, labels: dict[str, str],
         annotations: dict[str, str]) -> str:
    """A runtime's Go-template placeholder filled with the InferenceService's values."""

    def one(match: re.Match[str]) -> str:
        if match.group(1) == "Name":
            return name
        if match.group(1) == "Namespace":
            return namespace
        if match.group(2):
            return labels.get(match.group(2), "")
        return annotations.get(match.group(3) or "", "")

    return _PLACEHOLDER.sub(one, text)


def predictor_pod(
    runtime_spec: Obj,
    name: str,
    namespace: str,
    storage_uri: str,
    storage_env: list[Obj] | None = None,
) -> Obj:
    """The predictor pod of InferenceService ``name`` served by the runtime ``runtime_spec``.

    ``storage_env`` is the initializer's environment (``STORAGE_CONFIG`` from the
    ``storage-config`` Secret, ``AWS_*`` variables, ...).
    """
    mlserver = any("mlserver" in str(c.get("image", "")) for c in runtime_spec["containers"])
    labels = {
        "serving.kserve.io/inferenceservice": name,
        "component": "predictor",
        "app": f"isvc.{name}-predictor",
    }
    if mlserver:
        labels["modelClass"] = MLSERVER_SKLEARN_CLASS
    containers = []
    for original in runtime_spec["containers"]:
        container = copy.deepcopy(original)
        container["args"] = [fill(str(a), name, namespace, labels, {})
                             for a in container.get("args") or []]
        if not container["args"]:
            container.pop("args")
        env = [dict(e, value=fill(str(e["value"]), name, namespace, labels, {}))
               if "value" in e else e for e in container.get("env") or []]
        if mlserver and container["name"] == "kserve-container":
            known = {e["name"] for e in env}
            env += [e for e in ({"name": "MLSERVER_MODEL_NAME", "value": name},
                                {"name": "MLSERVER_MODEL_URI", "value": MODEL_MOUNT})
                    if e["name"] not in known]
        if env:
            container["env"] = env
        if container["name"] == "kserve-container":
            container["volumeMounts"] = [
                *(container.get("volumeMounts") or []),
                {"name": PROVISION_VOLUME, "mountPath": MODEL_MOUNT, "readOnly": True},
            ]
        containers.append(container)
    initializer: Obj = {
        "name": "storage-initializer",
        "image": STORAGE_INITIALIZER_IMAGE,
        "args": [storage_uri, MODEL_MOUNT],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [{"name": PROVISION_VOLUME, "mountPath": MODEL_MOUNT}],
    }
    if storage_env:
        initializer["env"] = storage_env
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{name}-predictor-0", "namespace": namespace,
                     "uid": f"testbed-{namespace}-{name}", "labels": labels},
        "spec": {
            "initContainers": [initializer],
            "containers": containers,
            "volumes": [{"name": PROVISION_VOLUME, "emptyDir": {}}],
            "restartPolicy": "Always",
        },
    }
