"""The plan of a ServingPlatform's spec on this cluster (reads the bundle and the cluster).

Loads the stack's bundle
(:mod:`addon_agent.io.bundle_source`, parsed once per content), reads the cluster's facts
(:class:`addon_agent.io.observe.Observer`), hands both to the pure planner
(:func:`addon_agent.pure.planning.plan`) and provides the webhook certificates the plan asks for
(:mod:`addon_agent.io.webhook_ca`). Nothing of the stack is applied here.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from addon_agent.bundle_render import bundle_path
from addon_agent.io import bundle_source, webhook_ca
from addon_agent.io.kube import Kube
from addon_agent.io.observe import Observer
from addon_agent.pure import planning
from addon_agent.pure.manifests import b64
from addon_agent.pure.planning import Plan
from addon_agent.stacks import select
from addon_api.spoke import ServingPlatformSpec

Obj = dict[str, Any]


class Planner:
    """Builds :class:`~addon_agent.pure.planning.Plan` objects for one agent."""

    def __init__(
        self,
        kube: Kube,
        observer: Observer,
        bundle_root: Path,
        cache: Path,
        agent_namespace: str,
        metrics_port: int,
        external_webhook: tuple[str, bytes] | None = None,
    ) -> None:
        self.kube = kube
        self.observer = observer
        self.bundle_root = bundle_root
        self.cache = cache
        self.agent_namespace = agent_namespace
        self.metrics_port = metrics_port
        self.external_webhook = external_webhook
        self._parsed: tuple[str, list[Obj]] = ("", [])
        """The last bundle parsed (sha256 of its text, objects); planning copies them."""

    def build_plan(self, spec: ServingPlatformSpec) -> Plan:
        """The desired objects for ``spec`` (webhook certificates included).

        Raises :class:`~addon_agent.stacks.UnknownVersion` for a version the agent carries
        no bundle of and :class:`~addon_agent.io.bundle_source.BundleError` for a bundle that
        cannot be loaded or holds a kind the agent does not install.
        """
        manifests = spec.dev_flags.manifests if spec.dev_flags else None
        text, stack = bundle_source.load(
            select(spec.platform, spec.version), self.bundle_root, manifests, self.cache
        )
        digest = hashlib.sha256(text.encode()).hexdigest()
        if self._parsed[0] != digest:
            # The agent's own rendered bundles carry their objects as JSON; a bundle from
            # devFlags.manifests is always parsed (its directory is not the agent's to trust).
            objects = bundle_source.rendered_objects(
                bundle_path(self.bundle_root, stack), digest) if manifests is None else None
            if objects is None:
                objects = planning.parse_bundle(text)
            bundle_source.check_kinds(objects)  # before anything of it is planned or applied
            self._parsed = (digest, objects)
        the_plan = planning.plan(
            self._parsed[1],
            spec,
            stack,
            self.observer.facts(),
            agent_metrics=(self.agent_namespace, self.metrics_port),
        )
        if self.external_webhook is not None:
            # Development only (addon_agent.config, set by the testbed alone): the controllers
            # run outside the cluster (the testbed's real KServe controller), the webhooks call
            # that server; the agent owns this shape, so no resync undoes it.
            url, ca_pem = self.external_webhook
            planning.point_webhooks_at(the_plan.objects, url, b64(ca_pem.decode()))
        elif the_plan.certificates:
            webhook_ca.add_webhook_certs(self.kube, self.agent_namespace, the_plan)
        return the_plan
