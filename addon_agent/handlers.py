"""kopf handlers of the agent: thin wrappers around the reconcile functions."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any, cast

import kopf
from kubernetes.client.exceptions import ApiException

from addon_agent import (
    dataplane,
    delivery,
    identity,
    lease,
    ledger,
    metrics,
    namespace_waits,
    namespaces,
    ownership,
    planning,
    removal,
    tenancy,
)
from addon_agent import status as st
from addon_agent.bundle_source import BundleError
from addon_agent.config import AgentConfig
from addon_agent.installer import ISVC_API, Installer, NotReady, Upgrading
from addon_agent.kube import Kube, api_client_for
from addon_agent.login import connection_info
from addon_agent.planning import Plan
from addon_agent.stacks import STACKS, UnknownVersion
from addon_api import constants as c
from addon_api.base import plain
from addon_api.reasons import SEALED_WAITS, SealedReason
from addon_api.reasons import ServingPlatformPhase as Phase
from addon_api.reasons import ServingPlatformReason as Reason
from addon_api.spoke import (
    SealedStorageConnectionSpec,
    SealedStorageConnectionStatus,
    ServingPlatformSpec,
    ServingPlatformStatus,
)

log = logging.getLogger(__name__)

PLATFORMS = (c.GROUP, c.VERSION, "servingplatforms")
SEALED = (c.GROUP, c.VERSION, "sealedstorageconnections")


class Agent:
    """State shared by the handlers: the cluster client, the installer, the private key."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.kube = Kube(api_client_for(config.kubeconfig))
        self.installer = Installer(
            self.kube, config.bundle_dir, config.namespace, config.cache_dir, config.metrics_port,
            external_webhook=(
                (config.external_webhook_url, config.external_webhook_ca)
                if config.external_webhook_url and config.external_webhook_ca
                else None
            ),
        )
        self.lock = threading.Lock()
        self.keyring: identity.Keyring | None = None
        """The agent's private keys (current, and next during a rotation)."""
        self.ledger = ledger.Ledger(self.kube, config.state_namespace)
        self.plans: dict[str, tuple[int | None, Plan]] = {}
        """Last applied plan (and the generation it was made for) per ServingPlatform."""
        self.upgrading: set[str] = set()
        """ServingPlatforms whose version change waits for its controllers to roll out."""
        self.waits = namespace_waits.NamespaceWaits()
        """Sealed connections Pending until a target namespace exists."""
        self.delivery_lock = threading.Lock()
        """One delivery at a time (kopf's handlers and the namespace watch may overlap)."""
        self.kept: dict[str, list[str]] = {}
        """Namespaces kept when dropped from servingNamespaces, and what each holds (as the
        last reconcile found them; the namespaces' kept label is what survives a restart)."""

    # ServingPlatform ----------------------------------------------------------------------------

    def _write_platform_status(self, name: str, status: ServingPlatformStatus) -> None:
        self.kube.patch_status(
            f"{c.GROUP}/{c.VERSION}", c.KIND_SERVING_PLATFORM, name, status.to_patch()
        )

    def reconcile_platform(self, body: kopf.Body) -> None:
        """Install or remove the stack as the ServingPlatform says; write its status."""
        if body.metadata.get("deletionTimestamp"):
            return
        name = body.metadata["name"]
        generation = body.metadata.get("generation")
        previous = list((body.get("status") or {}).get("conditions") or [])
        with self.lock, metrics.RECONCILE_SECONDS.labels(kind="ServingPlatform").time():
            owner = self._owner()
            if owner != name:
                message = f"ServingPlatform {owner} manages the serving stack of this cluster"
                self._write_platform_status(
                    name,
                    st.simple_status(
                        Phase.DEGRADED, Reason.ANOTHER_PLATFORM_OWNS, message, generation, previous
                    ),
                )
                return
            spec = ServingPlatformSpec.from_wire(plain(body["spec"]))
            if spec.management_state == "Removed":
                self._remove(name, spec.force, generation, previous)
                return
            denied = tenancy.platform_refusal(
                spec, self.config.target_namespaces, self.config.allow_dev_flags,
                self.config.namespace)
            if denied is not None:
                log.warning("%s: refused: %s", name, denied[1])
                self._write_platform_status(name, st.simple_status(
                    Phase.DEGRADED, denied[0], denied[1], generation, previous))
                return
            if spec.management_state == "Unmanaged":
                self._serve_unmanaged(name, spec, generation, previous)
                return
            try:
                plan = self.installer.build_plan(spec)
                self.upgrading.discard(name)
                found = self.installer.find_installation(plan.stack)
                mark = found.owner()
                if mark is not None:  # another operator's stack: nothing is changed
                    refused = ownership.refused_status(found, mark, generation, previous)
                    log.info("%s: %s", name, refused.message)
                    self._write_platform_status(name, refused)
                    return
                self.installer.install(plan)
            except UnknownVersion as err:
                self._write_platform_status(
                    name,
                    st.simple_status(
                        Phase.DEGRADED, Reason.VERSION_NOT_CARRIED, str(err), generation,
                        previous,
                    ),
                )
                return
            except Upgrading as err:
                # The controllers' rollout events (deployment_changed) carry the upgrade on.
                self.upgrading.add(name)
                self.plans[name] = (generation, plan)
                status = self.installer.read_upgrade_status(plan, err, generation, previous)
                log.info("%s: %s (%s)", name, status.phase, status.message[:200])
                self._write_platform_status(name, status)
                return
            except BundleError as err:
                metrics.RECONCILE_ERRORS.labels(kind="ServingPlatform").inc()
                self._write_platform_status(
                    name,
                    st.simple_status(
                        Phase.DEGRADED, Reason.BUNDLE_ERROR, str(err), generation, previous
                    ),
                )
                return
            except NotReady as err:
                self._write_platform_status(
                    name,
                    st.simple_status(
                        Phase.INSTALLING, Reason.INSTALLING, str(err), generation, previous
                    ),
                )
                return
            except ApiException as err:
                # Report what failed, then let kopf retry with backoff.
                metrics.RECONCILE_ERRORS.labels(kind="ServingPlatform").inc()
                message = f"apply failed: {err.status} {err.reason}: {str(err.body)[:400]}"
                with contextlib.suppress(Exception):
                    self._write_platform_status(
                        name,
                        st.simple_status(
                            Phase.DEGRADED, Reason.APPLY_FAILED, message, generation, previous
                        ),
                    )
                raise kopf.TemporaryError(message, delay=10) from err
            self._enable_namespaces(spec)
            self.plans[name] = (generation, plan)
            status = st.with_kept(self.installer.read_status(plan, generation, previous),
                                  self.kept)
            log.info("%s: %s (%s)", name, status.phase, status.message[:200])
            self._write_platform_status(name, status)
            self._record_metrics(spec.platform, status, plan.controllers())

    def _serve_unmanaged(self, name: str, spec: ServingPlatformSpec, generation: int | None,
                         previous: list[dict[str, Any]]) -> None:
        """``Unmanaged``: check the stack someone else installed; change nothing of it.

        The serving namespaces are still the agent's to enable. What an earlier Managed
        install of the agent left is kept as it is (not reconciled, not removed).
        """
        found = self.installer.find_installation(STACKS[spec.platform])
        check = ownership.unmanaged_status(found, generation, previous)
        self._enable_namespaces(spec)
        self.plans.pop(name, None)
        log.info("%s: %s (%s)", name, check.status.phase, check.status.message[:200])
        self._write_platform_status(name, st.with_kept(check.status, self.kept))
        metrics.record_platform(spec.platform, check.status.phase is Phase.AVAILABLE,
                                check.components)

    def _enable_namespaces(self, spec: ServingPlatformSpec) -> None:
        """Enable the serving namespaces (monitored by the spec's Prometheus, if any).

        Remembers the namespaces kept (:attr:`kept`) for the statuses written after.
        """
        self.kept = namespaces.reconcile(
            self.kube,
            spec.serving_namespaces,
            spec.platform,
            spec.monitoring.prometheus_subject()
            if spec.monitoring and spec.monitoring.enabled
            else None,
        )

    def _owner(self) -> str | None:
        return st.owning_platform(self.kube.list(f"{c.GROUP}/{c.VERSION}", c.KIND_SERVING_PLATFORM))

    def _record_metrics(
        self, platform: str, status: ServingPlatformStatus, controllers: list[tuple[str, str]]
    ) -> None:
        components = {
            n: st.deployment_available(self.kube.get("apps/v1", "Deployment", n, ns))
            for ns, n in controllers
        }
        metrics.record_platform(platform, status.phase is Phase.AVAILABLE, components)

    def _remove(
        self,
        name: str,
        force: bool,
        generation: int | None,
        previous: list[dict[str, Any]],
    ) -> bool:
        """Uninstall; True when nothing the agent installed remains (see addon_agent.removal).

        Nothing is deleted while InferenceServices (or other finalizer-carrying objects of the
        stack's kinds) exist: the add-on's are waited for; objects the add-on did not create
        block unless ``force`` (those, and any of a kind whose CRD would be deleted). Then the
        serving namespaces are disabled and the inventory deleted in reverse install order;
        namespaces the agent created that hold objects it did not create are kept, and a
        forced removal also keeps the CRDs user objects remain in (all named).
        """
        refs = self.installer.inventory()
        instances = self.installer.stack_instances(refs)
        held = removal.hold(instances, force)
        if held is not None:
            self._write_platform_status(
                name, st.simple_status(held.phase, held.reason, held.message, generation, previous)
            )
            return False
        doomed = [*namespaces.created_by_agent(self.kube), *namespaces.kept(self.kube),
                  *self.installer.namespaces_to_delete(refs)]
        left = removal.leftovers(
            instances,
            [r.name for r in refs if r.kind == "CustomResourceDefinition"],
            doomed,
            contents=namespaces.contents(self.kube, doomed),
            force=force,
        )
        keep = left.crds | left.namespaces
        if left.message:
            log.info("%s", left.message)
        if any(r.name not in keep for r in refs):
            self._write_platform_status(
                name,
                st.simple_status(
                    Phase.REMOVING, Reason.REMOVING, "uninstalling the stack", generation, previous
                ),
            )
        namespaces.disable_all(self.kube, keep=left.namespaces)
        remaining = self.installer.uninstall(keep=keep)
        if remaining:
            message = "waiting for removal of " + ", ".join(
                f"{r.kind} {r.name}" for r in remaining[:10]
            )
            self._write_platform_status(
                name,
                st.simple_status(Phase.REMOVING, Reason.REMOVING, message, generation, previous),
            )
            return False
        # What is kept now is named in the message, with the stack's own leftovers.
        self.kept = {}
        self._write_platform_status(
            name,
            st.with_kept(st.simple_status(
                Phase.REMOVED,
                removal.REASON_LEFTOVERS if left.message else Reason.REMOVED,
                left.message or "the stack is not installed",
                generation,
                previous,
            ), {}),
        )
        metrics.record_platform("", False, {})
        self.plans.pop(name, None)
        return True

    def deployment_changed(self, namespace: str, name: str, deleted: bool) -> None:
        """A stack Deployment changed: refresh the status now; re-create it if it was deleted."""
        for platform_name, (generation, plan) in list(self.plans.items()):
            if (namespace, name) not in plan.controllers():
                continue
            if platform_name in self.upgrading:  # the rollout may let the upgrade go on
                body = self.kube.get(
                    f"{c.GROUP}/{c.VERSION}", c.KIND_SERVING_PLATFORM, platform_name
                )
                if body is not None:
                    self.reconcile_platform(kopf.Body(cast(kopf.RawBody, body)))
                continue
            with self.lock:
                body = self.kube.get(
                    f"{c.GROUP}/{c.VERSION}", c.KIND_SERVING_PLATFORM, platform_name
                )
                meta = (body or {}).get("metadata") or {}
                if (
                    body is None
                    or meta.get("deletionTimestamp")
                    or meta.get("generation") != generation
                    or body["spec"].get("managementState") == "Removed"
                ):
                    continue
                if deleted and self.kube.metadata("apps/v1", "Deployment", name, namespace) is None:
                    # (one of that name made by someone else since is theirs: not applied over)
                    for obj in plan.objects:
                        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == name:
                            self.kube.apply(obj)
                previous = list((body.get("status") or {}).get("conditions") or [])
                status = st.with_kept(self.installer.read_status(plan, generation, previous),
                                      self.kept)
                fields = {k: v for k, v in status.to_patch().items() if k != "conditions"}
                if fields != {
                    k: v for k, v in (body.get("status") or {}).items() if k != "conditions"
                }:
                    log.info("%s: %s (%s)", platform_name, status.phase, status.message[:200])
                    self._write_platform_status(platform_name, status)
                # The gauges follow the event too, not only the next resync (a component
                # that went down is on the hub's dashboards and alerts within a scrape).
                self._record_metrics(str(body["spec"].get("platform", "")), status,
                                     plan.controllers())

    def delete_platform(self, body: kopf.Body) -> None:
        """Uninstall on deletion; raise TemporaryError while blocked or not finished."""
        name = body.metadata["name"]
        spec = ServingPlatformSpec.from_wire(plain(body["spec"]))
        previous = list((body.get("status") or {}).get("conditions") or [])
        if self._owner() != name:
            return  # it never installed anything: nothing to remove
        with self.lock:
            done = self._remove(name, spec.force, body.metadata.get("generation"), previous)
        if not done:
            raise kopf.TemporaryError(
                "stack not removed yet", delay=min(self.config.resync_seconds, 10)
            )

    # SealedStorageConnection --------------------------------------------------------------------

    def deliver(self, body: kopf.Body) -> None:
        """Decrypt a SealedStorageConnection into storage-config entries; write its status."""
        if body.metadata.get("deletionTimestamp"):
            return
        ns, name = body.metadata["namespace"], body.metadata["name"]
        generation = body.metadata.get("generation")
        previous = list((body.get("status") or {}).get("conditions") or [])
        self.waits.done((ns, name))
        status: SealedStorageConnectionStatus
        with self.delivery_lock, \
                metrics.RECONCILE_SECONDS.labels(kind="SealedStorageConnection").time():
            try:
                spec = SealedStorageConnectionSpec.from_wire(plain(body["spec"]))
                refused = tenancy.refused_targets(
                    self.config.target_namespaces, name,
                    spec.source.namespace if spec.source else None,
                    spec.target_namespaces, self.config.namespace,
                )
                if refused:
                    raise delivery.DeliveryError(SealedReason.NAMESPACE_NOT_ALLOWED, refused)
                delivery.deliver(
                    self.kube, self.opener(spec.key_id), self.ledger, ns, name, spec
                )
            except delivery.DeliveryError as err:
                metrics.RECONCILE_ERRORS.labels(kind="SealedStorageConnection").inc()
                if err.reason in SEALED_WAITS:  # delivered again once a target appears
                    self.waits.wait((ns, name), spec.target_namespaces)
                status = st.sealed_status(err.reason, str(err), generation, previous)
            else:
                message = "entry delivered to " + ", ".join(spec.target_namespaces)
                status = st.sealed_status(SealedReason.DELIVERED, message, generation, previous)
        self.kube.patch_status(
            f"{c.GROUP}/{c.VERSION}", c.KIND_SEALED_STORAGE_CONNECTION, name, status.to_patch(),
            namespace=ns,
        )

    def deliver_waiting(self, namespace: str) -> None:
        """Deliver again every sealed connection that waited for ``namespace``."""
        for ns, name in self.waits.take(namespace):
            sealed = self.kube.get(f"{c.GROUP}/{c.VERSION}", c.KIND_SEALED_STORAGE_CONNECTION,
                                   name, ns)
            if sealed is not None:
                log.info("namespace %s is there: delivering %s/%s", namespace, ns, name)
                self.deliver(kopf.Body(cast(kopf.RawBody, sealed)))

    def opener(self, key_id: str = "") -> delivery.Opener:
        """The keys, verify keys and cluster name payloads are opened with.

        The keys are read again when ``key_id`` is not among them (a rotation just started).
        """
        keys = self.keyring
        if keys is None or (key_id and key_id not in keys.by_id()):
            keys = self.keyring = identity.load_keyring(
                self.kube, self.config.namespace, self.config.state_namespace
            )
        return delivery.Opener(keys.by_id(), self.config.seal_verify_keys, self.config.cluster_name)

    def refresh_identity(self) -> None:
        """Reload the keys: start a requested rotation, promote a finished one."""
        self.keyring = identity.refresh(
            self.kube, self.config.namespace, self.config.state_namespace
        )

    def forget(self, body: kopf.Body) -> None:
        """Remove the connection's entries (its deletion)."""
        delivery.remove(self.kube, body.metadata["namespace"], body.metadata["name"])


