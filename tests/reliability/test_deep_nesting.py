"""An intent nested thousands of levels deep (the API server admits 10,000) must not stop the
manager: it is reported Invalid naming the field, and other intents are still reconciled.

Found by the bad-input work (docs/reliability.md, Bad input at scale): before the fix, kopf's
watcher failed to decode such an object (Python's default recursion limit) and the whole
manager process exited.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from addon_api.base import MAX_NESTING, too_deep
from addon_api.hub import MultiClusterServingRuntime
from testbed.fleet import Testbed
from testbed.support.manager import Manager, placement, running_manager
from testbed.support.waiting import eventually

DEPTHS = (1_100, 9_000)


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def mcsr_json(name: str, namespace: str, extra: str = "{}") -> str:
    """A MultiClusterServingRuntime as JSON text (the Python encoder stops at ~1,000 levels)."""
    return (
        '{"apiVersion":"modelserving.opendatahub.io/v1alpha1",'
        '"kind":"MultiClusterServingRuntime",'
        f'"metadata":{{"name":"{name}","namespace":"{namespace}"}},'
        '"spec":{"placementRef":{"name":"default"},"targetNamespace":"models","template":{'
        '"containers":[{"name":"c","image":"img:1"}],"supportedModelFormats":[{"name":"f"}],'
        f'"builtInAdapter":{extra}}}}}}}'
    )


def test_model_rejects_deep_objects_without_recursing() -> None:
    body = json.loads(mcsr_json("x", "ns"))
    body["spec"]["template"]["builtInAdapter"] = deep = {}
    for _ in range(5_000):  # built iteratively: deeper than the default recursion limit
        deep["a"] = {}
        deep = deep["a"]
    assert too_deep(body, MAX_NESTING) is not None
    where = r"(?s)spec\.template\.builtInAdapter\.a\n.*nested more than 64 levels"
    with pytest.raises(ValueError, match=where):
        MultiClusterServingRuntime.from_object(body)
    shallow = json.loads(mcsr_json("x", "ns", nested(MAX_NESTING - 6)))
    MultiClusterServingRuntime.from_object(shallow)


@pytest.fixture(scope="module")
def manager(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Manager]:
    with running_manager(
        testbed, tmp_path_factory.mktemp("manager"), "--no-addon-enablement"
    ) as mgr:
        yield mgr
        # Stopped while Events about the deleted namespaces' intents cannot be posted (403,
        # the namespace is terminating): it still exits on SIGTERM, not 15 s later by SIGKILL
        # (kopf retried such a post for 54 s, and the stop waited).
        assert not mgr.stop(), "the manager was still running 15 s after SIGTERM"
        # The ordinary intent's daemon, waiting for a wakeup, returned when asked to stop: not
        # cancelled, which kopf logs as a warning and posts as an Event on the intent (one per
        # intent at every stop). (The 9,000-deep one's may be in a write when the stop comes.)
        cancelled = [line for line in mgr.tail(100000).splitlines()
                     if "Will escalate" in line and '/after"' in line]
        assert not cancelled, cancelled


@pytest.mark.testbed
def test_deep_intent_is_invalid_and_others_still_reconcile(
    testbed: Testbed, manager: Manager
) -> None:
    hub = testbed.hub
    spaces = [f"deep-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    for ns in spaces:
        testbed.bind_clusterset(ns)
        hub.kubectl("apply", "-f", "-", input=json.dumps(placement("default", ns)))
    try:
        for depth in DEPTHS:
            created = hub.kubectl(
                "create", "-f", "-", input=mcsr_json(f"deep-{depth}", spaces[0], nested(depth))
            )
            assert created.returncode == 0
        hub.kubectl("create", "-f", "-", input=mcsr_json("after", spaces[1]))

        def phase(ns: str, name: str) -> Any:
            out = hub.kubectl(
                "get", "mcsr", "-n", ns, name, "-o", "jsonpath={.status.phase}", check=False
            )
            return out.stdout.strip()

        assert eventually(lambda: phase(spaces[1], "after") not in ("", "Invalid"), timeout=120)
        for depth in DEPTHS:
            assert eventually(lambda d=depth: phase(spaces[0], f"deep-{d}") == "Invalid",
                              timeout=120)
            # the status (small) is readable; the object itself is not, by Python's default
            status = json.loads(hub.kubectl(
                "get", "mcsr", "-n", spaces[0], f"deep-{depth}", "-o", "jsonpath={.status}"
            ).stdout)
            ready = next(x for x in status["conditions"] if x["type"] == "Ready")
            assert ready["reason"] == "InvalidSpec"
            assert ready["message"].startswith(
                "spec.template.builtInAdapter.a: nested more than 64"
            ), ready
        assert manager.proc is not None and manager.proc.poll() is None
        assert "RecursionError" not in manager.log_path.read_text()
    finally:
        for ns in spaces:
            hub.kubectl("delete", "namespace", ns, "--wait=false", check=False)
