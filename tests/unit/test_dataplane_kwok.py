"""Which pods the testbed runs and which kwok readies (testbed/dataplane/kwok.py, podspec.py).

One regular expression decides both: the testbed runs a pod when every image matches it
(:func:`podspec.runs_locally`), and kwok's status stages are given it (through jq's ``test``)
so they skip exactly those pods. It must agree with the runners' own image lookup.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.dataplane import kwok, podspec

IMAGES = [
    "docker.io/kserve/sklearnserver:v0.20.0",
    "kserve/sklearnserver",
    "kserve/sklearnserver:latest",
    "localhost:5000/kserve/sklearnserver:dev",
    "localhost/kserve/sklearnserver",
    "quay.io/kserve/sklearnserver@sha256:0123abcd",
    "seldonio/mlserver:1.7.1",
    "docker.io/seldonio/mlserver:1.5.0-slim",
    "kserve/storage-initializer:v0.20.0",
    "kserve/storage-initializer:v0.17.0@sha256:ff",
    # not served
    "kserve/sklearnserver-gpu:v0.20.0",
    "kserve/xgbserver:v0.20.0",
    "docker.io/library/python:3.11",
    "nvcr.io/nvidia/tritonserver:23.05-py3",
    "kserve/huggingfaceserver:v0.20.0",
    "pytorch/torchserve-kfs:0.9.0",
    "openvino/model_server:2024.1",
    "kserve/modelmesh-runtime-adapter:v0.12.0",
    "seldonio/mlserver-extra/x:1",
    "evil.io/x/kserve/sklearnserver:v1",
    "kserve.io/sklearnserver:v1",
    "library/kserve/sklearnserver",
    "myregistry:5000/seldonio/mlserver",
    "kserve/sklearnserverx",
]


@pytest.mark.parametrize("image", IMAGES)
def test_the_pattern_takes_exactly_the_images_a_runner_stands_in_for(image: str) -> None:
    matched = re.search(podspec.served_image_pattern(), image) is not None
    assert matched == (podspec.runner_for(image) is not None)


def test_the_pattern_needs_no_quoting_in_jq_and_is_plain_re2() -> None:
    pattern = podspec.served_image_pattern()
    assert '"' not in pattern and "\\" not in pattern
    # Only constructs RE2 and Python read alike: groups, classes, alternation, ? + * ^ $.
    assert not re.search(r"\(\?[^:]", pattern), pattern
    query = kwok.served_query()
    assert query.startswith("[((.spec.initContainers // [])[], .spec.containers[]) | ")
    assert f'(.image | test("{pattern}")) or ' in query
    # the add-on's image only with the args of its hook pods (OCM's, the chart's)
    assert 'and ((.args // []) == ["agent-release"])) or ' in query
    assert query.endswith('and ((.args // []) == ["uninstall-guard"]))] | all')


def pod(*images: str, init: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"spec": {"initContainers": [{"name": f"i{n}", "image": i}
                                        for n, i in enumerate(init)],
                     "containers": [{"name": f"c{n}", "image": i}
                                    for n, i in enumerate(images)]}}


def test_a_pod_runs_locally_only_when_every_image_has_a_runner() -> None:
    sklearn = "docker.io/kserve/sklearnserver:v0.20.0"
    initializer = "kserve/storage-initializer:v0.20.0"
    assert podspec.runs_locally(pod(sklearn, init=(initializer,)))
    assert podspec.runs_locally(pod("seldonio/mlserver:1.7.1"))
    # ModelMesh's mlserver pod: the puller and proxy have no runner.
    assert not podspec.runs_locally(pod("kserve/modelmesh:v0.12.0", "seldonio/mlserver:1.7.1",
                                        "kserve/modelmesh-runtime-adapter:v0.12.0"))
    assert not podspec.runs_locally(pod(sklearn, init=("busybox",)))
    assert not podspec.runs_locally({"spec": {"containers": []}})


KWOK_FAST = {
    "pod-ready": {"selector": {"matchExpressions": [
        {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
        {"key": ".status.podIP", "operator": "DoesNotExist"}]}, "next": {"statusTemplate": "x"}},
    "pod-complete": {"selector": {"matchExpressions": [
        {"key": ".status.phase", "operator": "In", "values": ["Running"]}]},
        "next": {"statusTemplate": "y"}},
    "pod-delete": {"selector": {"matchExpressions": [
        {"key": ".metadata.deletionTimestamp", "operator": "Exists"}]},
        "next": {"delete": True}},
}
"""The shape of kwok's ``kustomize/stage/pod/fast`` stages (the real files are read on the
fleet, from the Go module cache)."""


def stage_files(tmp_path: Path) -> list[Path]:
    paths = []
    for name, spec in KWOK_FAST.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({
            "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name},
            "spec": {"resourceRef": {"apiGroup": "v1", "kind": "Pod"}, **spec}}))
        paths.append(path)
    return paths


def test_kwoks_status_stages_skip_the_served_pods_and_deletion_stays(tmp_path: Path) -> None:
    stages = {s["metadata"]["name"]: s for s in kwok.pod_stages(stage_files(tmp_path))}
    assert list(stages) == ["pod-ready", "pod-complete", "pod-delete"]
    for name in ("pod-ready", "pod-complete"):
        expressions = stages[name]["spec"]["selector"]["matchExpressions"]
        # kwok's own expressions first, unchanged, then the testbed's.
        assert expressions[:-1] == KWOK_FAST[name]["selector"]["matchExpressions"]
        assert expressions[-1] == {"key": kwok.served_query(), "operator": "NotIn",
                                   "values": ["true"]}
        assert stages[name]["spec"]["next"] == KWOK_FAST[name]["next"]
    assert stages["pod-delete"]["spec"] == {"resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                                            **KWOK_FAST["pod-delete"]}


def test_other_stages_than_kwoks_defaults_are_refused(tmp_path: Path) -> None:
    files = stage_files(tmp_path)[:2]
    with pytest.raises(ValueError, match="default pod stages"):
        kwok.pod_stages(files)