_loops_stop = threading.Event()


def start_identity_loop(agent: Agent, interval: float) -> threading.Thread:
    """Refresh the agent's keys every ``interval`` seconds (rotation requests, promotion)."""

    def run() -> None:
        while not _loops_stop.wait(max(interval, 1.0)):
            try:
                agent.refresh_identity()
            except Exception as err:  # retried at the next interval
                log.warning("identity refresh failed: %s", err)

    thread = threading.Thread(target=run, name="identity", daemon=True)
    thread.start()
    return thread


MODEL_METRICS_SECONDS = 10.0
"""How often the InferenceService gauges are refreshed from the cluster's InferenceServices
(their one source: the platform reconcile runs only once per resync)."""


def record_data_plane(kube: Kube, isvcs: list[dict[str, Any]]) -> None:
    """Write each model's data-plane verdict on its InferenceService (when it changed).

    Only where KServe keeps the verdict off the predictor pods. Three lists (KServe's
    config, the predictors' Deployments and pods, by KServe's label), and a model's events
    only while KServe has not built its current spec (:mod:`addon_agent.dataplane`).
    """
    configs = kube.list("v1", "ConfigMap",
                        field_selector=f"metadata.name={planning.KSERVE_CONFIG}")
    if not dataplane.kserve_keeps_it_off_pods(configs):
        return  # the verdict would restart the pods whenever it changes
    selector = planning.ISVC_LABEL
    deployments = kube.list("apps/v1", "Deployment", label_selector=selector)
    pods = kube.list("v1", "Pod", label_selector=selector)
    for isvc, deployment, own in dataplane.group(isvcs, deployments, pods):
        if deployment is None:
            continue
        meta = isvc.get("metadata") or {}
        ns, name = str(meta.get("namespace")), str(meta.get("name"))
        events: list[dict[str, Any]] = []
        if dataplane.built(isvc, deployment) is False:
            events = kube.list("v1", "Event", namespace=ns, field_selector=(
                f"involvedObject.kind=InferenceService,involvedObject.name={name}"))
        patch = dataplane.annotation_patch(
            isvc, dataplane.verdict(isvc, deployment, own, events))
        if patch is not None:
            kube.patch(ISVC_API, "InferenceService", name, patch, ns)


