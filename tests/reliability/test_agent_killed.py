"""The agent SIGKILLed mid-install and mid-removal of KServe: each restart resumes, and the end
state is whole (every bundle object present as rendered / nothing the agent created left).

The agent runs as a subprocess against spoke 1 (the ``agent`` fixture of tests/conftest.py,
killed and restarted by these tests). A kill moment is the appearance (install) or
disappearance (removal) of the k-th object in the agent's own apply (or delete) order, k drawn
at random from the objects in between: so every kill lands with some but not all objects
done. ``RELIABILITY_SEED`` replays a run; ``RELIABILITY_SCALE=soak``
runs more rounds and more kills per phase (``make soak``).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from addon_agent.io import bundle_source
from addon_agent.io.inventory import INVENTORY_CONFIGMAP, Ref
from addon_agent.io.kube import Kube, api_client_for
from addon_agent.pure import planning
from addon_agent.stacks import STACKS
from addon_api import constants as c
from addon_api.spoke import ServingPlatformSpec
from testbed import documents
from testbed.support.agent import (
    AgentProcess,
    get,
    leftovers,
    platform,
    wait_phase,
)
from testbed.support.manager import differences
from testbed.support.waiting import eventually

NAME = "kserve"
CONTROLLER = "kserve-controller-manager"
SPEC: dict[str, Any] = {
    "platform": "KServe",
    "components": {
        CONTROLLER: {
            "replicas": 1,
            "resources": {"requests": {"cpu": "20m", "memory": "64Mi"},
                          "limits": {"cpu": "1", "memory": "1Gi"}},
        }
    },
    "kserve": {"serviceClusterIPNone": True},
    "devFlags": {"images": {CONTROLLER: "example.com/kserve/kserve-controller:test"}},
}
SOAK = os.environ.get("RELIABILITY_SCALE", "") == "soak"
ROUNDS = 4 if SOAK else 1
"""Rounds of install + removal (Removed) + install + deletion."""
KILLS = 3 if SOAK else 1
"""Kills per install or removal phase."""
SEED = int(os.environ.get("RELIABILITY_SEED", str(time.time_ns() % 1_000_000)))


@dataclass
class Record:
    """What happened in one phase (printed, and used in docs/reliability.md)."""

    what: str
    kills: list[str] = field(default_factory=list)
    seconds: float = 0.0
    resume: float = 0.0
    """Seconds from the last restart to the end state."""


@pytest.fixture(scope="module")
def kube(spoke: Any) -> Iterator[Kube]:
    """A client of the spoke for fast existence checks (the agent's own thin layer).

    Starts from a spoke without KServe's CRDs: earlier tests of the session (the manager's)
    install them as a user would, and a CRD that existed before the agent is, by design,
    never labelled as the agent's, which the end-state check here would report.
    """
    spoke.kubectl(
        "delete", "crd", *(f"{crd}.serving.kserve.io" for crd in (
            "clusterservingruntimes", "inferencegraphs", "inferenceservices",
            "servingruntimes", "trainedmodels", "clusterstoragecontainers",
            "localmodelcaches", "localmodelnodes", "localmodelnodegroups", "llminferenceservices",
            "llminferenceserviceconfigs",
        )),
        "--ignore-not-found", "--wait=true", timeout=180,
    )
    api = api_client_for(str(spoke.kubeconfig))
    yield Kube(api)
    api.close()


def expected_objects(bundle_root: Path) -> list[dict[str, Any]]:
    """The objects the agent installs for SPEC, in its apply order.

    Pure planning as the agent does it; the webhook serving Secrets (random keys) take the
    place of the bundle objects of the same name, as in the agent.
    """
    spec = ServingPlatformSpec.model_validate(SPEC)
    text, stack = bundle_source.load(STACKS["KServe"], bundle_root, None, bundle_root)
    the_plan = planning.plan(
        planning.bundle_objects(documents.load_all(text)), spec, stack, planning.ClusterFacts(),
        agent_metrics=(c.AGENT_NAMESPACE, 0),
    )
    secrets = [
        planning.label(planning.webhook_cert_secret(r, "cert", "key", "ca"), stack)
        for r in the_plan.certificates
    ]
    names = {planning.key_of(s) for s in secrets}
    kept = [o for o in the_plan.objects if planning.key_of(o) not in names]
    return planning.order(kept + secrets)


def _ref(obj: dict[str, Any]) -> Ref:
    return Ref.of(obj)


def present(kube: Kube, ref: Ref) -> bool:
    """Whether the object exists (a kind no longer served: it does not)."""
    try:
        return kube.get(ref.api_version, ref.kind, ref.name, ref.namespace or None) is not None
    except Exception:
        return False


def kill_when(agent: AgentProcess, condition: Callable[[], bool], what: str,
              timeout: float = 180) -> None:
    """SIGKILL the agent the moment ``condition`` holds (polled as fast as the API allows)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert agent.proc is not None and agent.proc.poll() is None, "the agent exited by itself"
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{agent.tail()}")
        time.sleep(0.01)
    agent.kill()


def _inventory(kube: Kube) -> list[Ref]:
    cm = kube.get("v1", "ConfigMap", INVENTORY_CONFIGMAP, c.AGENT_NAMESPACE)
    return [Ref(*x) for x in json.loads(((cm or {}).get("data") or {}).get("objects", "[]"))]


