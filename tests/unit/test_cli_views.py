"""The fleet command line's pure parts: rows, readiness, tables, placement judgement, advice."""

from __future__ import annotations

import json
from typing import Any

import pytest

from addon_api import constants as c
from addon_cli import explain, troubleshooting, views

ISVC = c.KIND_INFERENCE_SERVICE


def intent(name: str, *entries: dict[str, Any], phase: str = "Ready", generation: int = 2,
           observed: int = 2, desired: int | None = None, **status: Any) -> dict[str, Any]:
    ready = sum(1 for e in entries if e.get("ready"))
    return {
        "kind": ISVC,
        "metadata": {"name": name, "namespace": "team", "generation": generation},
        "status": {"observedGeneration": observed, "phase": phase,
                   "summary": {"desired": len(entries) if desired is None else desired,
                               "ready": ready},
                   "clusters": list(entries), **status},
    }


def entry(cluster: str, ready: bool = True, **kw: Any) -> dict[str, Any]:
    return {"cluster": cluster, "ready": ready, "phase": "Ready" if ready else "Failed", **kw}


def test_kinds_are_named_by_kind_plural_or_short_name() -> None:
    assert views.kind_of("mcisvc") == views.kind_of("MultiClusterInferenceService") == ISVC
    assert views.kind_of("modelservings") == views.kind_of("msv") == c.KIND_MODEL_SERVING
    with pytest.raises(ValueError, match="unknown kind 'pods'"):
        views.kind_of("pods")


def test_rows_show_each_cluster_with_why_it_is_not_ready() -> None:
    found = views.rows([
        intent("iris", entry("c1", url="http://iris.c1", revision=3),
               entry("c2", False, reason="ModelLoadFailed", message="no such file"),
               entry("c3", False, phase="Waiting", waitingFor=["ServingPlatform Available"]),
               phase="Degraded", rollout={"targetRevision": 4}),
        intent("new", phase="Pending", conditions=[
            {"type": "Ready", "status": "False", "reason": "PlacementNotFound",
             "message": "Placement team/x does not exist"}]),
    ])
    assert [(r.name, r.cluster, r.ready, r.detail) for r in found] == [
        ("iris", "c1", True, ""),
        ("iris", "c2", False, "ModelLoadFailed: no such file"),
        ("iris", "c3", False, "waiting for ServingPlatform Available"),
        ("new", "-", False, "Placement team/x does not exist"),
    ]
    assert found[0].revision == "3 (target 4)" and found[0].url == "http://iris.c1"
    assert [r.cluster for r in views.rows([intent("iris", entry("c1"), entry("c2"))], "c2")] == [
        "c2"]


def test_not_ready_names_each_intent_and_why() -> None:
    assert views.not_ready([intent("ok", entry("c1"), entry("c2"))]) == []
    assert views.not_ready([intent("old", entry("c1"), generation=3, observed=2)]) == [
        "mcisvc/old in team: the manager has not seen generation 3"]
    assert views.not_ready([intent("half", entry("c1"), entry("c2", False))])[0].endswith(
        "ready on 1 of 2")
    assert "Degraded" in views.not_ready([intent("bad", entry("c1"), phase="Degraded")])[0]


def test_tables_are_aligned_and_coloured_only_when_asked() -> None:
    found = views.rows([intent("iris", entry("cluster1"), entry("c2", False, reason="X"))])
    plain = views.status_table(found).splitlines()
    assert plain[0].split() == ["KIND", "NAMESPACE", "NAME", "CLUSTER", "PHASE", "READY",
                                "REVISION", "URL", "DETAIL"]
    assert plain[1].index("Ready") == plain[2].index("Failed") == plain[0].index("PHASE")
    assert "\033[" not in "\n".join(plain)
    coloured = views.status_table(found, colour=True)
    assert "\033[32mReady" in coloured and "\033[31mFailed" in coloured


def test_cluster_rows_join_clusters_addons_platforms_and_intents() -> None:
    def mc(name: str, available: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "status": {"conditions": [
            {"type": "ManagedClusterConditionAvailable", "status": available}]}}

    addon = {"status": {"conditions": [{"type": "Available", "status": "True"}]}}
    found = views.cluster_rows(
        [mc("c2", "Unknown"), mc("c1", "True")], {"c1": addon},
        {"c1": ("KServe", "Available", "v0.17.0")},
        [intent("iris", entry("c1"), entry("c2", False, stale=True))])
    assert [(r.name, r.available, r.addon, r.platform, r.version, r.intents, r.stale)
            for r in found] == [
        ("c1", "True", "True", "KServe Available", "v0.17.0", 1, False),
        ("c2", "Unknown", "-", "-", "-", 1, True)]


