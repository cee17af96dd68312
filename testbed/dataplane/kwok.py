"""kwok's pod stages with the testbed's served pods left out, for a fleet with a data plane.

kwok (v0.7) plays *stages* on the pods of the nodes it manages: ``pod-ready`` makes a bound pod
Running and Ready, ``pod-complete`` finishes a Job's pod, ``pod-delete`` removes a pod marked
for deletion. Each stage has a selector whose ``matchExpressions`` keys are jq queries over the
whole pod (``pkg/utils/expression``: gojq; a boolean result compares as ``"true"`` /
``"false"``), and pod stages given in kwok's ``--config`` replace its defaults
(``pkg/kwok/cmd/root.go``).

So the fleet gives kwok its own default stages (``kustomize/stage/pod/fast`` of the pinned
module, read from the Go module cache) with one more expression on ``pod-ready`` and
``pod-complete``: the pod is not one the testbed runs (:func:`served_query`, the regular
expression of :func:`testbed.dataplane.podspec.served_image_pattern` over every image of the
pod). kwok never readies those, from the pod's creation on: no label has to reach the pod
first, no second node and no scheduling rule is needed, and every predictor pod of a runtime
the testbed can run is served, whichever ServingRuntime made it. ``pod-delete`` stays for every
pod: kwok still removes a deleted pod from the API, as the kubelet does once its containers are
gone (the testbed stops the processes when the pod is marked for deletion).

A runner with args (the add-on's image, only as OCM's pre-delete hook ``agent-release``) adds
a rule matching image *and* args (:func:`testbed.dataplane.podspec.served_rules`); a kubelet
of some runners only (``runners``) gets kwok given the same subset.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from testbed import upstream, versions
from testbed.dataplane.podspec import served_rules

STAGES = ("pod-ready", "pod-complete", "pod-delete")
"""kwok's default pod stages (``kustomize/stage/pod/fast``), in its order."""
NOT_SERVED_STAGES = ("pod-ready", "pod-complete")
"""The stages that write a pod's status: never for a pod the testbed runs."""


def served_query(runners: Sequence[str] | None = None) -> str:
    """A jq query that is ``true`` for a pod whose every container the testbed runs.

    Of every runner, or of ``runners`` (:func:`testbed.dataplane.podspec.served_rules`): the
    container's image matches a rule's pattern and, for a rule with args, its ``args`` are
    exactly those.
    """
    alternatives = []
    for rule in served_rules(runners):
        if '"' in rule.image or "\\" in rule.image:
            raise ValueError(f"the served-image pattern needs quoting in jq: {rule.image}")
        test = f'(.image | test("{rule.image}"))'
        if rule.args is not None:
            test = f"({test} and ((.args // []) == {json.dumps(list(rule.args))}))"
        alternatives.append(test)
    return ('[((.spec.initContainers // [])[], .spec.containers[]) | '
            f'{" or ".join(alternatives)}] | all')


def not_served_expression(runners: Sequence[str] | None = None) -> dict[str, Any]:
    """The ``matchExpressions`` entry that keeps a stage off the pods the testbed runs."""
    return {"key": served_query(runners), "operator": "NotIn", "values": ["true"]}


def default_stage_files() -> list[Path]:
    """The default pod stage files of the pinned kwok release (from the Go module cache)."""
    root = upstream.module_dir("sigs.k8s.io/kwok", versions.KWOK)
    return [root / "kustomize" / "stage" / "pod" / "fast" / f"{name}.yaml" for name in STAGES]


def pod_stages(
    files: list[Path] | None = None, runners: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """The default pod stages of kwok, with the testbed's served pods kept off the status ones.

    Served: by every runner, or by ``runners`` only (a kubelet started for those).
    """
    stages = []
    for path in files or default_stage_files():
        stage = yaml.safe_load(path.read_text())
        if stage["metadata"]["name"] in NOT_SERVED_STAGES:
            selector = stage["spec"].setdefault("selector", {})
            selector.setdefault("matchExpressions", []).append(
                not_served_expression(runners))
        stages.append(stage)
    names = [s["metadata"]["name"] for s in stages]
    if names != list(STAGES):
        raise ValueError(f"kwok {versions.KWOK}'s default pod stages are {names}, not {STAGES}")
    return stages


def write_config(path: Path, runners: Sequence[str] | None = None) -> Path:
    """Write kwok's ``--config`` file with :func:`pod_stages`; return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(pod_stages(runners=runners), sort_keys=False))
    return path