def install_with_kills(
    spoke: Any, kube: Kube, agent: AgentProcess, objects: list[dict[str, Any]], rng: random.Random
) -> Record:
    """Create the platform, kill the agent KILLS times mid-install, then let it finish."""
    rec = Record("install")
    refs = [_ref(o) for o in objects]
    start = time.monotonic()
    spoke.apply_objects([platform(NAME, SPEC)])
    for _ in range(KILLS):
        done = sum(present(kube, r) for r in refs)
        # The k-th missing object (in apply order) appearing is the kill moment.
        missing = [r for r in refs if not present(kube, r)]
        if len(missing) < 2:
            break
        k = rng.randrange(0, len(missing) - 1)
        target = missing[k]
        kill_when(agent, lambda t=target: present(kube, t), f"{target} to appear")
        after = sum(present(kube, r) for r in refs)
        rec.kills.append(f"{after}/{len(refs)} objects (target #{done + k + 1} {target.kind} "
                         f"{target.name})")
        agent.start()
    restarted = time.monotonic()
    wait_phase(spoke, NAME, "Available", timeout=300)
    rec.resume = time.monotonic() - restarted
    rec.seconds = time.monotonic() - start
    return rec


def check_installed(spoke: Any, kube: Kube, objects: list[dict[str, Any]]) -> None:
    """Every bundle object is there, as rendered; the inventory lists exactly them."""
    # This client remembers a kind it found missing for a while (as the agent's does), and the
    # polling above asked for the stack's kinds before the agent installed their CRDs: forget
    # that, as the agent itself does after a pass that wrote CRDs.
    kube.rediscover()
    problems = []
    for obj in objects:
        ref = _ref(obj)
        live = kube.get(ref.api_version, ref.kind, ref.name, ref.namespace or None)
        if live is None:
            problems.append(f"missing {ref}")
            continue
        if obj["kind"] == "Secret" and obj.get("type") == "kubernetes.io/tls":
            # webhook serving certificate: random key material, checked by shape
            if not all((live.get("data") or {}).get(k) for k in ("tls.crt", "tls.key", "ca.crt")):
                problems.append(f"incomplete certificate Secret {ref}")
            continue
        expected = _as_stored(obj)
        problems += [f"{ref}: {d}" for d in differences(expected, live)]
    assert problems == [], "\n".join(problems[:40])
    assert set(_inventory(kube)) == {_ref(o) for o in objects}


def _as_stored(obj: Any) -> Any:
    """The rendered object as the API server keeps it: null fields (``creationTimestamp:
    null`` in the bundle) dropped; caBundle fields left out (the agent injects its own CA)."""
    if isinstance(obj, dict):
        return {k: _as_stored(v) for k, v in obj.items() if k != "caBundle" and v is not None}
    if isinstance(obj, list):
        return [_as_stored(v) for v in obj]
    return obj


def remove_with_kills(
    spoke: Any, kube: Kube, agent: AgentProcess, objects: list[dict[str, Any]],
    rng: random.Random, how: str,
) -> Record:
    """Remove the stack (managementState Removed, or delete the ServingPlatform) with kills."""
    rec = Record(f"removal ({how})")
    # The agent deletes in reverse apply phase order.
    refs = sorted((_ref(o) for o in objects), key=lambda r: planning.phase_of({"kind": r.kind}),
                  reverse=True)
    start = time.monotonic()
    if how == "Removed":
        spoke.apply_objects([platform(NAME, {**SPEC, "managementState": "Removed"})])
    else:
        spoke.kubectl("delete", "servingplatform", NAME, "--wait=false")
    for _ in range(KILLS):
        left = [r for r in refs if present(kube, r)]
        if len(left) < 2:
            break
        k = rng.randrange(0, len(left) - 1)
        target = left[k]
        kill_when(agent, lambda t=target: not present(kube, t), f"{target} to go")
        after = sum(present(kube, r) for r in refs)
        rec.kills.append(f"{after}/{len(refs)} objects left (target {target.kind} {target.name})")
        agent.start()
    restarted = time.monotonic()
    if how == "Removed":
        wait_phase(spoke, NAME, "Removed", timeout=300)
    else:
        eventually(lambda: get(spoke, "servingplatform", NAME) is None, timeout=300)
    eventually(lambda: leftovers(spoke) == [], timeout=180)
    rec.resume = time.monotonic() - restarted
    rec.seconds = time.monotonic() - start
    return rec


def check_removed(kube: Kube, objects: list[dict[str, Any]]) -> None:
    """Nothing of the stack is left; the inventory is empty."""
    kube.rediscover()
    left = [str(_ref(o)) for o in objects if present(kube, _ref(o))]
    assert left == []
    assert _inventory(kube) == []


@pytest.mark.timeout(3600 if SOAK else 900)
def test_agent_killed_mid_install_and_mid_removal_resumes(
    spoke: Any, kube: Kube, agent: AgentProcess, bundles: Path
) -> None:
    rng = random.Random(SEED)
    print(f"RELIABILITY_SEED={SEED} rounds={ROUNDS} kills per phase={KILLS}")
    assert not (get(spoke, "servingplatforms") or {}).get("items"), "a ServingPlatform exists"
    objects = expected_objects(bundles)
    records: list[Record] = []
    try:
        for round_ in range(ROUNDS):
            for how in ("Removed", "deletion"):
                records.append(install_with_kills(spoke, kube, agent, objects, rng))
                check_installed(spoke, kube, objects)
                records.append(remove_with_kills(spoke, kube, agent, objects, rng, how))
                check_removed(kube, objects)
                if how == "Removed":
                    spoke.kubectl("delete", "servingplatform", NAME, "--timeout=60s")
            print(f"round {round_ + 1}/{ROUNDS} done")
    finally:
        for rec in records:
            print(f"{rec.what}: {len(rec.kills)} kill(s) at {rec.kills}; end state "
                  f"{rec.seconds:.1f}s after the change, {rec.resume:.1f}s after the last restart")
        spoke.kubectl("delete", "servingplatform", "--all", "--wait=false", check=False)
    kills = [k for r in records for k in r.kills]
    assert len(kills) >= 4 * ROUNDS, kills  # every phase was really interrupted