def test_a_placement_says_why_it_does_not_select_a_cluster() -> None:
    placement = {"metadata": {"namespace": "team"}, "spec": {
        "clusterSets": ["prod"],
        "predicates": [{"requiredClusterSelector": {"labelSelector": {
            "matchLabels": {"tier": "gpu"},
            "matchExpressions": [{"key": "region", "operator": "In", "values": ["eu"]}]}}}],
        "tolerations": [{"key": "cluster.open-cluster-management.io/unreachable",
                         "operator": "Exists"}]}}

    def cluster(labels: dict[str, str], taints: list[dict[str, str]] | None = None
                ) -> dict[str, Any]:
        return {"metadata": {"name": "c9", "labels": labels}, "spec": {"taints": taints or []}}

    fits = {explain.CLUSTERSET_LABEL: "prod", "tier": "gpu", "region": "eu"}
    assert explain.why_not_selected(placement, cluster(fits), ["prod"]) == []
    unbound = explain.why_not_selected(placement, cluster(fits), ["default"])
    assert unbound and "not bound to namespace team" in unbound[0]
    labels = explain.why_not_selected(placement, cluster({**fits, "region": "us"}), ["prod"])
    assert labels == ["no predicate matches its labels: it lacks region In ['eu']"]
    tolerated = {"key": "cluster.open-cluster-management.io/unreachable", "effect": "NoSelect"}
    assert explain.why_not_selected(placement, cluster(fits, [tolerated]), ["prod"]) == []
    gpu = {"key": "gpu-maintenance", "value": "yes", "effect": "NoSelect"}
    assert explain.why_not_selected(placement, cluster(fits, [gpu]), ["prod"]) == [
        "it has the taint gpu-maintenance=yes:NoSelect and the Placement does not tolerate it"]


def test_advice_comes_from_the_troubleshooting_entries() -> None:
    hint = troubleshooting.advice("WaitingForPlatform")
    assert hint is not None and "ModelServing selects this cluster" in hint.todo
    assert troubleshooting.advice("no-such-reason") is None


def test_rollout_texts_say_where_a_rollout_stands() -> None:
    obj = intent("iris", entry("c1"), rollout={
        "phase": "RolledBack", "stableRevision": 1, "targetRevision": 2, "failedRevision": 2,
        "step": 1, "steps": 4, "stepClusters": ["c1"], "updated": 1,
        "message": "revision 2 failed the Ready gate on cluster c1",
        "gates": [{"gate": "Ready", "state": "Failed", "cluster": "c1", "message": "X"}]})
    text = explain.rollout_text(obj)
    assert "mcisvc/iris: RolledBack: revision 2 failed" in text
    assert "stable 1, target 2, failed 2" in text and "gate Ready: Failed on c1: X" in text
    history = explain.history_text(
        [{"revision": 1, "metadata": {"creationTimestamp": "t1"}},
         {"revision": 2, "metadata": {"creationTimestamp": "t2"}}],
        obj["status"]["rollout"]).splitlines()
    assert history[1].split() == ["1", "t1", "stable"]
    assert history[2].split() == ["2", "t2", "failed"]


class _FakeHub:
    """What the status command reads, changing on every read."""

    def __init__(self) -> None:
        self.reads = 0

    def intents(self, kind: str, namespace: str | None) -> list[dict[str, Any]]:
        if kind != ISVC:
            return []
        self.reads += 1
        ready = self.reads >= 2
        return [intent("iris", entry("c1", ready), phase="Ready" if ready else "Progressing")]


def test_status_watch_prints_on_change_and_wait_ready_exits_by_readiness(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from addon_cli import main as cli

    fake = _FakeHub()
    monkeypatch.setattr(cli, "_hub", lambda args: fake)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli.time, "sleep", sleep)
    assert cli.main(["status", "-n", "team", "--watch", "--interval=0.5"]) == 130
    out = capsys.readouterr().out
    assert out.count("KIND") == 2 and "--- " in out  # printed again when it changed, once
    assert "Failed" in out.split("--- ")[0] and "Ready" in out.split("--- ")[1]
    fake.reads, sleeps[:] = 0, []
    assert cli.main(["status", "-n", "team", "--wait-ready", "--interval=0.5"]) == 0
    assert sleeps == [0.5]  # not ready on the first read, ready on the second


