"""ServingPlatforms: install or remove the stack, write the one status each reconcile decides.

Each reconcile reads the cluster through the I/O layer (:mod:`addon_agent.io.observe`,
:mod:`addon_agent.io.planner`), asks the pure decisions (:mod:`addon_agent.pure.decisions`)
for the status, applies or removes through :mod:`addon_agent.io.applier`, and ends in
:meth:`Platforms.finish`, the one place that writes a ServingPlatform's status.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from typing import cast

import kopf
from kubernetes.client.exceptions import ApiException

from addon_agent.config import AgentConfig
from addon_agent.io import metrics, namespaces, policy_source
from addon_agent.io.applier import Applier, NotReady
from addon_agent.io.bundle_source import BundleError
from addon_agent.io.inventory import Inventory
from addon_agent.io.kube import Kube
from addon_agent.io.observe import Observer
from addon_agent.io.planner import Planner
from addon_agent.pure import decisions, removal, tenancy
from addon_agent.pure import status as st
from addon_agent.pure.decisions import Failure, Outcome, Reading, Route
from addon_agent.pure.planning import Plan
from addon_agent.stacks import STACKS, UnknownVersion
from addon_api import constants as c
from addon_api.base import plain
from addon_api.reasons import ServingPlatformPhase as Phase
from addon_api.reasons import ServingPlatformReason as Reason
from addon_api.spoke import ServingPlatformSpec, ServingPlatformStatus

log = logging.getLogger(__name__)

SPOKE_API = f"{c.GROUP}/{c.VERSION}"
APPLY_RETRY_SECONDS = 10
"""kopf retries a reconcile whose write the API server refused after this long."""
REMOVAL_RECHECK = 3.0
"""Seconds before a removal under way is looked at again (``managementState: Removed``, or the
ServingPlatform deleted; twice as long after each look that found it still under way, at most
a resync): its namespaces and CRDs go within seconds, and nothing the agent watches says when.
(At the resync, a Removed stack took up to a minute to say so.)"""
WEBHOOK_RECHECK = APPLY_RETRY_SECONDS
"""Seconds before serving runtimes the stack's webhook could not be asked about are applied
again (its controller restarting, as in every upgrade; doubling as for
:data:`REMOVAL_RECHECK`). At the resync, the models of such a runtime waited up to a minute
after an upgrade."""


class Platforms:
    """The ServingPlatform reconciles of one agent and what they remember between runs."""

    def __init__(self, config: AgentConfig, kube: Kube, planner: Planner, observer: Observer,
                 applier: Applier, inventory: Inventory) -> None:
        self.config = config
        self.kube = kube
        self.planner = planner
        self.observer = observer
        """Reads of the cluster the decisions need."""
        self.applier = applier
        self.inventory = inventory
        self.lock = threading.Lock()
        """One ServingPlatform reconcile at a time."""
        self.plans: dict[str, tuple[int | None, Plan]] = {}
        """Last applied plan (and the generation it was made for) per ServingPlatform."""
        self.upgrading: set[str] = set()
        """ServingPlatforms whose version change waits for its controllers to roll out."""
        self.kept: dict[str, list[str]] = {}
        """Namespaces kept when dropped from servingNamespaces, and what each holds (as the
        last reconcile found them; the namespaces' kept label is what survives a restart)."""
        self.due_again: dict[str, threading.Timer] = {}
        """ServingPlatforms to reconcile again soon (:meth:`again_soon`), by name."""
        self.again_streak: dict[str, int] = {}
        """Per ServingPlatform, how many reconciles in a row asked to look again soon."""
        self._again_lock = threading.Lock()

    # The one writer -----------------------------------------------------------------------------

    def _write_platform_status(self, name: str, status: ServingPlatformStatus) -> None:
        self.kube.patch_status(SPOKE_API, c.KIND_SERVING_PLATFORM, name, status.to_patch())

    def finish(self, reading: Reading, outcome: Outcome) -> Outcome:
        """Write the outcome's status once, then run what follows it.

        An outcome to retry (a write the API server refused) is written on a best-effort
        basis and ends in :class:`kopf.TemporaryError`, so kopf tries again.
        """
        if outcome.retry:
            if outcome.status is not None:
                with contextlib.suppress(Exception):
                    self._write_platform_status(reading.name, outcome.status)
            raise kopf.TemporaryError(outcome.retry, delay=APPLY_RETRY_SECONDS)
        if outcome.status is not None:
            self._write_platform_status(reading.name, outcome.status)
        if outcome.after is not None:
            outcome.after()
        return outcome

    # The reconcile ------------------------------------------------------------------------------

    def reconcile(self, body: kopf.Body) -> None:
        """Install or remove the stack as the ServingPlatform says; write its status."""
        if body.metadata.get("deletionTimestamp"):
            return
        reading = Reading.of(body)
        with self.lock, metrics.RECONCILE_SECONDS.labels(kind="ServingPlatform").time():
            outcome = self.finish(reading, self._decide_platform(reading, body))
        if outcome.again > 0:
            # Sooner than a resync, but backing off while it does not end (a namespace
            # stuck Terminating, a webhook down for good): 3, 6, 12 ... s, at most a resync.
            streak = self.again_streak.get(reading.name, 0)
            self.again_streak[reading.name] = streak + 1
            self.again_soon(reading.name, outcome.again * 2 ** min(streak, 10))
        else:
            self.again_streak.pop(reading.name, None)

    def again_soon(self, name: str, seconds: float) -> None:
        """Reconcile the ServingPlatform ``name`` again after ``seconds``, at most a resync.

        Once: a reconcile already due is kept. (A kopf retry would write its progress on the
        object and count as a failed reconcile; a timer does neither.)
        """
        with self._again_lock:
            if name in self.due_again:
                return
            timer = threading.Timer(min(self.config.resync_seconds, seconds),
                                    self.reconcile_again, args=(name,))
            timer.daemon = True
            self.due_again[name] = timer
        timer.start()

    def reconcile_again(self, name: str) -> None:
        """The reconcile :meth:`again_soon` asked for: of the ServingPlatform as it is now."""
        with self._again_lock:
            self.due_again.pop(name, None)
        try:
            body = self.kube.get(SPOKE_API, c.KIND_SERVING_PLATFORM, name)
            if body is not None:
                self.reconcile(kopf.Body(cast(kopf.RawBody, body)))
        except Exception:  # the resync tries again
            metrics.RECONCILE_ERRORS.labels(kind="ServingPlatform").inc()
            log.exception("%s: reconcile failed", name)

    def removal_recheck(self) -> float:
        """Seconds before a deletion under way is looked at again.

        :data:`REMOVAL_RECHECK`, never more than the resync.
        """
        return min(self.config.resync_seconds, REMOVAL_RECHECK)

    def _refusal(self, spec: ServingPlatformSpec) -> tuple[Reason, str] | None:
        """The agent's own policy check of a ServingPlatform to install (None: it proceeds)."""
        read = policy_source.read(self.kube, self.config.namespace,
                                  self.config.target_namespaces)
        return tenancy.platform_refusal(spec, read, self.config.allow_dev_flags,
                                        self.config.namespace)

    def _decide_platform(self, reading: Reading, body: kopf.Body) -> Outcome:
        """Which way the reconcile goes (:func:`.decisions.route`), then gone that way."""
        another = decisions.another_owns(reading, self._owner())
        if another is not None:
            return Outcome(another)
        spec = ServingPlatformSpec.from_wire(plain(body["spec"]))
        denied = None if spec.management_state == "Removed" else self._refusal(spec)
        way = decisions.route(reading, spec, denied)
        if isinstance(way, ServingPlatformStatus):
            log.warning("%s: refused: %s", reading.name, denied[1] if denied else way.message)
            return Outcome(way)
        if way is Route.REMOVE:
            return self._remove(reading, spec.force)
        if way is Route.UNMANAGED:
            return self._serve_unmanaged(reading, spec)
        return self._serve_managed(reading, spec)

    def _serve_managed(self, reading: Reading, spec: ServingPlatformSpec) -> Outcome:
        """``Managed``: plan, refuse another operator's stack, apply, report."""
        name = reading.name
        try:
            the_plan = self.planner.build_plan(spec)
            self.upgrading.discard(name)
            refused = decisions.owned_elsewhere(
                reading, self.observer.find_installation(the_plan.stack))
            if refused is not None:  # another operator's stack: nothing is changed
                log.info("%s: %s", name, refused.message)
                return Outcome(refused)
            upgrade = self.applier.install(the_plan)
        except UnknownVersion as err:
            return Outcome(decisions.failed(reading, Failure.VERSION_NOT_CARRIED, str(err)))
        except BundleError as err:
            metrics.RECONCILE_ERRORS.labels(kind="ServingPlatform").inc()
            return Outcome(decisions.failed(reading, Failure.BUNDLE_ERROR, str(err)))
        except NotReady as err:
            return Outcome(decisions.failed(reading, Failure.NOT_READY, str(err)))
        except ApiException as err:
            # Report what failed, then let kopf retry with backoff.
            metrics.RECONCILE_ERRORS.labels(kind="ServingPlatform").inc()
            message = decisions.apply_failed_message(err.status, err.reason, err.body)
            return Outcome(decisions.failed(reading, Failure.APPLY_FAILED, message),
                           retry=message)
        if upgrade is not None:
            # The controllers' rollout events (deployment_changed) carry the upgrade on.
            self.upgrading.add(name)
            self.plans[name] = (reading.generation, the_plan)
            status = decisions.upgrading(reading, upgrade, self.observer.controllers(the_plan))
            log.info("%s: %s (%s)", name, status.phase, status.message[:200])
            return Outcome(status)
        self._enable_namespaces(spec)
        self.plans[name] = (reading.generation, the_plan)
        status = decisions.managed(reading, the_plan, self.observer.controllers(the_plan),
                                   self.observer.crds_of(the_plan), self.kept)
        log.info("%s: %s (%s)", name, status.phase, status.message[:200])
        return Outcome(status, after=lambda: self._record_metrics(
            spec.platform, status, the_plan.controllers()),
            again=WEBHOOK_RECHECK if the_plan.webhook_unreachable else 0.0)

    def _serve_unmanaged(self, reading: Reading, spec: ServingPlatformSpec) -> Outcome:
        """``Unmanaged``: check the stack someone else installed; change nothing of it.

        The serving namespaces are still the agent's to enable. What an earlier Managed
        install of the agent left is kept as it is (not reconciled, not removed).
        """
        found = self.observer.find_installation(STACKS[spec.platform])
        self._enable_namespaces(spec)
        self.plans.pop(reading.name, None)
        check = decisions.unmanaged(reading, found, self.kept)
        log.info("%s: %s (%s)", reading.name, check.status.phase, check.status.message[:200])
        return Outcome(check.status, after=lambda: metrics.record_platform(
            spec.platform, check.status.phase is Phase.AVAILABLE, check.components,
            check.status.stack_version))

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
        return st.owning_platform(self.kube.list(SPOKE_API, c.KIND_SERVING_PLATFORM))

    def _record_metrics(
        self, platform: str, status: ServingPlatformStatus, controllers: list[tuple[str, str]]
    ) -> None:
        metrics.record_platform(platform, status.phase is Phase.AVAILABLE,
                                self.observer.components(controllers), status.stack_version)

    def _remove(self, reading: Reading, force: bool) -> Outcome:
        """Uninstall; done when nothing the agent installed remains (see addon_agent.pure.removal).

        Nothing is deleted while InferenceServices (or other finalizer-carrying objects of the
        stack's kinds) exist: the add-on's are waited for; objects the add-on did not create
        block unless ``force`` (those, and any of a kind whose CRD would be deleted). Then the
        serving namespaces are disabled and the inventory deleted in reverse install order;
        namespaces the agent created that hold objects it did not create are kept, and a
        forced removal also keeps the CRDs user objects remain in (all named). ``Removing``
        is written before the deletes start, so the hub sees the uninstall going.
        """
        refs = self.inventory.load()
        instances = self.observer.stack_instances(refs)
        held = removal.hold(instances, force)
        if held is not None:
            return Outcome(decisions.removal_held(reading, held), done=False)
        doomed = [*namespaces.created_by_agent(self.kube), *namespaces.kept(self.kube),
                  *self.observer.namespaces_to_delete(refs)]
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
            self._write_platform_status(reading.name, decisions.removing(reading))
        namespaces.disable_all(self.kube, keep=left.namespaces)
        remaining = self.applier.uninstall(keep=keep)
        if remaining:
            return Outcome(decisions.removal_waiting(
                reading, [(r.kind, r.name) for r in remaining]), done=False, again=REMOVAL_RECHECK)
        # What is kept now is named in the message, with the stack's own leftovers.
        self.kept = {}

        def forget() -> None:
            metrics.record_platform("", False, {})
            self.plans.pop(reading.name, None)

        return Outcome(decisions.removed(reading, left), after=forget)

    def deployment_changed(self, namespace: str, name: str, deleted: bool) -> None:
        """A stack Deployment changed: refresh the status now; re-create it if it was deleted."""
        for platform_name, (generation, the_plan) in list(self.plans.items()):
            if (namespace, name) not in the_plan.controllers():
                continue
            if platform_name in self.upgrading:  # the rollout may let the upgrade go on
                body = self.kube.get(SPOKE_API, c.KIND_SERVING_PLATFORM, platform_name)
                if body is not None:
                    self.reconcile(kopf.Body(cast(kopf.RawBody, body)))
                continue
            with self.lock:
                body = self.kube.get(SPOKE_API, c.KIND_SERVING_PLATFORM, platform_name)
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
                    self.applier.redeploy(the_plan, name)
                reading = Reading.of(body)
                status = decisions.managed(
                    reading, the_plan, self.observer.controllers(the_plan),
                    self.observer.crds_of(the_plan), self.kept)
                changed = decisions.refreshed(status, body.get("status"))
                if changed:
                    log.info("%s: %s (%s)", platform_name, status.phase, status.message[:200])
                # The gauges follow the event too, not only the next resync (a component
                # that went down is on the hub's dashboards and alerts within a scrape).
                self.finish(reading, Outcome(
                    status if changed else None,
                    after=functools.partial(
                        self._record_metrics, str(body["spec"].get("platform", "")), status,
                        the_plan.controllers())))

    def delete(self, body: kopf.Body) -> None:
        """Uninstall on deletion; raise TemporaryError while blocked or not finished."""
        reading = Reading.of(body)
        spec = ServingPlatformSpec.from_wire(plain(body["spec"]))
        if self._owner() != reading.name:
            return  # it never installed anything: nothing to remove
        with self.lock:
            outcome = self.finish(reading, self._remove(reading, spec.force))
        if not outcome.done:
            raise kopf.TemporaryError("stack not removed yet", delay=self.removal_recheck())