DATA_PLANE_TICK = 2.0
"""How often the InferenceServices are looked at for a spec the agent has not judged yet (a
changed generation): judged at once, so a rollout waits seconds for the verdict, not the
metrics interval."""


def start_model_metrics_loop(agent: Agent, interval: float = MODEL_METRICS_SECONDS) -> (
        threading.Thread):
    """Refresh the InferenceService gauges and data-plane verdicts every ``interval`` seconds.

    In between, every :data:`DATA_PLANE_TICK` seconds, one list of the InferenceServices
    judges again as soon as one has a generation its verdict is not about.
    """

    def run() -> None:
        last = 0.0
        while True:
            try:
                if agent.kube.served(ISVC_API, "InferenceService"):
                    isvcs = agent.kube.list(ISVC_API, "InferenceService")
                    due = time.monotonic() - last >= interval
                    if due:
                        metrics.record_inference_services(isvcs)
                    if due or any(dataplane.unjudged(i) for i in isvcs):
                        record_data_plane(agent.kube, isvcs)
                    if due:
                        last = time.monotonic()
            except Exception as err:  # retried at the next interval
                log.warning("refreshing the model metrics failed: %s", err)
            if _loops_stop.wait(min(interval, DATA_PLANE_TICK)):
                return

    thread = threading.Thread(target=run, name="model-metrics", daemon=True)
    thread.start()
    return thread