def test_a_cluster_mid_upgrade_shows_from_and_to() -> None:
    """From the ModelServings' status entries: the viewer role reads no ManifestWorks."""

    def serving(platform: str, *entries: dict[str, Any]) -> dict[str, Any]:
        return {"kind": c.KIND_MODEL_SERVING, "spec": {"platform": platform},
                "status": {"clusters": list(entries)}}

    got = explain.platforms([
        serving("KServe",
                {"cluster": "c1", "phase": "Upgrading", "version": "v0.17.0",
                 "targetVersion": "v0.20.0"},
                {"cluster": "c2", "phase": "Available", "version": "v0.20.0"}),
        # a second ModelServing that does not own c2's stack says Conflict there
        serving("ModelMesh", {"cluster": "c2", "phase": "Waiting", "reason": "Conflict"}),
    ])
    assert got == {"c1": ("KServe", "Upgrading", "v0.17.0 -> v0.20.0"),
                   "c2": ("KServe", "Available", "v0.20.0")}


class _ViewerHub:
    """A hub as the fleet viewer reads it: cluster1 selected, ManifestWorks not readable."""

    def placement(self, namespace: str, name: str) -> dict[str, Any]:
        return {"metadata": {"namespace": namespace, "name": name}}

    def decisions(self, namespace: str, placement: str) -> list[dict[str, Any]]:
        return [{"status": {"decisions": [{"clusterName": "cluster1"}]}}]

    def works(self, selector: str, namespace: str | None = None) -> list[dict[str, Any]]:
        from addon_cli.hub import EXIT_FORBIDDEN, CliError

        raise CliError(EXIT_FORBIDDEN, "forbidden")


def test_explain_shows_a_kept_namespace_with_the_next_step_on_a_ready_cluster() -> None:
    """Issue 29, item 9: what the agent kept is shown with what to do, the cluster ready."""
    left = "namespace team-a kept: holds PersistentVolumeClaim team-a/data (1 more)"
    msv = {"kind": "ModelServing",
           "metadata": {"namespace": "ns", "name": "kserve", "generation": 1},
           "spec": {"placementRef": {"name": "p"}},
           "status": {"observedGeneration": 1, "phase": "Ready", "clusters": [
               {"cluster": "cluster1", "phase": "Available", "ready": True,
                "reason": "Available", "leftovers": left}]}}
    links = explain.chain(_ViewerHub(), msv, "cluster1")  # type: ignore[arg-type]
    assert [link.name for link in links] == ["intent", "placement", "status", "work",
                                             "leftovers"]
    assert links[2].ok is True  # still ready
    kept = links[-1]
    assert kept.summary == left
    assert any("put it back in the ModelServing's servingNamespaces" in e and
               "delete what the namespace holds" in e for e in kept.evidence), kept
    assert f"[..] leftovers {left}" in explain.render(links)
    msv["status"]["clusters"][0].pop("leftovers")  # type: ignore[index]
    assert "leftovers" not in [
        link.name for link in explain.chain(_ViewerHub(), msv, "cluster1")]  # type: ignore[arg-type]


def test_durations_are_seconds_or_go_style_and_bad_ones_name_the_value() -> None:
    from addon_cli import main as cli

    assert [cli.duration(t) for t in ("30", "2.5", "30s", "5m", "1h30m")] == [
        30.0, 2.5, 30.0, 300.0, 5400.0]
    for bad in ("5 minutes", "-3", "1d", ""):
        with pytest.raises(Exception, match="duration") as err:
            cli.duration(bad)
        assert type(err.value).__name__ == "ArgumentTypeError"
    args = cli.parser().parse_args(["status", "--wait-ready", "--timeout", "5m",
                                    "--request-timeout=1m", "--interval", "500"])
    assert (args.timeout, args.request_timeout, args.interval) == (300.0, 60.0, 500.0)


