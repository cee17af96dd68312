"""Install, upgrade and remove a serving stack on the cluster (the I/O around planning)."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from addon_agent import bundle_source, certs, ownership, planning, removal, status
from addon_agent import labels as lb
from addon_agent.crd_cache import CrdCache
from addon_agent.kube import Kube
from addon_agent.planning import ClusterFacts, Plan
from addon_agent.stacks import Stack, release, select
from addon_api.spoke import ServingPlatformSpec, ServingPlatformStatus

log = logging.getLogger(__name__)

Obj = dict[str, Any]
INVENTORY_CONFIGMAP = "model-serving-agent-inventory"
WEBHOOK_CA_SECRET = "model-serving-agent-webhook-ca"
ESTABLISHED_TIMEOUT = 60.0
ISVC_API = "serving.kserve.io/v1beta1"


class NotReady(RuntimeError):
    """The install cannot go on yet (e.g. CRDs not Established); retry later."""


class Upgrading(NotReady):
    """A version change waits for the controllers to roll out before the configuration.

    The CRDs and the controllers (with what they need to start) of the new version are
    applied by then.
    """

    def __init__(self, source: str, target: str, message: str) -> None:
        super().__init__(message)
        self.source = source
        """The version the cluster ran before."""
        self.target = target
        """The version being installed."""


@dataclass(frozen=True)
class Ref:
    """Identity of an object the agent applied."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Obj) -> Ref:
        """The Ref of an object."""
        meta = obj["metadata"]
        return cls(obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])

    def as_list(self) -> list[str]:
        """JSON form."""
        return [self.api_version, self.kind, self.namespace, self.name]


def _phase_of_ref(ref: Ref) -> int:
    return planning.phase_of({"kind": ref.kind})


