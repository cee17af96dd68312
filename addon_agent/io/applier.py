"""Apply a plan to the cluster, remove what no plan wants any more (I/O, writes).

The order, the two steps of a version change
and what counts as the agent's are decided by the pure layer (:mod:`addon_agent.pure.planning`);
this module does the writes: server-side apply in plan order (never over someone else's
object of the same name), the wait for CRDs to be Established, the inventory
(:mod:`addon_agent.io.inventory`), the pruning of what an earlier plan had, and the uninstall.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any

from kubernetes.client.exceptions import ApiException

from addon_agent import labels as lb
from addon_agent.io.crd_cache import CrdCache
from addon_agent.io.inventory import Applied, Inventory, Ref
from addon_agent.io.kube import Kube
from addon_agent.pure import planning, status
from addon_agent.pure.decisions import Upgrade
from addon_agent.pure.planning import Plan
from addon_agent.stacks import release

log = logging.getLogger(__name__)

Obj = dict[str, Any]
ESTABLISHED_TIMEOUT = 60.0


def applied_of(digest: str, written: Obj) -> Applied:
    """The record of a write from the API server's answer (``written``)."""
    meta = written.get("metadata") or {}
    generation = meta.get("generation")
    return Applied(digest, str(meta.get("resourceVersion") or ""), str(meta.get("uid") or ""),
                   int(generation) if generation is not None else None)


def unchanged_since(applied: Applied, wanted: Obj, live: Obj | None) -> bool:
    """Whether applying ``wanted`` again would change nothing on the live object.

    ``live`` is the live object's metadata (None when absent). The same resourceVersion
    says so at once. Otherwise (status written by a controller, a CRD's conditions set by
    the API server, a field someone else owns) the object still is the agent's write when
    it is the same object (uid), its spec is untouched (a kind that keeps a ``generation``
    bumps it on every spec change) and the labels and annotations the agent set are still
    there; a kind without a generation is applied again. Pure.
    """
    if live is None:
        return False
    if str(live.get("resourceVersion") or "") == applied.resource_version:
        return True
    generation = live.get("generation")
    if applied.generation is None or generation is None or int(generation) != applied.generation:
        return False
    if not applied.uid or str(live.get("uid") or "") != applied.uid:
        return False
    meta = wanted.get("metadata") or {}
    return all(
        (live.get(field) or {}).get(key) == value
        for field in ("labels", "annotations")
        for key, value in (meta.get(field) or {}).items()
    )


class NotReady(RuntimeError):
    """The install cannot go on yet (e.g. CRDs not Established); retry later."""


