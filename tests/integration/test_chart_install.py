"""The chart on the testbed hub, and the agent deployed by OCM's own addon manager.

Disabling the add-on runs OCM's pre-delete hook Job for real (issue 29, item 11): its pod is
run by the testbed's kubelet as a ``model-serving-addon agent-release`` process with a token
of the agent's ServiceAccount (:meth:`Testbed.release_hook_kubelet`), and OCM removes the
agent's Deployment and RBAC only once that process exited 0.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from addon_agent import labels as lb
from addon_agent.pure import storage
from addon_agent.release import FINALIZER
from addon_api import constants as c
from addon_api.sealing import binding_for
from addon_manager.shell.handlers import FINALIZER as MANAGER_FINALIZER
from testbed.chart import AGENT_SERVICE_ACCOUNT, CHART, helm
from testbed.dataplane.kubelet import FIELD_MANAGER, SERVED
from testbed.dataplane.podspec import (
    RELEASE_HOOK_RUNNER,
    SIMULATED_LABEL,
    UNINSTALL_GUARD_RUNNER,
)
from testbed.fleet import Testbed
from testbed.support import fleetcli, watching
from testbed.support.manager import Manager, chart_deployment_command
from testbed.support.waiting import eventually

RELEASE_NAMESPACE = "model-serving-system"
HOOK_JOB = "model-serving-agent-release"
TEAM = "hook-team"
CONN_NS = "hook-conns"
CONN = "hooked"
PLATFORM = "hook-platform"


def _maybe(cluster: Any, *args: str) -> Any:
    """The object as JSON, or None when it does not exist."""
    got = cluster.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(got.stdout) if got.returncode == 0 else None


def _agent_written_objects() -> list[dict[str, Any]]:
    """What the agent leaves on a spoke: a storage-config entry it wrote (marked as
    :mod:`addon_agent.io.delivery` marks it, next to another writer's entry) for a
    SealedStorageConnection, which carries the agent's finalizer, as does a ServingPlatform."""
    edit = storage.put_entry(None, CONN, binding_for(CONN_NS, CONN),
                             {"type": "s3", "bucket": "models"})
    theirs = base64.b64encode(json.dumps({"type": "gcs", "bucket": "theirs"}).encode()).decode()
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CONN_NS}},
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
         "metadata": {"name": c.STORAGE_CONFIG_SECRET, "namespace": TEAM,
                      "labels": {**lb.ours(), lb.LABEL_STORAGE_CONFIG: "true"},
                      "annotations": {lb.ANNOTATION_OWNED_ENTRIES: storage.json_owners(edit.owners),
                                      lb.ANNOTATION_CREATED_BY_AGENT: "true"}},
         "data": {**(edit.data or {}), "theirs": theirs}},
        {"apiVersion": f"{c.GROUP}/{c.VERSION}", "kind": c.KIND_SEALED_STORAGE_CONNECTION,
         "metadata": {"name": CONN, "namespace": CONN_NS, "finalizers": [FINALIZER]},
         "spec": {"keyId": "k1", "sealed": "c2VhbGVk", "type": "s3",
                  "targetNamespaces": [TEAM], "entryName": CONN}},
        {"apiVersion": f"{c.GROUP}/{c.VERSION}", "kind": c.KIND_SERVING_PLATFORM,
         "metadata": {"name": PLATFORM, "finalizers": [FINALIZER]}, "spec": {}},
    ]


def _finalizers(obj: dict[str, Any] | None) -> list[str]:
    return list(((obj or {}).get("metadata") or {}).get("finalizers") or [])


def _remove_test_objects(spoke: Any) -> None:
    for kind, name, namespace in ((c.KIND_SEALED_STORAGE_CONNECTION, CONN, CONN_NS),
                                  (c.KIND_SERVING_PLATFORM, PLATFORM, None)):
        where = ["-n", namespace] if namespace else []
        spoke.kubectl("patch", kind.lower(), name, *where, "--type=merge",
                      "-p", '{"metadata":{"finalizers":null}}', check=False)
        spoke.kubectl("delete", kind.lower(), name, *where, "--ignore-not-found",
                      "--wait=false", check=False)
    for namespace in (TEAM, CONN_NS):
        spoke.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=false",
                      check=False)