class Installer:
    """Everything the agent does to a cluster for one ServingPlatform."""

    def __init__(
        self,
        kube: Kube,
        bundle_root: Path,
        agent_namespace: str,
        cache: Path,
        metrics_port: int,
        external_webhook: tuple[str, bytes] | None = None,
    ) -> None:
        self.metrics_port = metrics_port
        self.external_webhook = external_webhook
        self._applied: dict[Ref, tuple[str, str]] = {}
        """Per applied object: hash of what was applied and the resourceVersion it produced."""
        self._foreign: set[Ref] = set()
        """Objects of the plan found to be someone else's (logged once)."""
        self._parsed: tuple[str, list[Obj]] = ("", [])
        """The last bundle parsed (sha256 of its text, objects); planning copies them."""
        self.kube = kube
        self.crds = CrdCache(kube)
        self.bundle_root = bundle_root
        self.agent_namespace = agent_namespace
        self.cache = cache

    # Facts and plan -----------------------------------------------------------------------------

    def facts(self) -> ClusterFacts:
        """What is installed on the cluster that changes the plan."""
        return ClusterFacts(
            cert_manager=self._crd_established("certificates.cert-manager.io"),
            prometheus_operator=self._crd_established("servicemonitors.monitoring.coreos.com"),
            service_ca=self._crd_established("servicecas.operator.openshift.io"),
            assigns_users=self._crd_established(
                "securitycontextconstraints.security.openshift.io"),
        )

    def _crd_established(self, name: str) -> bool:
        # A GET of the CRD, not discovery: the discovery cache may lag behind CRD changes.
        return status.condition_true(self.crds.get(name), "Established")

    def find_installation(self, stack: Stack) -> ownership.Installation:
        """What of ``stack`` the cluster runs, whoever installed it.

        Its key CRD, its controller Deployments in any namespace and their namespace's
        configuration ConfigMap (see :mod:`addon_agent.ownership`).
        """
        crd = self.kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                            ownership.KEY_CRDS[stack.platform])
        deployments = self.kube.list("apps/v1", "Deployment",
                                     field_selector=f"metadata.name={stack.controller}")
        configs = [cm for ns in sorted({d["metadata"].get("namespace") for d in deployments})
                   if (cm := self.kube.get("v1", "ConfigMap", ownership.CONFIGS[stack.platform],
                                           ns)) is not None]
        return ownership.installation(stack, [crd] if crd else [], deployments, configs)

    def build_plan(self, spec: ServingPlatformSpec) -> Plan:
        """The desired objects for ``spec`` (webhook certificates included)."""
        manifests = spec.dev_flags.manifests if spec.dev_flags else None
        text, stack = bundle_source.load(
            select(spec.platform, spec.version), self.bundle_root, manifests, self.cache
        )
        digest = hashlib.sha256(text.encode()).hexdigest()
        if self._parsed[0] != digest:
            objects = planning.parse_bundle(text)
            bundle_source.check_kinds(objects)  # before anything of it is planned or applied
            self._parsed = (digest, objects)
        the_plan = planning.plan(
            self._parsed[1],
            spec,
            stack,
            self.facts(),
            agent_metrics=(self.agent_namespace, self.metrics_port),
        )
        if self.external_webhook is not None:
            # Development only (addon_agent.config, set by the testbed alone): the controllers
            # run outside the cluster (the testbed's real KServe controller), the webhooks call
            # that server; the agent owns this shape, so no resync undoes it.
            url, ca_pem = self.external_webhook
            planning.point_webhooks_at(the_plan.objects, url, planning.b64(ca_pem.decode()))
        elif the_plan.certificates:
            self._add_webhook_certs(the_plan)
        return the_plan

    def _ca(self, now: dt.datetime) -> certs.KeyPair:
        secret = self.kube.get("v1", "Secret", WEBHOOK_CA_SECRET, self.agent_namespace)
        data = (secret or {}).get("data") or {}
        if data.get("tls.crt") and data.get("tls.key"):
            pair = certs.KeyPair(_unb64(data["tls.crt"]), _unb64(data["tls.key"]))
            if not certs.needs_renewal(pair.cert_pem, now):
                return pair
        pair = certs.new_ca(now)
        self.kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": WEBHOOK_CA_SECRET,
                    "namespace": self.agent_namespace,
                    "labels": lb.ours(),
                },
                "type": "kubernetes.io/tls",
                "data": {
                    "tls.crt": planning.b64(pair.cert_pem),
                    "tls.key": planning.b64(pair.key_pem),
                },
            }
        )
        return pair

    def _add_webhook_certs(self, the_plan: Plan) -> None:
        now = dt.datetime.now(dt.UTC)
        ca = self._ca(now)
        secrets = []
        for request in the_plan.certificates:
            existing = self.kube.get("v1", "Secret", request.secret_name, request.namespace)
            data = (existing or {}).get("data") or {}
            leaf_pem = _unb64(data["tls.crt"]) if data.get("tls.crt") else None
            if (
                leaf_pem
                and data.get("tls.key")
                and certs.leaf_valid(leaf_pem, ca, request.dns_names, now)
            ):
                leaf = certs.KeyPair(leaf_pem, _unb64(data["tls.key"]))
            else:
                leaf = certs.new_leaf(ca, request.dns_names, now)
            secrets.append(
                planning.webhook_cert_secret(request, leaf.cert_pem, leaf.key_pem, ca.cert_pem)
            )
        objects = the_plan.objects + [planning.label(s, the_plan.stack) for s in secrets]
        # A Secret of the bundle with the same name (e.g. an empty placeholder) is replaced.
        names = {planning.key_of(s) for s in secrets}
        objects = [o for o in objects if planning.key_of(o) not in names or o in secrets]
        planning.inject_ca_bundle(objects, planning.b64(ca.cert_pem))
        the_plan.objects = planning.order(objects)

    # Inventory ----------------------------------------------------------------------------------

    def inventory(self) -> list[Ref]:
        """Every object the agent applied and has not removed yet."""
        cm = self.kube.get("v1", "ConfigMap", INVENTORY_CONFIGMAP, self.agent_namespace)
        raw = ((cm or {}).get("data") or {}).get("objects", "[]")
        return [Ref(*item) for item in json.loads(raw)]

    def _save_inventory(self, refs: list[Ref]) -> None:
        unique = list(dict.fromkeys(refs))
        self.kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": INVENTORY_CONFIGMAP,
                    "namespace": self.agent_namespace,
                    "labels": lb.ours(),
                },
                "data": {"objects": json.dumps([r.as_list() for r in unique])},
            }
        )

    # Install ------------------------------------------------------------------------------------

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
        live = (self.crds.resource_version(obj["metadata"]["name"]) or "") if existing else ""
        if existing is None or lb.is_ours(existing):
            labels = obj["metadata"].get("labels") or {}
            have = planning.version_of(existing, str(labels.get(lb.LABEL_PLATFORM)))
            want = str(labels.get(lb.LABEL_STACK_VERSION) or "")
            if release(have) > release(want) and release(want):
                # A downgrade keeps the newer schema: the older one would prune the fields
                # only the newer version has from every stored object of the kind.
                return True
            self._apply_if_changed(obj, live)
            return True
        ref = Ref.of(obj)
        if ref not in self._foreign:
            self._foreign.add(ref)
            log.info("CRD %s existed before the agent: updated, never removed", ref.name)
        meta = dict(obj["metadata"])
        meta["labels"] = {
            k: v for k, v in (meta.get("labels") or {}).items() if k not in lb.ours()
        }
        self._apply_if_changed({**obj, "metadata": meta}, live)
        return False

    def _someone_elses(self, obj: Obj, the_plan: Plan) -> tuple[bool, str]:
        """Whether someone else's object of ``obj``'s name exists; else its resourceVersion.

        A conflict is recorded in the plan and logged once; the resourceVersion is "" when
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
            return True, ""
        self._foreign.discard(ref)
        return False, str((meta or {}).get("resourceVersion") or "")

    def _apply_owned(self, obj: Obj, the_plan: Plan) -> bool:
        """Apply ``obj`` unless someone else's object of that name exists; True if ours."""
        theirs, live = self._someone_elses(obj, the_plan)
        if theirs:
            return False
        self._apply_if_changed(obj, live)
        return True

    def _apply_runtime(self, obj: Obj, the_plan: Plan) -> bool:
        """Apply a serving runtime unless someone else's of that name exists; True if ours.

        A runtime the stack's admission webhook rejects or cannot be asked about (its
        controller not serving yet) does not stop the install: it is reported in the plan's
        ``runtime_errors`` and tried again on the next reconcile.
        """
        ref = Ref.of(obj)
        theirs, live = self._someone_elses(obj, the_plan)
        if theirs:
            return False
        try:
            self._apply_if_changed(obj, live)
        except ApiException as err:
            reason = _api_error_message(err)
            log.warning("%s %s not applied: %s", ref.kind, ref.name, reason)
            the_plan.runtime_errors.append(f"{ref.kind} {ref.name}: {reason}")
        return True

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
        self.kube.rediscover()

    def install(self, the_plan: Plan) -> None:
        """Apply the plan in order, then remove what an earlier plan had and this one has not.

        A version change of the same platform (:meth:`upgrade_source`) goes in two steps:
        the CRDs and the controllers with what they need to start first; the configuration
        (and the removal of what the new version no longer has) only once the controllers
        have rolled out at the new version (until then :class:`Upgrading` is raised). CRDs
        are never removed by a version change, nor replaced by an older version's.
        """
        the_plan.runtime_errors.clear()
        the_plan.conflicts.clear()
        the_plan.runtime_conflicts.clear()
        previous = self.inventory()
        self._save_inventory(previous + [Ref.of(o) for o in the_plan.objects])
        source = self.upgrade_source(the_plan)
        if source:
            self._apply_objects([o for o in the_plan.objects if planning.upgrade_first(o)],
                                the_plan)
            pending = [name for ns, name in the_plan.controllers()
                       if not status.deployment_rolled_out(
                           self.kube.get("apps/v1", "Deployment", name, ns))]
            if pending:
                raise Upgrading(source, the_plan.stack.version, (
                    f"upgrading {the_plan.stack.platform} {source} -> {the_plan.stack.version}: "
                    f"CRDs applied; waiting for {', '.join(pending)} to roll out before the "
                    "configuration"))
        applied = self._apply_objects(the_plan.objects, the_plan)
        keep = set(applied)
        stale = [r for r in previous if r not in keep]
        kept_crds = [r for r in stale if r.kind == "CustomResourceDefinition"
                     and self._same_platform_crd(r.name, the_plan.stack.platform)]
        self._delete([r for r in stale if r not in kept_crds])
        self._save_inventory(applied + kept_crds)

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

    def _same_platform_crd(self, name: str, platform: str) -> bool:
        """Whether a CRD the agent applied is of ``platform`` (kept across its versions)."""
        return bool(planning.version_of(self.crds.get(name, cached=False), platform))

    def _apply_if_changed(self, obj: Obj, live: str | None = None) -> None:
        """Apply ``obj`` unless this agent applied the same content and nobody changed it since.

        A steady state then costs one metadata GET per object and no write; an object edited
        or deleted by someone else has a new (or no) resourceVersion and is applied again.
        ``live`` is the resourceVersion the caller just read ("" when absent), if it did.
        """
        ref = Ref.of(obj)
        digest = hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()
        known = self._applied.get(ref)
        if known is not None and known[0] == digest:
            if live is None:
                live = self.kube.resource_version(
                    ref.api_version, ref.kind, ref.name, ref.namespace or None
                ) or ""
            if live == known[1]:
                return
        out = self.kube.apply(obj)
        self._applied[ref] = (digest, str(out.get("metadata", {}).get("resourceVersion", "")))

    def _delete(self, refs: list[Ref]) -> list[Ref]:
        """Delete objects in reverse apply order; return those still present."""
        remaining = []
        for ref in sorted(refs, key=_phase_of_ref, reverse=True):
            try:
                current = self.kube.get(ref.api_version, ref.kind, ref.name, ref.namespace or None)
            except Exception:  # kind no longer served (its CRD went first)
                continue
            if current is None or not lb.is_ours(current):
                continue
            self.kube.delete(ref.api_version, ref.kind, ref.name, ref.namespace or None)
            self._applied.pop(ref, None)
            remaining.append(ref)
        return remaining

    # Status -------------------------------------------------------------------------------------

    def read_status(
        self, the_plan: Plan, generation: int | None, previous: list[Obj]
    ) -> ServingPlatformStatus:
        """Status of a Managed platform from what the cluster shows now."""
        deployments = {
            name: self.kube.get("apps/v1", "Deployment", name, ns)
            for ns, name in the_plan.controllers()
        }
        crds = {
            n: self.crds.get(n) for n in the_plan.crd_names()
        }
        return status.platform_status(
            generation=generation,
            version=the_plan.stack.version,
            deployments=deployments,
            crds=crds,
            warnings=the_plan.warnings,
            runtime_errors=the_plan.runtime_errors,
            conflicts=the_plan.conflicts,
            runtime_conflicts=the_plan.runtime_conflicts,
            previous=previous,
        )

    def read_upgrade_status(
        self, the_plan: Plan, upgrade: Upgrading, generation: int | None, previous: list[Obj]
    ) -> ServingPlatformStatus:
        """Status of a version change waiting for its controllers."""
        return status.upgrading_status(
            generation=generation, source=upgrade.source, target=upgrade.target,
            message=str(upgrade),
            deployments={name: self.kube.get("apps/v1", "Deployment", name, ns)
                         for ns, name in the_plan.controllers()},
            previous=previous,
        )

    # Removal ------------------------------------------------------------------------------------

    def stack_instances(self, refs: list[Ref]) -> list[removal.Instance]:
        """Objects of every kind the stack's CRDs serve, marked as in the inventory or not.

        The kinds are those of the inventory's CRDs (the bundle's, as installed) and
        InferenceService (whoever installed its CRD); each object says whether its CRD is the
        agent's, i.e. whether the uninstall deletes it.
        """
        own = {(r.kind, r.namespace, r.name) for r in refs}
        names = {r.name for r in refs if r.kind == "CustomResourceDefinition"}
        out: list[removal.Instance] = []
        for name in sorted(names | {removal.ISVC_CRD}):
            crd = self.crds.get(name, cached=False)
            if crd is None:
                continue
            spec = crd.get("spec") or {}
            served = [v for v in spec.get("versions") or [] if v.get("served")]
            if not served:
                continue
            version = next((v for v in served if v.get("storage")), served[0])["name"]
            api, kind = f"{spec['group']}/{version}", spec["names"]["kind"]
            if not self.kube.served(api, kind):
                continue
            ours = lb.is_ours(crd) and name in names
            for obj in self.kube.list(api, kind):
                meta = obj.get("metadata") or {}
                key = (kind, meta.get("namespace") or "", meta.get("name"))
                out.append(removal.instance_of(obj, name, own=key in own, crd_ours=ours))
        return out

    def namespaces_to_delete(self, refs: list[Ref]) -> list[str]:
        """Namespaces of the inventory that an uninstall deletes (they are the agent's)."""
        out = []
        for ref in refs:
            if ref.kind == "Namespace":
                ns = self.kube.get("v1", "Namespace", ref.name)
                if ns is not None and lb.is_ours(ns):
                    out.append(ref.name)
        return out

    def uninstall(self, keep: frozenset[str] = frozenset()) -> list[Ref]:
        """Delete the inventory in reverse install order; return what is still there.

        CRDs and namespaces named in ``keep`` (left in place by a forced removal) are not
        deleted, stay in the inventory and are not counted as remaining.
        """
        refs = self.inventory()
        kept = [r for r in refs if r.kind in ("CustomResourceDefinition", "Namespace")
                and r.name in keep]
        remaining = self._delete([r for r in refs if r not in kept])
        still = [r for r in remaining if self._exists(r)]
        self._save_inventory(still + kept)
        return still

    def _exists(self, ref: Ref) -> bool:
        try:
            return (
                self.kube.get(ref.api_version, ref.kind, ref.name, ref.namespace or None)
                is not None
            )
        except Exception:
            return False


def _api_error_message(err: ApiException) -> str:
    """The API server's message of a failed request (its Status body), else the reason."""
    try:
        body = json.loads(err.body or "")
    except (TypeError, ValueError):
        body = None
    message = body.get("message") if isinstance(body, dict) else None
    return str(message or f"{err.status} {err.reason}")[:300]


def _unb64(value: str) -> str:
    return base64.b64decode(value).decode()