class Applier:
    """Every write the agent makes to install or remove a stack."""

    def __init__(self, kube: Kube, crds: CrdCache, inventory: Inventory) -> None:
        self.kube = kube
        self.crds = crds
        self.inventory = inventory
        self._foreign: set[Ref] = set()
        """Objects of the plan found to be someone else's (logged once)."""
        self._crds_written = False
        """A CRD was written since the discovered kinds were last refreshed."""

    # Install ------------------------------------------------------------------------------------

    def install(self, the_plan: Plan) -> Upgrade | None:
        """Apply the plan in order, then remove what an earlier plan had and this one has not.

        A version change of the same platform (:meth:`upgrade_source`) goes in two steps:
        the CRDs and the controllers with what they need to start first; the configuration
        (and the removal of what the new version no longer has) only once the controllers
        have rolled out at the new version (until then the :class:`Upgrade` it waits for is
        returned, and nothing more is applied). CRDs are never removed by a version change,
        nor replaced by an older version's. Raises :class:`NotReady` when CRDs do not become
        Established in time.
        """
        the_plan.runtime_errors.clear()
        the_plan.webhook_unreachable = False
        the_plan.conflicts.clear()
        the_plan.runtime_conflicts.clear()
        previous = self.inventory.load()
        self.inventory.save(previous + [Ref.of(o) for o in the_plan.objects])
        source = self.upgrade_source(the_plan)
        if source:
            # Said once per pass, whether the controllers roll out before the next read or
            # not (the status shows the wait only while there is one).
            log.info("upgrading %s %s -> %s: the CRDs and controllers first, the "
                     "configuration once the controllers rolled out",
                     the_plan.stack.platform, source, the_plan.stack.version)
            self._apply_objects([o for o in the_plan.objects if planning.upgrade_first(o)],
                                the_plan)
            pending = [name for ns, name in the_plan.controllers()
                       if not status.deployment_rolled_out(
                           self.kube.get("apps/v1", "Deployment", name, ns))]
            if pending:
                return Upgrade(source, the_plan.stack.version, (
                    f"upgrading {the_plan.stack.platform} {source} -> {the_plan.stack.version}: "
                    f"CRDs applied; waiting for {', '.join(pending)} to roll out before the "
                    "configuration"))
        applied = self._apply_objects(the_plan.objects, the_plan)
        keep = set(applied)
        stale = [r for r in previous if r not in keep]
        kept_crds = [r for r in stale if r.kind == "CustomResourceDefinition"
                     and self._same_platform_crd(r.name, the_plan.stack.platform)]
        self._delete([r for r in stale if r not in kept_crds])
        self.inventory.save(applied + kept_crds)
        return None

    def upgrade_source(self, the_plan: Plan) -> str:
        """The other version of the plan's platform the cluster still runs, if any.

        Read from the labels of the live controller Deployments and ConfigMaps: "" for a
        first install, the same version, or another platform's stack being replaced.
        """
        stack = the_plan.stack
        if not release(stack.version):
            return ""  # a custom bundle: no order of versions to follow
        for obj in the_plan.objects:
            if obj["kind"] not in ("Deployment", "ConfigMap"):
                continue
            meta = obj["metadata"]
            live = self.kube.metadata(obj["apiVersion"], obj["kind"], meta["name"],
                                      meta.get("namespace"))
            version = planning.version_of({"metadata": live} if live else None, stack.platform)
            if version and version != stack.version:
                return version
        return ""

    def redeploy(self, the_plan: Plan, name: str) -> None:
        """Apply the plan's Deployment ``name`` again (it was deleted)."""
        for obj in the_plan.objects:
            if obj["kind"] == "Deployment" and obj["metadata"]["name"] == name:
                self.kube.apply(obj)

    def wait_established(self, names: list[str], timeout: float = ESTABLISHED_TIMEOUT) -> None:
        """Wait until every named CRD is Established; raise NotReady on timeout."""
        deadline = time.monotonic() + timeout
        pending = list(names)
        while pending:
            pending = [
                n
                for n in pending
                if not status.condition_true(self.crds.get(n), "Established")
            ]
            if not pending:
                break
            if time.monotonic() > deadline:
                raise NotReady(f"CRDs not Established: {', '.join(pending)}")
            time.sleep(0.5)
        if self._crds_written:
            # Their kinds are served now: the next lookups must know them. A pass that wrote
            # no CRD has nothing new to discover (a full discovery is a request per API group).
            self.kube.rediscover()
            self._crds_written = False

    def _apply_objects(self, objects: list[Obj], the_plan: Plan) -> list[Ref]:
        """Apply ``objects`` in order; return the Refs of those that are the agent's.

        CRDs are Established before anything else is applied.
        """
        applied: list[Ref] = []
        crds_done = False
        for obj in objects:
            if obj["kind"] != "CustomResourceDefinition" and not crds_done:
                self.wait_established(the_plan.crd_names())
                crds_done = True
            if obj["kind"] == "Namespace":
                if self._apply_namespace(obj):
                    applied.append(Ref.of(obj))
                continue
            if obj["kind"] == "CustomResourceDefinition":
                if self._apply_crd(obj):
                    applied.append(Ref.of(obj))
                continue
            if planning.is_runtime(obj):
                if self._apply_runtime(obj, the_plan):
                    applied.append(Ref.of(obj))
                continue
            if self._apply_owned(obj, the_plan):
                applied.append(Ref.of(obj))
        return applied

    def _apply_namespace(self, obj: Obj) -> bool:
        existing = self.kube.get("v1", "Namespace", obj["metadata"]["name"])
        if existing is not None and not lb.is_ours(existing):
            return False  # pre-existing namespace: used, never taken over
        self.kube.apply(obj)
        return True

    def _apply_crd(self, obj: Obj) -> bool:
        """Apply a CRD; True if it is the agent's to remove later.

        A CRD that existed before the agent (another install of the stack, a user's) is
        updated to the stack's version, since the stack needs it, but it is not labelled as
        the agent's and never deleted: deleting a CRD deletes every object of its kind.
        """
        existing = self.crds.get(obj["metadata"]["name"], cached=False)
        live = dict(existing.get("metadata") or {}) if existing else None
        if existing is None or lb.is_ours(existing):
            labels = obj["metadata"].get("labels") or {}
            have = planning.version_of(existing, str(labels.get(lb.LABEL_PLATFORM)))
            want = str(labels.get(lb.LABEL_STACK_VERSION) or "")
            if release(have) > release(want) and release(want):
                # A downgrade keeps the newer schema: the older one would prune the fields
                # only the newer version has from every stored object of the kind.
                return True
            self._apply_if_changed(obj, live, live_read=True)
            return True
        ref = Ref.of(obj)
        if ref not in self._foreign:
            self._foreign.add(ref)
            log.info("CRD %s existed before the agent: updated, never removed", ref.name)
        meta = dict(obj["metadata"])
        meta["labels"] = {
            k: v for k, v in (meta.get("labels") or {}).items() if k not in lb.ours()
        }
        self._apply_if_changed({**obj, "metadata": meta}, live, live_read=True)
        return False

    def _someone_elses(self, obj: Obj, the_plan: Plan) -> tuple[bool, Obj | None]:
        """Whether someone else's object of ``obj``'s name exists; else its metadata.

        A conflict is recorded in the plan and logged once; the metadata is None when
        nothing of that name exists. Someone else's object is never applied over, labelled,
        put in the inventory or deleted.
        """
        ref = Ref.of(obj)
        meta = self.kube.metadata(ref.api_version, ref.kind, ref.name, ref.namespace or None)
        if meta is not None and not lb.is_ours({"metadata": meta}):
            where = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
            conflicts = (
                the_plan.runtime_conflicts if planning.is_runtime(obj) else the_plan.conflicts
            )
            conflicts.append(f"{ref.kind} {where}")
            if ref not in self._foreign:
                self._foreign.add(ref)
                log.info("%s %s exists and is not the agent's: left as it is", ref.kind, where)
            return True, None
        self._foreign.discard(ref)
        return False, meta

    def _apply_owned(self, obj: Obj, the_plan: Plan) -> bool:
        """Apply ``obj`` unless someone else's object of that name exists; True if ours."""
        theirs, live = self._someone_elses(obj, the_plan)
        if theirs:
            return False
        self._apply_if_changed(obj, live, live_read=True)
        return True

    def _apply_runtime(self, obj: Obj, the_plan: Plan) -> bool:
        """Apply a serving runtime unless someone else's of that name exists; True if ours.

        A runtime the stack's admission webhook rejects or cannot be asked about (its
        controller not serving yet) does not stop the install: it is reported in the plan's
        ``runtime_errors`` and tried again on the next reconcile (soon when the webhook could
        not be called: ``webhook_unreachable``).
        """
        ref = Ref.of(obj)
        theirs, live = self._someone_elses(obj, the_plan)
        if theirs:
            return False
        try:
            self._apply_if_changed(obj, live, live_read=True)
        except ApiException as err:
            reason = api_error_message(err)
            log.warning("%s %s not applied: %s", ref.kind, ref.name, reason)
            the_plan.runtime_errors.append(f"{ref.kind} {ref.name}: {reason}")
            if (err.status or 0) >= 500:  # not refused: the webhook could not be asked
                the_plan.webhook_unreachable = True
        return True

    def _same_platform_crd(self, name: str, platform: str) -> bool:
        """Whether a CRD the agent applied is of ``platform`` (kept across its versions)."""
        return bool(planning.version_of(self.crds.get(name, cached=False), platform))

    def _apply_if_changed(self, obj: Obj, live: Obj | None = None, *,
                          live_read: bool = False) -> None:
        """Apply ``obj`` unless the agent applied the same content and nobody changed it since.

        Judged by :func:`unchanged_since`: a steady state costs one metadata GET per object
        and no write, even where controllers keep writing the status; an object edited,
        relabelled or deleted by someone else is applied again. ``live`` is the metadata the
        caller just read (None when absent), when ``live_read``.
        """
        ref = Ref.of(obj)
        digest = hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()
        known = self.inventory.applied.get(ref)
        if known is not None and known.digest == digest:
            if not live_read:
                live = self.kube.metadata(
                    ref.api_version, ref.kind, ref.name, ref.namespace or None)
            if unchanged_since(known, obj, live):
                return
        out = self.kube.apply(obj)
        self.inventory.applied[ref] = applied_of(digest, out)
        if ref.kind == "CustomResourceDefinition":
            self._crds_written = True

    # Removal ------------------------------------------------------------------------------------

    def uninstall(self, keep: frozenset[str] = frozenset()) -> list[Ref]:
        """Delete the inventory in reverse install order; return what is still there.

        CRDs and namespaces named in ``keep`` (left in place by a forced removal) are not
        deleted, stay in the inventory and are not counted as remaining.
        """
        refs = self.inventory.load()
        kept = [r for r in refs if r.kind in ("CustomResourceDefinition", "Namespace")
                and r.name in keep]
        remaining = self._delete([r for r in refs if r not in kept])
        still = [r for r in remaining if self._exists(r)]
        self.inventory.save(still + kept)
        return still

    def _delete(self, refs: list[Ref]) -> list[Ref]:
        """Delete objects in reverse apply order; return those still present."""
        remaining = []
        for ref in sorted(refs, key=Ref.phase, reverse=True):
            try:
                current = self.kube.get(ref.api_version, ref.kind, ref.name, ref.namespace or None)
            except Exception:  # kind no longer served (its CRD went first)
                continue
            if current is None or not lb.is_ours(current):
                continue
            self.kube.delete(ref.api_version, ref.kind, ref.name, ref.namespace or None)
            self.inventory.applied.pop(ref, None)
            remaining.append(ref)
        return remaining

    def _exists(self, ref: Ref) -> bool:
        try:
            return (
                self.kube.get(ref.api_version, ref.kind, ref.name, ref.namespace or None)
                is not None
            )
        except Exception:
            return False


def api_error_message(err: ApiException) -> str:
    """The API server's message of a failed request (its Status body), else the reason."""
    try:
        body = json.loads(err.body or "")
    except (TypeError, ValueError):
        body = None
    message = body.get("message") if isinstance(body, dict) else None
    return str(message or f"{err.status} {err.reason}")[:300]
