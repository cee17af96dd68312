"""The manager's core-group requests (addon_manager.shell.corev1) against the hub's real API
server, as the chart's manager ServiceAccount: the sealing keys Secret and the sealing state
ConfigMap read and written (compare-and-swap under contention), a name the chart's Role does not
grant refused, and the Secret watches of a granted and an ungranted namespace."""

from __future__ import annotations

import asyncio
import base64
import itertools
import threading

import pytest
from kubernetes import config
from kubernetes.client.exceptions import ApiException

from addon_manager.facts.secrets import READABLE, parse_secret
from addon_manager.shell import sealkeys
from addon_manager.shell.corev1 import CoreV1
from addon_manager.shell.secrets import SecretWatches
from testbed import identities
from testbed.fleet import Testbed
from testbed.support.manager import manager_identity

NS = identities.MANAGER_NAMESPACE


def _core(testbed: Testbed) -> CoreV1:
    return CoreV1(config.new_client_from_config(str(manager_identity(testbed))))


def test_keys_and_state_as_the_manager_with_conflicts_retried(testbed: Testbed) -> None:
    core = _core(testbed)
    keys = sealkeys.load_or_create_keys(core, NS)  # created here or by an earlier manager
    assert sealkeys.load_or_create_keys(core, NS).secret_data() == keys.secret_data()
    # Blocks of the sealing sequence from three threads at once: each one its own, so every
    # stale replace (409) was read again and retried, none lost. (A replace fails only when
    # another thread's write landed since its read: at most the others' six writes, within
    # the store's ten attempts.)
    store = sealkeys.HubStore(core, NS)
    starts: list[int] = []
    lock = threading.Lock()

    def allocate() -> None:
        for _ in range(3):
            start = store.allocate(10)
            with lock:
                starts.append(start)

    threads = [threading.Thread(target=allocate) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    starts.sort()
    assert len(starts) == 9 and all(b - a >= 10 for a, b in itertools.pairwise(starts)), starts
    assert int(store.read_state()[sealkeys.SEQUENCE]) >= starts[-1] + 10
    # A stale resourceVersion is refused with the client's own error, as CoreV1Api's was.
    cm = core.get("configmaps", NS, sealkeys.STATE_CONFIGMAP)
    store.allocate(1)
    with pytest.raises(ApiException) as stale:
        core.replace("configmaps", NS, sealkeys.STATE_CONFIGMAP, cm)
    assert stale.value.status == 409
    # The chart's Role names the objects the manager may read: no other one.
    with pytest.raises(ApiException) as refused:
        core.get("configmaps", NS, "kube-root-ca.crt")
    assert refused.value.status == 403


def test_secret_watches_see_a_granted_namespace_and_are_refused_another(
        testbed: Testbed) -> None:
    hub = testbed.hub
    granted, other = "corev1-granted", "corev1-other"
    for ns in (granted, other):
        hub.kubectl("create", "namespace", ns)
    identities.grant_manager_secrets(hub, granted)
    hub.kubectl("create", "secret", "generic", "creds", "-n", granted, "--from-literal=k=v1")
    woken: list[tuple[str, str | None]] = []

    async def scenario() -> None:
        api = config.new_client_from_config(str(manager_identity(testbed)))
        watches = SecretWatches(api, lambda ns, name: woken.append((ns, name)))
        try:
            await watches.settled(granted, timeout=30)
            await watches.settled(other, timeout=30)
            assert watches.access(granted) == READABLE
            assert watches.get(granted, "creds") == parse_secret(
                {"k": base64.b64encode(b"v1").decode()})
            assert watches.access(other).state == "forbidden"
            assert "HTTP 403" in watches.access(other).detail
            # Changes after the list arrive through the watch.
            hub.kubectl("create", "secret", "generic", "later", "-n", granted,
                        "--from-literal=k=v2")
            hub.kubectl("delete", "secret", "creds", "-n", granted)
            for _ in range(300):
                if (watches.get(granted, "later") is not None
                        and watches.get(granted, "creds") is None):
                    break
                await asyncio.sleep(0.1)
            assert watches.get(granted, "later") == parse_secret(
                {"k": base64.b64encode(b"v2").decode()})
            assert watches.get(granted, "creds") is None
            assert (granted, "later") in woken and woken.count((granted, "creds")) >= 2
        finally:
            watches.stop()

    try:
        asyncio.run(scenario())
    finally:
        for ns in (granted, other):
            hub.kubectl("delete", "namespace", ns, "--wait=false", check=False)

