"""The manager's sealing state on the hub: signing and hash keys, sequences, pinned agent keys.

In the manager's namespace:

* Secret ``model-serving-sealing-keys``: ``signingKey`` (Ed25519 seed; agents verify its
  signatures) and ``hashKey`` (HMAC key of the render-hash of works carrying sealed data).
  Created when absent; its values are never logged.
* ConfigMap ``model-serving-sealing``: ``sequence`` (the next unallocated sealing sequence),
  ``pin.<cluster>`` (the agent public key pinned for a cluster) and ``approve.<cluster>`` (an
  agent key id a hub admin approved; see :mod:`addon_manager.kinds.pinning`).

Sequences. Each envelope carries a sequence the agent never accepts going down. A manager
allocates a block of :data:`BLOCK` numbers at a time by compare-and-swap on the ConfigMap
(resourceVersion), starting at ``max(stored, now in microseconds)``: a restart or a new
leader always allocates above every number handed out before (the stored counter), two
replicas that both think they lead never share a block (the swap), and should the ConfigMap
be lost the wall clock still starts above anything allocated earlier in practice. Wall-clock
time alone is not enough (replicas' clocks differ; one behind would be refused), nor is the
ManifestWork's generation (it restarts at 1 when a work is re-created).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from addon_api import sealing
from addon_manager.facts.sealing import AgentKey

if TYPE_CHECKING:
    from addon_manager.shell.corev1 import CoreV1

log = logging.getLogger(__name__)
T = TypeVar("T")

KEYS_SECRET = "model-serving-sealing-keys"
STATE_CONFIGMAP = "model-serving-sealing"
SIGNING_KEY = "signingKey"
HASH_KEY = "hashKey"
SEQUENCE = "sequence"
PIN_PREFIX = "pin."
APPROVE_PREFIX = "approve."
BLOCK = 1000
VERIFY_KEY_VARIABLE = "SEAL_VERIFY_KEY"
"""AddOnDeploymentConfig variable the AddOnTemplate passes to the agent (--seal-verify-key)."""


@dataclass(frozen=True)
class SealingKeys:
    """The manager's signing key and render-hash key (raw bytes; never logged)."""

    signing_key: bytes
    hash_key: bytes

    @property
    def verify_key(self) -> str:
        """Base64 Ed25519 verify key agents are configured with (public)."""
        return sealing.verify_key_of(self.signing_key)

    def __repr__(self) -> str:
        return f"SealingKeys(verify_key={self.verify_key!r})"

    @staticmethod
    def generate() -> SealingKeys:
        """New random keys."""
        return SealingKeys(sealing.generate_signing_key(), _random(32))

    def secret_data(self) -> dict[str, str]:
        """The Secret's data (base64 values)."""
        return {SIGNING_KEY: base64.b64encode(self.signing_key).decode(),
                HASH_KEY: base64.b64encode(self.hash_key).decode()}

    @staticmethod
    def from_secret_data(data: dict[str, str]) -> SealingKeys:
        """Keys from a Secret's data; ValueError when a value is missing or malformed."""
        try:
            signing = base64.b64decode(data[SIGNING_KEY], validate=True)
            hashing = base64.b64decode(data[HASH_KEY], validate=True)
        except (KeyError, ValueError) as err:
            raise ValueError(f"Secret {KEYS_SECRET} lacks a valid {SIGNING_KEY}/{HASH_KEY}") \
                from err
        if len(signing) != 32 or len(hashing) < 16:
            raise ValueError(f"Secret {KEYS_SECRET}: {SIGNING_KEY} must be 32 bytes, "
                             f"{HASH_KEY} at least 16")
        return SealingKeys(signing, hashing)


def _random(n: int) -> bytes:
    import os

    return os.urandom(n)


def next_block(stored: int, now_us: int, size: int = BLOCK) -> tuple[int, int]:
    """(first number of the new block, counter to store) from the stored counter and clock."""
    start = max(stored, now_us)
    return start, start + size