def test_status_wide_adds_the_reason_and_external_url_and_name_lists_each_intent_once() -> None:
    objs = [intent("iris", entry("c1", reason="ReplicasNotReady", message="1 of 2 replicas ready",
                                 externalUrl="https://iris.apps.c1"), entry("c2")),
            intent("wine", entry("c1", False, reason="CrashLooping"))]
    found = views.rows(objs)
    wide = views.status_table(found, wide=True).splitlines()
    assert wide[0].split() == ["KIND", "NAMESPACE", "NAME", "CLUSTER", "PHASE", "READY",
                               "REVISION", "URL", "REASON", "EXTERNAL-URL", "DETAIL"]
    assert "ReplicasNotReady" in wide[1] and "https://iris.apps.c1" in wide[1]
    assert "REASON" not in views.status_table(found)
    assert views.object_names(found) == [
        f"multiclusterinferenceservice.{c.GROUP}/iris",
        f"multiclusterinferenceservice.{c.GROUP}/wine"]


def test_rollout_outcome_is_done_failed_or_waiting_for_the_current_generation() -> None:
    def rolled(phase: str, **kw: Any) -> dict[str, Any]:
        return intent("iris", entry("c1"), rollout={"phase": phase, "targetRevision": 3,
                                                    "message": "m"}, **kw)

    assert explain.rollout_outcome(rolled("Complete"))[0] == "done"
    assert explain.rollout_outcome(rolled("RolledBack")) == ("failed", "RolledBack: m")
    assert explain.rollout_outcome(rolled("Halted"))[0] == "failed"
    for phase in ("Progressing", "Paused", "WaitingForApproval"):
        assert explain.rollout_outcome(rolled(phase)) == ("waiting", f"{phase}: m")
    # a Complete about the spec before the last change is not done
    stale = rolled("Complete", generation=3)
    assert explain.rollout_outcome(stale) == (
        "waiting", "the manager has not seen generation 3")
    # without a progressive rollout: done once Ready everywhere
    assert explain.rollout_outcome(intent("iris", entry("c1")))[0] == "done"
    assert explain.rollout_outcome(intent("iris", entry("c1", False), phase="Progressing"))[
        0] == "waiting"