ADC = f"{c.ADDON_NAME}-defaults"
"""The add-on's default AddOnDeploymentConfig (the ClusterManagementAddOn names it)."""


def _variables(adc: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v["value"] for v in adc["spec"]["customizedVariables"]}


def _chart_manager(testbed: Testbed) -> Manager:
    """The manager as the chart's Deployment would run it: its arguments, a token of its
    ServiceAccount, and the namespace its pod would be in (the testbed has no kubelet for
    the hub's pods; its metrics port is a free one)."""
    kubeconfig, args = chart_deployment_command(
        testbed.hub, RELEASE_NAMESPACE, testbed.hub.directory / "chart-manager.kubeconfig")
    return Manager(kubeconfig, testbed.log_dir / "chart-manager.log", *args[1:],
                   f"--namespace={RELEASE_NAMESPACE}").start()


def _json(cluster: Any, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    for cond in obj.get("status", {}).get("conditions", []):
        if cond["type"] == kind:
            return str(cond["status"])
    return None


def test_install_and_enable_on_cluster1(testbed: Testbed) -> None:
    hub, spoke = testbed.hub, testbed.spokes[0]
    kubeconfig = f"--kubeconfig={hub.kubeconfig}"
    # Before the install, `check` fails on the missing registration and says what to do; the
    # hub's version and OCM's APIs pass.
    before = fleetcli.run(hub.kubeconfig, "check")
    print(before.stdout)
    assert before.returncode == 1, (before.stdout, before.stderr)
    assert "install the chart (docs/hub-setup.md)" in before.stdout
    checks = {x["name"]: x for x in json.loads(
        fleetcli.run(hub.kubeconfig, "check", "-o", "json").stdout)["checks"]}
    assert checks["hub Kubernetes version"]["state"] == "OK"
    assert checks[f"add-on registration (ClusterManagementAddOn {c.ADDON_NAME})"][
        "state"] == "FAIL"
    assert all(x["state"] == "OK" for n, x in checks.items() if n.startswith("OCM API"))
    manager: Manager | None = None
    uninstalled_by_test = False
    installed = helm(
        "upgrade",
        "--install",
        "msa",
        str(CHART),
        "-n",
        RELEASE_NAMESPACE,
        "--create-namespace",
        "--wait=false",
        kubeconfig,
    )
    try:
        # The chart's notes say how to check the install, and what the empty defaults mean.
        notes = installed.stdout.partition("NOTES:")[2]
        check = (f"kubectl -n {RELEASE_NAMESPACE} rollout status "
                 "deployment/model-serving-addon-manager")
        assert check in notes, notes
        assert "manager.secretNamespaces is empty" in notes, notes
        assert "manager.policy.targetNamespaces is empty" in notes, notes
        assert "get mlfleet" in notes, notes
        # Every object the chart renders was accepted by the hub API server.
        deployment = _json(hub, "deployment", "model-serving-addon-manager", "-n",
                           RELEASE_NAMESPACE)
        assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == (
            "model-serving-addon-manager"
        )
        assert (
            _json(hub, "clustermanagementaddon", c.ADDON_NAME)["spec"]["installStrategy"]["type"]
            == "Manual"
        )

        # Asking for ModelMesh is admitted, with the chart's deprecation warning (once the
        # API server has loaded the new policy).
        def dry_run(platform: str) -> str:
            return hub.kubectl(
                "apply", "--dry-run=server", "-n", "default", "-f", "-", input=json.dumps({
                    "apiVersion": c.API_VERSION, "kind": c.KIND_MODEL_SERVING,
                    "metadata": {"name": platform.lower()},
                    "spec": {"platform": platform, "placementRef": {"name": "p"}}})).stderr

        warned = eventually(lambda: (lambda err: err if "Warning:" in err and (
            "platform ModelMesh is deprecated" in err) else None)(dry_run("ModelMesh")),
            timeout=30)
        assert "model-serving-modelmesh-deprecated" in warned, warned
        assert "deprecated" not in dry_run("KServe")

        # The manager, as the chart's Deployment runs it (its args, its ServiceAccount): it
        # writes the add-on's AddOnDeploymentConfig, which it alone owns, from the chart's
        # agent-config ConfigMap and its verify key; OCM renders no agent before that.
        assert _maybe(hub, "addondeploymentconfig", ADC, "-n", RELEASE_NAMESPACE) is None
        manager = _chart_manager(testbed)
        adc = eventually(lambda: _maybe(hub, "addondeploymentconfig", ADC, "-n",
                                        RELEASE_NAMESPACE), timeout=60)
        cma = _json(hub, "clustermanagementaddon", c.ADDON_NAME)
        assert [(o["kind"], o["uid"]) for o in adc["metadata"]["ownerReferences"]] == [
            ("ClusterManagementAddOn", cma["metadata"]["uid"])]
        writers = {m["manager"] for m in adc["metadata"]["managedFields"]}
        assert writers and not [w for w in writers if "helm" in w.lower()], writers
        key = _variables(adc)["SEAL_VERIFY_KEY"]
        assert key and _variables(adc)["LOG_LEVEL"] == "INFO"

        testbed.ensure_hub_controller("addon-manager")
        hub.apply_objects(
            [
                {
                    "apiVersion": "addon.open-cluster-management.io/v1alpha1",
                    "kind": "ManagedClusterAddOn",
                    "metadata": {"name": c.ADDON_NAME, "namespace": spoke.name},
                    "spec": {},
                }
            ]
        )

        def rendered_work() -> dict[str, Any] | None:
            works = _json(
                hub,
                "manifestworks",
                "-n",
                spoke.name,
                "-l",
                f"open-cluster-management.io/addon-name={c.ADDON_NAME}",
            )["items"]
            return works[0] if works else None

        work = eventually(rendered_work, timeout=90)
        dep = next(m for m in work["spec"]["workload"]["manifests"] if m["kind"] == "Deployment")
        container = dep["spec"]["template"]["spec"]["containers"][0]
        assert "--cluster-name=cluster1" in container["args"]
        assert "--log-level=INFO" in container["args"]
        assert container["image"].startswith("quay.io/opendatahub/model-serving-addon:")
        assert dep["metadata"]["namespace"] == c.AGENT_NAMESPACE

        # The work agent applied it on the spoke; kwok runs the pod, so it becomes Available.
        def agent_available() -> bool:
            got = _json(spoke, "deployment", "model-serving-agent", "-n", c.AGENT_NAMESPACE)
            return _condition(got, "Available") == "True"

        eventually(agent_available, timeout=120)
        for crd in ("servingplatforms", "sealedstorageconnections"):
            spoke.kubectl("get", "crd", f"{crd}.{c.GROUP}")

        def addon_available() -> bool:
            mca = _json(hub, "managedclusteraddon", c.ADDON_NAME, "-n", spoke.name)
            return _condition(mca, "Available") == "True"

        eventually(addon_available, timeout=120)

        # One owner per field: `helm upgrade` with the same values, twice, writes neither the
        # AddOnDeploymentConfig nor anything OCM renders the agent from, so the agent's work
        # is not rendered again.
        def state() -> tuple[str, str, int]:
            got = _json(hub, "addondeploymentconfig", ADC, "-n", RELEASE_NAMESPACE)
            template = _json(hub, "addontemplates", "-l", "app.kubernetes.io/instance=msa")
            work = rendered_work()
            assert work is not None
            return (got["metadata"]["resourceVersion"],
                    template["items"][0]["metadata"]["resourceVersion"],
                    work["metadata"]["generation"])

        before = state()
        for _ in range(2):
            helm("upgrade", "msa", str(CHART), "-n", RELEASE_NAMESPACE, "--reuse-values",
                 "--wait=false", kubeconfig)
            assert state() == before
        # A changed value reaches the agents with the key intact: the chart's ConfigMap
        # changes and so does the manager's pod template (its checksum), which rolls the
        # manager (here: the process restarted, as that rollout would); the manager writes
        # the new value beside its key, and the agent's work is rendered once more.
        template_before = _json(hub, "deployment", "model-serving-addon-manager", "-n",
                                RELEASE_NAMESPACE)["spec"]["template"]["metadata"]["annotations"]
        helm("upgrade", "msa", str(CHART), "-n", RELEASE_NAMESPACE, "--reuse-values",
             "--set", "agent.logLevel=debug", "--wait=false", kubeconfig)
        template_after = _json(hub, "deployment", "model-serving-addon-manager", "-n",
                               RELEASE_NAMESPACE)["spec"]["template"]["metadata"]["annotations"]
        assert template_after["checksum/agent-config"] != template_before["checksum/agent-config"]
        assert _variables(_json(hub, "addondeploymentconfig", ADC, "-n", RELEASE_NAMESPACE)) == (
            _variables(adc))  # helm did not touch it
        manager.stop()
        manager.start()
        updated = eventually(lambda: (lambda got: got if _variables(got)["LOG_LEVEL"] == "DEBUG"
                                      else None)(_json(hub, "addondeploymentconfig", ADC, "-n",
                                                       RELEASE_NAMESPACE)), timeout=60)
        assert _variables(updated)["SEAL_VERIFY_KEY"] == key

        def rerendered() -> bool:
            work = rendered_work()
            assert work is not None
            dep = next(m for m in work["spec"]["workload"]["manifests"]
                       if m["kind"] == "Deployment")
            args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
            return "--log-level=DEBUG" in args and f"--seal-verify-key={key}" in args

        eventually(rerendered, timeout=60)
        # The re-rendered agent rolls out on the spoke; until the work agent reports its
        # Deployment again, OCM has no probe result and the add-on is not Available (a check
        # run then says so: NoProbeResult, seen on a loaded machine).
        eventually(addon_available, timeout=120)
        # Installed and enabled: every check passes (the manager's may only warn: no manager
        # runs in this module, and other modules' intents may wait for one). Available above
        # may still be the previous agent's: once the work agent applies the re-rendered
        # Deployment, OCM's probe says ProbeUnavailable while it rolls (seen in a full run),
        # so the check is read until the rollout is through.
        def healthy() -> Any:
            run = fleetcli.run(hub.kubeconfig, "check", "-o", "json")
            return run if run.returncode == 0 else None

        after = eventually(healthy, timeout=120, interval=2)
        checks = {x["name"]: x for x in json.loads(after.stdout)["checks"]}
        print("\n".join(f"{x['state']} {x['name']}: {x['seen']}" for x in checks.values()))
        assert after.returncode == 0, after.stdout
        assert {x["state"] for n, x in checks.items() if "manager" not in n} == {"OK"}, checks
        assert checks["add-on on the clusters"]["seen"] == "available on 1 cluster(s)"
        assert checks[f"add-on registration (ClusterManagementAddOn {c.ADDON_NAME})"][
            "seen"] == "chart model-serving-addon-0.1.0"

        # What the agent leaves on the spoke (written here as harness admin: the agent's pod
        # is kwok's, no agent process runs): a plaintext entry and objects with its finalizer.
        spoke.apply_objects(_agent_written_objects())
        assert CONN in _maybe(spoke, "secret", c.STORAGE_CONFIG_SECRET, "-n", TEAM)["data"]

        # Disabling the add-on: OCM runs the pre-delete hook Job first, and the testbed's
        # kubelet runs its pod as the real agent-release process; the agent's Deployment and
        # RBAC go only once it exited 0. The spoke is watched until they are gone.
        # Every change of those objects is recorded (a watch): the Job is Complete only for
        # the moment before OCM deletes it with the rest, which reads in rounds could miss.
        agent = "model-serving-agent"
        api = spoke.api_client()
        by_name = {"field_selector": f"metadata.name={agent}"}
        watches = {
            "Job": (client.BatchV1Api(api).list_namespaced_job,
                    {"namespace": c.AGENT_NAMESPACE,
                     "field_selector": f"metadata.name={HOOK_JOB}"}),
            "Pod": (client.CoreV1Api(api).list_namespaced_pod,
                    {"namespace": c.AGENT_NAMESPACE, "label_selector": f"job-name={HOOK_JOB}"}),
            "Deployment": (client.AppsV1Api(api).list_namespaced_deployment,
                           {"namespace": c.AGENT_NAMESPACE, **by_name}),
            "ClusterRole": (client.RbacAuthorizationV1Api(api).list_cluster_role, by_name),
            "ClusterRoleBinding": (
                client.RbacAuthorizationV1Api(api).list_cluster_role_binding, by_name),
        }
        agent_objects = ("Deployment", "ClusterRole", "ClusterRoleBinding")
        with testbed.release_hook_kubelet(spoke) as kubelet, watching.recording(
                watches) as seen:
            assert all(seen.state_at(2**63, kind, agent) for kind in agent_objects), (
                seen.ordered())
            started = time.monotonic()
            hub.kubectl("delete", "managedclusteraddon", c.ADDON_NAME, "-n", spoke.name,
                        "--wait=false")
            eventually(lambda: all(seen.deleted(kind, agent) for kind in agent_objects),
                       timeout=180)
            gone_at = time.monotonic() - started
            completion = seen.first("Job", lambda job: _condition(job, "Complete") == "True")
            print(f"agent gone after {gone_at:.1f}s; changes seen: "
                  f"{[(e.revision, e.kind, e.type) for e in seen.ordered()]}")
            assert completion is not None, "the hook Job never completed"
            # Until the hook completed, the agent and its rights were all there.
            deployment = seen.state_at(completion.revision, "Deployment", agent)
            at_completion = {
                "deployment": deployment is not None
                and not deployment["metadata"].get("deletionTimestamp"),
                "clusterrole": seen.state_at(completion.revision, "ClusterRole", agent)
                is not None,
                "clusterrolebinding": seen.state_at(
                    completion.revision, "ClusterRoleBinding", agent) is not None}
            assert at_completion == {"deployment": True, "clusterrole": True,
                                     "clusterrolebinding": True}, at_completion
            succeeded = seen.first("Pod", lambda pod: pod["status"].get("phase") == "Succeeded")
            hook_pod = succeeded.object if succeeded else None

            # The hook's pod was a real process of agent-release, with a token of the agent's
            # ServiceAccount, and exited 0; its status is the testbed's, never kwok's.
            (run,) = [p for p in kubelet.history if p.name.startswith(f"{HOOK_JOB}-")]
            assert run.runner is not None and run.error is None
            (container,) = run.runner.plan.containers
            assert container.runner == RELEASE_HOOK_RUNNER
            assert container.argv[1:] == ("agent-release",), container.argv
            assert container.argv[0].endswith("model-serving-addon")
            hook_kubeconfig = container.env["KUBECONFIG"]
            token = json.loads(Path(hook_kubeconfig).read_text())["users"][0]["user"]["token"]
            claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
            assert claims["sub"] == (
                f"system:serviceaccount:{c.AGENT_NAMESPACE}:{AGENT_SERVICE_ACCOUNT}"), claims
            assert claims["kubernetes.io"]["pod"]["name"] == run.name, claims
            assert run.runner.runs[0].state["terminated"]["exitCode"] == 0
            assert hook_pod is not None, "the Succeeded hook pod was never seen"
            assert hook_pod["metadata"]["labels"][SIMULATED_LABEL] == SERVED
            writers = {m["manager"] for m in hook_pod["metadata"]["managedFields"]
                       if m.get("subresource") == "status"}
            assert FIELD_MANAGER in writers and writers <= {FIELD_MANAGER, "kube-scheduler"}, (
                writers)
            (status,) = hook_pod["status"]["containerStatuses"]
            assert status["state"]["terminated"]["exitCode"] == 0, status
            log = (testbed.log_dir / f"{spoke.name}-hook-pods"
                   / f"{c.AGENT_NAMESPACE}_{run.name}" / "release.log")
            assert f"{CONN_NS}/{CONN}" in log.read_text(), log.read_text()

        # The agent's entry and finalizers are gone; the other writer's entry stays.
        secret = _maybe(spoke, "secret", c.STORAGE_CONFIG_SECRET, "-n", TEAM)
        assert set(secret["data"]) == {"theirs"}, secret["data"]
        assert FINALIZER not in _finalizers(
            _maybe(spoke, c.KIND_SEALED_STORAGE_CONNECTION.lower(), CONN, "-n", CONN_NS))
        assert FINALIZER not in _finalizers(
            _maybe(spoke, c.KIND_SERVING_PLATFORM.lower(), PLATFORM))
        # The CRDs are orphaned (and their objects kept).
        spoke.kubectl("get", "crd", f"servingplatforms.{c.GROUP}")

        # Uninstalling while an intent exists is refused by the chart's pre-delete guard (a
        # real process of `model-serving-addon uninstall-guard`, its pod run by the testbed
        # on the hub); once the intent is being deleted the guard waits for the manager to
        # finish it, then lets the uninstall through.
        assert manager is not None
        _uninstall_is_guarded(testbed, manager, kubeconfig)
        uninstalled_by_test = True
    finally:
        _remove_test_objects(spoke)
        hub.kubectl(
            "delete",
            "managedclusteraddon",
            c.ADDON_NAME,
            "-n",
            spoke.name,
            "--ignore-not-found",
            check=False,
        )
        if manager is not None:
            manager.stop()
        if not uninstalled_by_test:
            helm("uninstall", "msa", "-n", RELEASE_NAMESPACE, "--no-hooks", kubeconfig,
                 check=False)
    assert uninstalled_by_test
    # The manager's AddOnDeploymentConfig goes with the chart (its owner, the
    # ClusterManagementAddOn, is the chart's): nothing of the add-on is stranded on the hub.
    def gone() -> bool:
        adc = _maybe(hub, "addondeploymentconfig", ADC, "-n", RELEASE_NAMESPACE)
        cma = _maybe(hub, "clustermanagementaddon", c.ADDON_NAME)
        assert adc is None, (adc["metadata"].get("ownerReferences"),
                             cma and cma["metadata"])
        return True

    eventually(gone, timeout=60)


GUARDED_NS = "guard-test"


def _uninstall_is_guarded(testbed: Testbed, manager: Manager, kubeconfig: str) -> None:
    """helm uninstall refused while a ModelServing exists, then waiting for its deletion."""
    hub = testbed.hub
    hub.apply_objects([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": GUARDED_NS}},
        {"apiVersion": c.API_VERSION, "kind": c.KIND_MODEL_SERVING,
         "metadata": {"name": "guarded", "namespace": GUARDED_NS},
         "spec": {"platform": "KServe", "placementRef": {"name": "nowhere"}}},
    ])
    eventually(lambda: MANAGER_FINALIZER in _finalizers(
        _maybe(hub, "modelserving", "guarded", "-n", GUARDED_NS)), timeout=60)
    runs = testbed.log_dir / f"{hub.name}-hook-pods"

    def guard_log(run: Any) -> str:
        path = runs / f"{RELEASE_NAMESPACE}_{run.name}" / "guard.log"
        return path.read_text() if path.exists() else ""

    with testbed.hook_kubelet(hub, UNINSTALL_GUARD_RUNNER) as kubelet:
        refused = helm("uninstall", "msa", "-n", RELEASE_NAMESPACE, "--timeout=120s",
                       kubeconfig, check=False)
        print(refused.stdout, refused.stderr)
        assert refused.returncode != 0
        assert "job model-serving-uninstall-guard failed" in refused.stderr, refused.stderr
        (first,) = kubelet.history
        assert first.runner is not None and first.runner.plan.containers[0].argv[1:] == (
            "uninstall-guard",)
        assert first.runner.runs[0].state["terminated"]["exitCode"] == 1
        assert (f"refusing to uninstall: 1 intent(s) still exist (msv {GUARDED_NS}/guarded)"
                in guard_log(first)), guard_log(first)
        # Nothing was removed: the release, the manager's Deployment, the registration.
        assert helm("status", "msa", "-n", RELEASE_NAMESPACE, kubeconfig).returncode == 0
        _json(hub, "deployment", "model-serving-addon-manager", "-n", RELEASE_NAMESPACE)
        _json(hub, "clustermanagementaddon", c.ADDON_NAME)

        # The intent deleted while no manager runs stays (its finalizer): the guard waits.
        manager.stop()
        hub.kubectl("delete", "modelserving", "guarded", "-n", GUARDED_NS, "--wait=false")
        done: dict[str, Any] = {}
        uninstall = threading.Thread(target=lambda: done.setdefault("result", helm(
            "uninstall", "msa", "-n", RELEASE_NAMESPACE, "--timeout=300s", kubeconfig,
            check=False)))
        uninstall.start()
        try:
            eventually(lambda: len(kubelet.history) == 2 and "waiting for 1 intent(s) being "
                       f"deleted (msv {GUARDED_NS}/guarded)" in guard_log(kubelet.history[1]),
                       timeout=120)
            assert "result" not in done  # helm waits for the guard
            manager.start()  # the manager finishes the deletion; the guard lets helm go on
        finally:
            uninstall.join(timeout=360)
        result = done["result"]
        assert result.returncode == 0, result.stderr
        second = kubelet.history[1]
        assert second.runner is not None
        assert second.runner.runs[0].state["terminated"]["exitCode"] == 0
        assert "no intents on the hub: the uninstall may proceed" in guard_log(second)
    assert _maybe(hub, "modelserving", "guarded", "-n", GUARDED_NS) is None
    manager.stop()
    hub.kubectl("delete", "namespace", GUARDED_NS, "--wait=false")


def test_a_failing_release_hook_is_visible(testbed: Testbed) -> None:
    """A hook pod whose agent-release fails (here: a ServiceAccount without the agent's rights)
    is a real process exiting non-zero: its pod Failed with the exit code, its Job Failed, as
    a hub admin would see them on the spoke (OCM then keeps waiting, the agent stays)."""
    spoke = testbed.spokes[0]
    namespace, account, job = "hook-failing", "no-rights", "release-fails"
    try:
        with testbed.release_hook_kubelet(spoke) as kubelet:
            spoke.apply_objects([
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                {"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": account, "namespace": namespace}},
                {"apiVersion": "batch/v1", "kind": "Job",
                 "metadata": {"name": job, "namespace": namespace},
                 "spec": {"backoffLimit": 0, "template": {"spec": {
                     "serviceAccountName": account, "restartPolicy": "Never",
                     "containers": [{"name": "release", "args": ["agent-release"],
                                     "image": "quay.io/opendatahub/model-serving-addon:dev"}],
                 }}}},
            ])
            failed = eventually(lambda: (lambda j: j if j and _condition(j, "Failed") == "True"
                                         else None)(_maybe(spoke, "job", job, "-n", namespace)),
                                timeout=90)
            assert _condition(failed, "Complete") != "True", failed["status"]
            (pod,) = _maybe(spoke, "pods", "-n", namespace, "-l", f"job-name={job}")["items"]
            assert pod["status"]["phase"] == "Failed", pod["status"]
            (status,) = pod["status"]["containerStatuses"]
            assert status["state"]["terminated"]["exitCode"] != 0, status
            assert pod["metadata"]["labels"][SIMULATED_LABEL] == SERVED
            writers = {m["manager"] for m in pod["metadata"]["managedFields"]
                       if m.get("subresource") == "status"}
            assert FIELD_MANAGER in writers and writers <= {FIELD_MANAGER, "kube-scheduler"}, (
                writers)
            (run,) = [p for p in kubelet.history if p.namespace == namespace]
            log = (testbed.log_dir / f"{spoke.name}-hook-pods" / f"{namespace}_{run.name}"
                   / "release.log").read_text()
            # The API server refused the process, which acted as that ServiceAccount.
            assert f"system:serviceaccount:{namespace}:{account}" in log, log
    finally:
        spoke.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=false",
                      check=False)