def parse_state(data: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(pins: cluster -> public key, approvals: cluster -> key id) from the ConfigMap data."""
    pins = {k[len(PIN_PREFIX):]: v for k, v in data.items() if k.startswith(PIN_PREFIX) and v}
    approvals = {k[len(APPROVE_PREFIX):]: v.strip() for k, v in data.items()
                 if k.startswith(APPROVE_PREFIX) and v}
    return pins, approvals


def approve_command(namespace: str, cluster: str, key_id: str) -> str:
    """The command a hub admin runs to approve ``key_id`` for ``cluster``."""
    patch = json.dumps({"data": {f"{APPROVE_PREFIX}{cluster}": key_id}})
    return f"kubectl -n {namespace} patch configmap {STATE_CONFIGMAP} --type=merge -p '{patch}'"


def with_verify_key(variables: list[dict[str, Any]], verify_key: str) -> list[dict[str, Any]]:
    """AddOnDeploymentConfig ``customizedVariables`` with :data:`VERIFY_KEY_VARIABLE` set."""
    out = [v for v in variables if v.get("name") != VERIFY_KEY_VARIABLE]
    return [*out, {"name": VERIFY_KEY_VARIABLE, "value": verify_key}]


class Store(Protocol):
    """Where the sealing state is kept (:class:`HubStore`; tests keep it in memory)."""

    def allocate(self, size: int) -> int:
        """Allocate a block of sequences; return its first number."""

    def read_state(self) -> dict[str, str]:
        """The state ConfigMap's data."""

    def write_pin(self, cluster: str, public_key: str) -> None:
        """Record ``public_key`` as the pinned key of ``cluster`` (and clear its approval)."""


class Sealer:
    """The manager's sealing state in memory, written through a :class:`Store`."""

    def __init__(self, keys: SealingKeys, store: Store, namespace: str = "",
                 block: int = BLOCK) -> None:
        self.keys = keys
        self.store = store
        self.namespace = namespace
        self.block = block
        self._next = 0
        self._end = 0
        self.pins, self.approvals = parse_state(store.read_state())
        self.publish: Callable[[], bool] | None = None
        """Writes the add-on's AddOnDeploymentConfig again when it is not as it should be (main()
        sets it): made again if deleted, updated when the chart's ConfigMap changed
        (:mod:`addon_manager.shell.addonconfig`)."""
        self._pending: dict[str, str] = {}
        self._lock = asyncio.Lock()

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(None, fn)

    async def next_sequence(self) -> int:
        """The next sealing sequence (allocating a block when the current one is used up)."""
        async with self._lock:
            if self._next >= self._end:
                start = await self._run(lambda: self.store.allocate(self.block))
                self._next, self._end = start, start + self.block
            self._next += 1
            return self._next

    def new_block(self) -> None:
        """Seal from a new block from now on (a sharded replica that took a shard over).

        The replica that held the shard before may have sealed from a block allocated after
        this replica's current one; a new block starts above every block allocated so far, so
        no sequence the agents saw from the old holder is ever followed by a lower one.
        """
        self._next = self._end

    def pinned(self, cluster: str) -> AgentKey | None:
        """The key pinned for ``cluster`` (pending writes included)."""
        public = self._pending.get(cluster) or self.pins.get(cluster)
        return AgentKey(public, sealing.key_id(public)) if public else None

    def approved(self, cluster: str) -> str:
        """The key id a hub admin approved for ``cluster`` ("" for none)."""
        return self.approvals.get(cluster, "")

    def pin(self, cluster: str, key: AgentKey) -> None:
        """Pin ``key`` for ``cluster`` (written by :meth:`flush`, before anything is sealed)."""
        self._pending[cluster] = key.public_key

    async def flush(self) -> None:
        """Write the pins decided since the last flush."""
        while self._pending:
            cluster, public = next(iter(self._pending.items()))
            await self._run(functools.partial(self.store.write_pin, cluster, public))
            log.info("pinned agent key %s for cluster %s", sealing.key_id(public), cluster)
            self.pins[cluster] = public
            self.approvals.pop(cluster, None)
            self._pending.pop(cluster, None)

    async def refresh(self) -> set[str]:
        """Read pins and approvals again; return the clusters whose entries changed."""
        pins, approvals = parse_state(await self._run(self.store.read_state))
        changed = {cl for cl in set(pins) | set(self.pins) if pins.get(cl) != self.pins.get(cl)}
        changed |= {cl for cl in set(approvals) | set(self.approvals)
                    if approvals.get(cl) != self.approvals.get(cl)}
        self.pins, self.approvals = pins, approvals
        return changed

    def approve_hint(self, cluster: str, key_id: str) -> str:
        """The command that approves ``key_id`` for ``cluster``."""
        return approve_command(self.namespace or "<manager-namespace>", cluster, key_id)


# the hub ----------------------------------------------------------------------------------------

ADC_GROUP, ADC_VERSION, ADC_PLURAL = (
    "addon.open-cluster-management.io", "v1alpha1", "addondeploymentconfigs",
)


def load_or_create_keys(core: CoreV1, namespace: str) -> SealingKeys:
    """The keys from the Secret in ``namespace``, created with new keys when absent."""
    from kubernetes.client.exceptions import ApiException

    for _ in range(3):
        try:
            secret = core.get("secrets", namespace, KEYS_SECRET)
            return SealingKeys.from_secret_data(dict(secret.get("data") or {}))
        except ApiException as err:
            if err.status != 404:
                raise
        keys = SealingKeys.generate()
        body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": KEYS_SECRET, "namespace": namespace},
                "data": keys.secret_data()}
        try:
            core.create("secrets", namespace, body)
            log.info("created the sealing keys Secret %s/%s", namespace, KEYS_SECRET)
            return keys
        except ApiException as err:
            if err.status != 409:  # another replica created it first: read theirs
                raise
    raise RuntimeError(f"could not read or create Secret {namespace}/{KEYS_SECRET}")