class _RollingHub:
    """An intent whose rollout moves on at every read."""

    def __init__(self, phases: list[str]) -> None:
        self.phases = phases

    def intent(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        phase = self.phases.pop(0) if len(self.phases) > 1 else self.phases[0]
        return intent(name, entry("c1"), rollout={"phase": phase, "targetRevision": 2,
                                                  "stableRevision": 1, "message": phase})


@pytest.mark.parametrize(("phases", "code", "printed"), [
    (["Progressing", "Progressing", "Complete"], 0, 2),
    (["Progressing", "RolledBack"], 1, 2),
    (["Paused"], 1, 1),  # the wait ends (--timeout) with the rollout still paused
])
def test_rollout_status_watches_until_done_or_failed_and_exits_by_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    phases: list[str], code: int, printed: int,
) -> None:
    from addon_cli import main as cli

    monkeypatch.setattr(cli, "_hub", lambda args: _RollingHub(list(phases)))
    clock = iter(range(0, 10_000, 10))
    monkeypatch.setattr(cli.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(cli.time, "sleep", lambda s: None)
    assert cli.main(["rollout", "status", "mcisvc/iris", "-n", "team", "--timeout=1m"]) == code
    captured = capsys.readouterr()
    assert captured.out.count("mcisvc/iris: ") == printed, captured.out
    if phases == ["Paused"]:
        assert "not done after 60s: Paused" in captured.err
    # --no-watch reads once and exits 0 unless the rollout failed
    monkeypatch.setattr(cli, "_hub", lambda args: _RollingHub(list(phases)))
    once = cli.main(["rollout", "status", "mcisvc/iris", "-n", "team", "--no-watch", "-o",
                     "json"])
    assert once == (1 if phases[0] == "RolledBack" else 0)
    doc = json.loads(capsys.readouterr().out)
    assert doc["rollout"]["phase"] == phases[0] and doc["outcome"] in ("waiting", "done")


def test_version_prints_the_client_and_the_charts_on_the_hub(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from addon_cli import main as cli
    from addon_cli.hub import CliError

    class Registered:
        def registration(self) -> dict[str, Any]:
            return {"metadata": {"labels": {"helm.sh/chart": "model-serving-addon-0.1.0",
                                            "app.kubernetes.io/version": "0.1.0"}}}

    class Gone:
        def registration(self) -> dict[str, Any]:
            raise CliError(5, "not found: clustermanagementaddon model-serving")

    monkeypatch.setattr(cli, "_hub", lambda args: Registered())
    assert cli.main(["version"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("client: ") and out[1] == (
        "hub: chart model-serving-addon-0.1.0, app 0.1.0")
    monkeypatch.setattr(cli, "_hub", lambda args: Gone())
    assert cli.main(["version", "-o", "json"]) == 5
    assert "not found" in json.loads(capsys.readouterr().out)["hub"]["error"]
    assert cli.main(["version", "--client"]) == 0
    assert "hub" not in capsys.readouterr().out


def _runtime_work(cluster: str) -> dict[str, Any]:
    """The ManifestWork of MultiClusterServingRuntime team/rt on ``cluster``, applied and
    available (its Ready is the work's Available)."""
    from addon_manager.facts import naming
    from addon_manager.kinds.render import owner_labels

    done = [{"type": t, "status": "True", "reason": t, "observedGeneration": 1}
            for t in ("Applied", "Available")]
    return {"metadata": {"name": naming.work_name(c.KIND_SERVING_RUNTIME, "team", "rt"),
                         "namespace": cluster, "generation": 1,
                         "labels": owner_labels(c.KIND_SERVING_RUNTIME, "team", "rt")},
            "status": {"conditions": done}}


class _CappedHub:
    """One runtime on 105 clusters, its status listing 100 of them (not c9)."""

    def __init__(self, works: list[dict[str, Any]] | Exception) -> None:
        self.works_on = works

    def intents(self, kind: str, namespace: str | None) -> list[dict[str, Any]]:
        if kind != c.KIND_SERVING_RUNTIME:
            return []
        entries = [entry(f"k{i}") for i in range(100)]
        obj = intent("rt", *entries, desired=105, clustersOmitted=5)
        obj["kind"] = c.KIND_SERVING_RUNTIME
        return [obj]

    def works(self, selector: str, namespace: str | None = None) -> list[dict[str, Any]]:
        if isinstance(self.works_on, Exception):
            raise self.works_on
        return [w for w in self.works_on if w["metadata"]["namespace"] == namespace]


@pytest.mark.parametrize(("works", "shown"), [
    ([_runtime_work("c9")], [("c9", "Available", True)]),
    ([], []),
    (None, [("c9", "Unknown", False)]),
])
def test_status_of_a_cluster_past_the_status_cap_reads_the_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    works: list[dict[str, Any]] | None, shown: list[tuple[str, str, bool]],
) -> None:
    """The status keeps 100 cluster entries: ``status --cluster c9`` for the 105th reads its
    ManifestWork (judged as the manager judges it), says "no intents" only when there is no
    work there, and says why it cannot tell without the rights to read works."""
    from addon_cli import main as cli
    from addon_cli.hub import CliError

    refused = CliError(4, "the hub refused to let you list manifestworks")
    monkeypatch.setattr(cli, "_hub", lambda args: _CappedHub(refused if works is None
                                                               else works))
    assert cli.main(["status", "-n", "team", "--cluster", "c9", "-o", "json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    assert [(r["cluster"], r["phase"], r["ready"]) for r in items] == shown
    note = "not among the 100 entries of its status (5 omitted)"
    if works:
        assert items[0]["detail"] == f"({note}; from its ManifestWork)"
    if works is None:
        assert items[0]["detail"] == f"{note}; the hub refused to let you list manifestworks"
    assert cli.main(["status", "-n", "team", "--cluster", "c9"]) == 0
    table = capsys.readouterr().out
    assert ("no intents found on cluster c9" in table) == (not shown), table


def test_the_command_line_completes_commands_options_and_choices(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """argcomplete over the real parsers: the command's (every subcommand, the fleet commands'
    options) and the kubectl plugin's (kubectl_complete-modelserving, cobra's protocol)."""
    from addon_cli import main as cli
    from model_serving_addon.cli import full_parser, main

    top = full_parser()
    assert cli.complete(top, ["sta"]) == ["status"]
    assert {"manager", "agent", "check", "version", "completion", "crds"} <= set(
        cli.complete(top, [""]))
    assert cli.complete(top, ["status", "--wa"]) == ["--watch", "--wait-ready"]
    assert cli.complete(top, ["rollout", "st"]) == ["status"]
    assert cli.complete(top, ["status", "-o", "w"]) == ["wide"]
    monkeypatch.setattr("sys.argv", ["kubectl_complete-modelserving", "__complete", "rollout",
                                     "ap"])
    assert cli.kubectl_complete() == 0
    assert capsys.readouterr().out == "approve\n:4\n"
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert "model-serving-addon" in script and "kubectl-modelserving" in script
