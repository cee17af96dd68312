"""OCM's pre-delete hook pod as a local process (testbed/dataplane/podspec.py, kwok.py).

The add-on's image is run by the testbed only as the hook Job's container (``args:
[agent-release]``), never as the agent's Deployment: one rule, read by
:func:`podspec.runs_locally` and, through jq, by kwok's stage selectors. The process gets a
kubeconfig with a token of the pod's ServiceAccount (a TokenRequest bound to the pod, as the
kubelet projects one), so it has exactly the agent's rights.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.dataplane import kwok, podspec
from testbed.dataplane.podspec import ApiAccess, Environments, Refused, StaticObjects

ENVS = Environments(
    kserve_python=Path("/envs/kserve/bin/python"),
    mlserver=Path("/envs/mlserver/bin/mlserver"),
    entrypoints=Path("/entrypoints"),
    addon_cli=Path("/venv/bin/model-serving-addon"),
    addon_source="/checkout",
)
ROOT = Path("/pods/agent_release")
IMAGE = "quay.io/opendatahub/model-serving-addon:v0.3.0"
HOOK = (podspec.RELEASE_HOOK_RUNNER,)


def chart_workload(kind: str) -> dict[str, Any]:
    """The hook Job's or the agent Deployment's pod, shaped as the chart's AddOnTemplate has
    them (charts/model-serving-addon/templates/addon.yaml; rendered by OCM on a real fleet in
    tests/integration/test_chart_install.py)."""
    meta = {"name": "release-x1", "namespace": "open-cluster-management-agent-addon",
            "uid": "u-1"}
    volumes = [{"name": "tmp", "emptyDir": {}}]
    mounts = [{"name": "tmp", "mountPath": "/tmp"}]
    if kind == "Job":
        container = {"name": "release", "image": IMAGE, "args": ["agent-release"],
                     "volumeMounts": mounts}
        restart = "OnFailure"
    else:
        container = {"name": "agent", "image": IMAGE, "volumeMounts": mounts,
                     "args": ["agent", "--cluster-name=cluster1", "--log-level=INFO"]}
        restart = "Always"
    return {"metadata": meta, "spec": {
        "serviceAccountName": "model-serving-agent", "restartPolicy": restart,
        "securityContext": {"runAsNonRoot": True}, "containers": [container],
        "volumes": volumes}}


def api(tokens: list[dict[str, Any]]) -> ApiAccess:
    def token(pod: dict[str, Any]) -> str:
        tokens.append(pod)
        return "tok-123"

    return ApiAccess("https://127.0.0.1:6443", "/pki/ca.crt", token)


def translate(pod: dict[str, Any], access: ApiAccess | None) -> podspec.PodPlan:
    counter = itertools.count(31001)
    return podspec.translate(pod, ROOT, StaticObjects(), ENVS, lambda: next(counter), access)


def test_the_hook_job_runs_as_agent_release_with_the_pods_service_account_kubeconfig() -> None:
    pod = chart_workload("Job")
    tokens: list[dict[str, Any]] = []
    plan = translate(pod, api(tokens))
    (container,) = plan.containers
    assert container.runner == "addon-agent-release"
    assert container.argv == ("/venv/bin/model-serving-addon", "agent-release")
    assert plan.restart_policy == "OnFailure"
    kubeconfig = ROOT / podspec.SERVICE_ACCOUNT_VOLUME / "kubeconfig"
    assert container.env["KUBECONFIG"] == str(kubeconfig)
    assert container.env["PYTHONPATH"] == "/checkout"
    # The emptyDir at /tmp is a directory of the pod, as for any pod.
    assert container.mounts["/tmp"] == ROOT / "volumes" / "tmp"
    # One token, requested for this pod (bound to it: name and uid).
    assert tokens == [pod]
    volume = next(v for v in plan.volumes if v.name == podspec.SERVICE_ACCOUNT_VOLUME)
    assert volume.files["token"] == b"tok-123"
    config = yaml.safe_load(volume.files["kubeconfig"])
    account = "system:serviceaccount:open-cluster-management-agent-addon:model-serving-agent"
    assert config["users"] == [{"name": account, "user": {"token": "tok-123"}}]
    assert config["clusters"][0]["cluster"] == {"server": "https://127.0.0.1:6443",
                                                "certificate-authority": "/pki/ca.crt"}
    assert config["current-context"] == account


def test_without_the_automounted_token_the_process_gets_no_kubeconfig() -> None:
    pod = chart_workload("Job")
    pod["spec"]["automountServiceAccountToken"] = False
    tokens: list[dict[str, Any]] = []
    (container,) = translate(pod, api(tokens)).containers
    assert "KUBECONFIG" not in container.env
    assert tokens == []


def test_a_kubelet_without_api_access_refuses_the_hook() -> None:
    with pytest.raises(Refused, match="API server"):
        translate(chart_workload("Job"), None)


def test_the_agents_deployment_is_never_run_only_the_hook() -> None:
    agent, hook = chart_workload("Deployment"), chart_workload("Job")
    assert podspec.runner_for(IMAGE, ["agent-release"]) is not None
    assert podspec.runner_for(IMAGE, agent["spec"]["containers"][0]["args"]) is None
    assert podspec.runner_for(IMAGE) is None
    with pytest.raises(Refused, match="no local runner"):
        translate(agent, api([]))
    for rules in (None, podspec.served_rules(HOOK)):
        assert podspec.runs_locally(hook, rules)
        assert not podspec.runs_locally(agent, rules)
    # A kubelet of the hook alone leaves the predictor pods to kwok.
    sklearn = {"spec": {"containers": [{"name": "c", "image": "kserve/sklearnserver:v0.20.0"}]}}
    assert podspec.runs_locally(sklearn)
    assert not podspec.runs_locally(sklearn, podspec.served_rules(HOOK))
    with pytest.raises(ValueError, match="no runner named"):
        podspec.served_rules(("nope",))


def pods() -> list[dict[str, Any]]:
    hook, agent = chart_workload("Job"), chart_workload("Deployment")
    extra_args = json.loads(json.dumps(hook))
    extra_args["spec"]["containers"][0]["args"] = ["agent-release", "--kubeconfig=/x"]
    sidecar = json.loads(json.dumps(hook))
    sidecar["spec"]["containers"].append({"name": "s", "image": "busybox"})
    sklearn = {"spec": {"containers": [{"name": "c", "image": "kserve/sklearnserver:v0.20.0"}],
                        "initContainers": [{"name": "i",
                                            "image": "kserve/storage-initializer:v0.20.0"}]}}
    other = {"spec": {"containers": [{"name": "c", "image": "kserve/xgbserver:v0.20.0",
                                      "args": ["agent-release"]}]}}
    return [hook, agent, extra_args, sidecar, sklearn, other]


@pytest.mark.skipif(shutil.which("jq") is None, reason="no jq on this machine")
@pytest.mark.parametrize("runners", [None, HOOK])
def test_kwoks_jq_selector_decides_as_python_does(runners: tuple[str, ...] | None) -> None:
    """jq (what kwok's gojq evaluates) and :func:`podspec.runs_locally` agree on every pod."""
    query = kwok.served_query(runners)
    for pod in pods():
        done = subprocess.run(["jq", "-c", query], input=json.dumps(pod), capture_output=True,
                              text=True, check=True)
        assert json.loads(done.stdout) == podspec.runs_locally(
            pod, podspec.served_rules(runners)), (query, pod)


def test_a_hook_kubelets_kwok_config_keeps_only_the_hook_off_kwoks_status_stages(
        tmp_path: Path) -> None:
    from tests.unit.test_dataplane_kwok import stage_files

    stages = {s["metadata"]["name"]: s for s in kwok.pod_stages(stage_files(tmp_path), HOOK)}
    for name in kwok.NOT_SERVED_STAGES:
        assert stages[name]["spec"]["selector"]["matchExpressions"][-1] == {
            "key": kwok.served_query(HOOK), "operator": "NotIn", "values": ["true"]}
    assert "sklearnserver" not in kwok.served_query(HOOK)