class HubStore:
    """A :class:`Store` on the hub: the ConfigMap ``model-serving-sealing`` (compare-and-swap)."""

    def __init__(self, core: CoreV1, namespace: str) -> None:
        self.core = core
        self.namespace = namespace

    def _update(self, change: Callable[[dict[str, str]], T]) -> T:
        from kubernetes.client.exceptions import ApiException

        for _ in range(10):
            try:
                cm = self.core.get("configmaps", self.namespace, STATE_CONFIGMAP)
            except ApiException as err:
                if err.status != 404:
                    raise
                data: dict[str, str] = {}
                out = change(data)
                try:
                    self.core.create("configmaps", self.namespace, {
                        "apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": STATE_CONFIGMAP, "namespace": self.namespace},
                        "data": data,
                    })
                    return out
                except ApiException as err2:
                    if err2.status == 409:
                        continue
                    raise
            data = dict(cm.get("data") or {})
            out = change(data)
            cm["data"] = data
            try:
                self.core.replace("configmaps", self.namespace, STATE_CONFIGMAP, cm)
                return out
            except ApiException as err:
                if err.status == 409:  # someone else wrote in between: read again
                    continue
                raise
        raise RuntimeError(f"ConfigMap {self.namespace}/{STATE_CONFIGMAP} keeps changing")

    def allocate(self, size: int) -> int:
        """See :class:`Store`."""

        def change(data: dict[str, str]) -> int:
            try:
                stored = int(data.get(SEQUENCE, "0"))
            except ValueError:
                stored = 0
            start, new = next_block(stored, time.time_ns() // 1000, size)
            data[SEQUENCE] = str(new)
            return start

        return self._update(change)

    def read_state(self) -> dict[str, str]:
        """See :class:`Store`."""
        from kubernetes.client.exceptions import ApiException

        try:
            cm = self.core.get("configmaps", self.namespace, STATE_CONFIGMAP)
        except ApiException as err:
            if err.status == 404:
                return {}
            raise
        return dict(cm.get("data") or {})

    def write_pin(self, cluster: str, public_key: str) -> None:
        """See :class:`Store`."""

        def change(data: dict[str, str]) -> None:
            data[PIN_PREFIX + cluster] = public_key
            data.pop(APPROVE_PREFIX + cluster, None)

        self._update(change)


def publish_verify_key(custom: Any, namespace: str, name: str, verify_key: str) -> bool:
    """Set :data:`VERIFY_KEY_VARIABLE` in the AddOnDeploymentConfig ``namespace/name``.

    The chart's AddOnTemplate passes it to every agent as ``--seal-verify-key``. False when
    that AddOnDeploymentConfig does not exist (a manager run without the chart).
    """
    from kubernetes.client.exceptions import ApiException

    for _ in range(5):
        try:
            adc = custom.get_namespaced_custom_object(ADC_GROUP, ADC_VERSION, namespace,
                                                      ADC_PLURAL, name)
        except ApiException as err:
            if err.status in (403, 404):
                return False
            raise
        spec = adc.setdefault("spec", {})
        variables = list(spec.get("customizedVariables") or [])
        wanted = with_verify_key(variables, verify_key)
        if sorted(map(json.dumps, variables)) == sorted(map(json.dumps, wanted)):
            return True
        spec["customizedVariables"] = wanted
        try:
            custom.replace_namespaced_custom_object(ADC_GROUP, ADC_VERSION, namespace,
                                                    ADC_PLURAL, name, adc)
            return True
        except ApiException as err:
            if err.status != 409:
                raise
    return False