def register(agent: Agent, registry: kopf.OperatorRegistry) -> None:
    """Register every handler of the agent on ``registry``."""
    config = agent.config
    # backoff: a failed run is retried after one resync, not kopf's default 60 s
    backoff = min(config.resync_seconds, 60)

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        if config.kubeconfig:
            return connection_info(config.kubeconfig)
        return kopf.login_with_service_account(**kwargs)

    @kopf.on.startup(registry=registry)
    def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.persistence.finalizer = f"{c.GROUP}/agent"
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
            prefix=f"agent.{c.GROUP}"
        )
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=f"agent.{c.GROUP}", key="last-handled-configuration"
        )
        settings.posting.level = logging.WARNING
        settings.scanning.disabled = True
        identity.ensure_namespace(agent.kube, config.namespace)
        identity.ensure_namespace(agent.kube, config.state_namespace)
        agent.ledger.adopt(config.namespace)
        agent.keyring = identity.load_keyring(agent.kube, config.namespace,
                                              config.state_namespace)
        lease.start(agent.kube, config.namespace, config.lease_seconds)
        start_identity_loop(agent, config.resync_seconds)
        start_model_metrics_loop(agent)

    @kopf.on.resume(*PLATFORMS, backoff=backoff, registry=registry)
    @kopf.on.create(*PLATFORMS, backoff=backoff, registry=registry)
    @kopf.on.update(*PLATFORMS, field="spec", backoff=backoff, registry=registry)
    def platform_changed(body: kopf.Body, **_: Any) -> None:
        agent.reconcile_platform(body)

    @kopf.timer(*PLATFORMS, interval=config.resync_seconds, backoff=backoff, registry=registry)
    def platform_resync(body: kopf.Body, **_: Any) -> None:
        try:
            agent.reconcile_platform(body)
        except Exception:
            metrics.RECONCILE_ERRORS.labels(kind="ServingPlatform").inc()
            raise

    @kopf.on.event(
        "apps",
        "v1",
        "deployments",
        labels={c.LABEL_MANAGED_BY: c.FIELD_MANAGER},
        registry=registry,
    )
    def stack_deployment_event(type: str | None, body: kopf.Body, **_: Any) -> None:
        if type is None:  # the initial listing; the resume handlers cover it
            return
        agent.deployment_changed(
            body.metadata.get("namespace") or "", body.metadata["name"], deleted=type == "DELETED"
        )

    @kopf.on.delete(*PLATFORMS, backoff=backoff, registry=registry)
    def platform_deleted(body: kopf.Body, **_: Any) -> None:
        agent.delete_platform(body)

    @kopf.on.resume(*SEALED, registry=registry)
    @kopf.on.create(*SEALED, registry=registry)
    @kopf.on.update(*SEALED, field="spec", registry=registry)
    def sealed_changed(body: kopf.Body, **_: Any) -> None:
        agent.deliver(body)

    @kopf.timer(
        *SEALED, interval=max(config.resync_seconds, 30), backoff=backoff, registry=registry
    )
    def sealed_resync(body: kopf.Body, **_: Any) -> None:
        agent.deliver(body)

    @kopf.on.delete(*SEALED, registry=registry)
    def sealed_deleted(body: kopf.Body, **_: Any) -> None:
        agent.waits.done((body.metadata["namespace"], body.metadata["name"]))
        agent.forget(body)

    @kopf.on.event("", "v1", "namespaces", registry=registry,
                   when=lambda name, **_: agent.waits.waiting_for(str(name)))
    def namespace_event(type: str | None, body: kopf.Body, name: str, **_: Any) -> None:
        """A namespace that sealed connections wait for appeared: deliver them now."""
        if type == "DELETED" or body.metadata.get("deletionTimestamp"):
            return
        agent.deliver_waiting(name)
