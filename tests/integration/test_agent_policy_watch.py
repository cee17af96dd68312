"""The agent's watch of its namespace policy ConfigMap (addon_agent.shell.background), run
in-process against the first spoke's real API server: each change of that one object (made,
changed, deleted) is reported once, and a change of any other ConfigMap beside it is not."""

from __future__ import annotations

import json
import threading

from addon_agent.io.kube import Kube, api_client_for
from addon_agent.shell import background
from addon_api import constants as c
from testbed.fleet import Testbed
from testbed.support.waiting import eventually


def test_each_change_of_the_policy_configmap_is_reported_and_nothing_else(
        testbed: Testbed) -> None:
    spoke = testbed.spokes[0]
    ns = "policy-watch"
    spoke.kubectl("create", "namespace", ns)
    calls: list[int] = []
    lock = threading.Lock()

    def changed() -> None:
        with lock:
            calls.append(1)

    def seen() -> int:
        with lock:
            return len(calls)

    kube = Kube(api_client_for(str(spoke.kubeconfig)))
    try:
        background.start_policy_watch(kube, ns, changed)
        # The first watch reports the object as it is: none here, so no call.
        spoke.kubectl("create", "configmap", "other", "-n", ns, "--from-literal=a=1")
        spoke.kubectl("create", "configmap", c.NAMESPACE_POLICY_CONFIGMAP, "-n", ns,
                      f"--from-literal={c.POLICY_KEY_TARGETS}=platform=models")
        eventually(lambda: seen() == 1, timeout=30)
        spoke.kubectl("patch", "configmap", c.NAMESPACE_POLICY_CONFIGMAP, "-n", ns,
                      "--type=merge", "-p",
                      json.dumps({"data": {c.POLICY_KEY_TARGETS: "platform=*"}}))
        eventually(lambda: seen() == 2, timeout=30)
        spoke.kubectl("patch", "configmap", "other", "-n", ns, "--type=merge",
                      "-p", '{"data": {"a": "2"}}')
        spoke.kubectl("delete", "configmap", c.NAMESPACE_POLICY_CONFIGMAP, "-n", ns)
        eventually(lambda: seen() == 3, timeout=30)
        spoke.kubectl("delete", "configmap", "other", "-n", ns)
        # A later change of the policy still reports (the watch lives on), the other
        # ConfigMap's changes never did.
        spoke.kubectl("create", "configmap", c.NAMESPACE_POLICY_CONFIGMAP, "-n", ns,
                      f"--from-literal={c.POLICY_KEY_TARGETS}=platform=models")
        eventually(lambda: seen() == 4, timeout=30)
    finally:
        spoke.kubectl("delete", "namespace", ns, "--wait=false", check=False)
