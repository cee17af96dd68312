"""The fleet command line's pure parts: rows, readiness, tables, placement judgement, advice."""

from __future__ import annotations

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
