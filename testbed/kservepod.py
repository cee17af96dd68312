"""The testbed as the kubelet of KServe's controller pod: it runs the release the pod asks for.

KServe's controller manager runs outside the spoke (:meth:`testbed.fleet.Testbed.
start_kserve_controller`), while kwok reports the controller Deployment's pod rolled out. When
the agent upgrades or downgrades the stack it changes that Deployment's image; a kubelet would
then start the new release's pod, and the Service in front of the webhooks would keep sending
admission requests to the old pod until the new one is Ready. Here the webhook URL is one
loopback port, so the old and the new process cannot both serve: the swap must come before
anything acts on the new release's configuration, or a pod created meanwhile is refused
(``failed calling webhook ... connection refused``).

So :class:`ReleaseFollower` watches the Deployment from the moment the controller first runs
and swaps the process as soon as the image's release changes, in its own thread: before kwok
can report the new pod rolled out, so before the agent, which waits for that rollout, writes the
release's configuration. The old process stops first; the new one starts its webhook server
before its caches and controllers (controller-runtime's manager order), so every change the new
release makes to a predictor meets a listening webhook.

The thread that swaps is the one that forks the new process (the parent-death signal follows
the forking thread, :class:`testbed.processes.Process`); it lives until the fleet stops.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from addon_agent.stacks import KSERVE
from testbed import versions
from testbed.cluster import Cluster
from testbed.dataplane.kubelet import list_watch

Obj = dict[str, Any]


def release_of(deployment: Obj) -> str:
    """The KServe release of a controller Deployment's ``manager`` image tag.

    "" when the image has no tag the testbed builds (it cannot run that controller).
    """
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    image = next((str(c.get("image", "")) for c in spec.get("containers") or []
                  if c.get("name") == "manager"), "")
    tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
    return tag if tag in versions.KSERVE_ALL else ""


@dataclasses.dataclass
class Swap:
    """One release change the follower acted on (recorded before the old process stops)."""

    release: str
    seen: float
    """``time.monotonic()`` when the watch delivered the Deployment with that image."""
    running: float | None = None
    """``time.monotonic()`` once the new release's process was started."""


class ReleaseFollower:
    """Runs, on one spoke, the release of KServe's controller Deployment image."""

    def __init__(self, spoke: Cluster, run: Callable[[str], object], release: str,
                 log: Callable[[str], None] = print) -> None:
        self.spoke = spoke
        self._run = run
        self.release = release
        """The release whose process runs, or is being started in place of the previous."""
        self.log = log
        self.swaps: list[Swap] = []
        """Every swap, in order (what the tests read)."""
        self.failed: str | None = None
        """Set when the watch failed: the controller no longer follows its Deployment."""
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ReleaseFollower:
        """Watch the controller Deployment (returns at once)."""
        self._thread = threading.Thread(target=self._watch, daemon=True,
                                        name=f"{self.spoke.name} kserve-controller follower")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop following (the thread ends with its watch; the process is the fleet's)."""
        self._stopping.set()

    def _watch(self) -> None:
        from kubernetes import client

        api = self.spoke.api_client()
        apps = client.AppsV1Api(api)

        def list_call(**kwargs: Any) -> Any:
            return apps.list_namespaced_deployment(
                KSERVE.namespace, field_selector=f"metadata.name={KSERVE.controller}", **kwargs)

        try:
            list_watch(list_call, self._stopping, self._listed, self._event)
        except Exception as exc:  # the controller no longer follows: say so
            if not self._stopping.is_set():
                self.failed = f"{type(exc).__name__}: {exc}"
                self.log(f"[kserve] {self.spoke.name}: the controller's follower failed: "
                         f"{self.failed}")
        finally:
            api.close()
        # Ending here would kill the processes this thread forked (their parent-death signal):
        # wait for the fleet to stop them.
        self._stopping.wait()

    def _listed(self, items: list[Obj]) -> None:
        for item in items:
            self._seen(item)

    def _event(self, kind: str, obj: Obj) -> None:
        if kind != "DELETED":
            self._seen(obj)

    def _seen(self, deployment: Obj) -> None:
        release = release_of(deployment)
        if not release or release == self.release or self._stopping.is_set():
            return
        swap = Swap(release, time.monotonic())
        self.swaps.append(swap)
        self.release = release
        self._run(release)
        swap.running = time.monotonic()
        self.log(f"[kserve] {self.spoke.name}: the controller Deployment's image is {release}: "
                 f"its process replaced in {swap.running - swap.seen:.1f}s")
