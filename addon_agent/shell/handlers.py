"""kopf handlers of the agent: each registers and calls one method.

Nothing here decides or writes a status: the reconciles are :mod:`addon_agent.shell.platform`'s
and :mod:`addon_agent.shell.sealed`'s, the loops :mod:`addon_agent.shell.background`'s.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from addon_agent.io import identity, lease, metrics
from addon_agent.io.login import connection_info
from addon_agent.shell import background
from addon_agent.shell.agent import Agent
from addon_api import constants as c

log = logging.getLogger(__name__)

PLATFORMS = (c.GROUP, c.VERSION, "servingplatforms")
SEALED = (c.GROUP, c.VERSION, "sealedstorageconnections")


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
        agent.sealed.ledger.adopt(config.namespace)
        agent.sealed.keyring = identity.load_keyring(agent.kube, config.namespace,
                                                     config.state_namespace)
        lease.start(agent.kube, config.namespace, config.lease_seconds)
        background.start_identity_loop(agent.sealed.refresh_identity, config.resync_seconds)
        background.start_model_metrics_loop(agent.kube)
        background.start_policy_watch(agent.kube, config.namespace, agent.policy_changed)

    @kopf.on.resume(*PLATFORMS, backoff=backoff, registry=registry)
    @kopf.on.create(*PLATFORMS, backoff=backoff, registry=registry)
    @kopf.on.update(*PLATFORMS, field="spec", backoff=backoff, registry=registry)
    def platform_changed(body: kopf.Body, **_: Any) -> None:
        agent.platforms.reconcile(body)

    @kopf.timer(*PLATFORMS, interval=config.resync_seconds, backoff=backoff, registry=registry)
    def platform_resync(body: kopf.Body, **_: Any) -> None:
        try:
            agent.platforms.reconcile(body)
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
        agent.platforms.deployment_changed(
            body.metadata.get("namespace") or "", body.metadata["name"], deleted=type == "DELETED"
        )

    @kopf.on.delete(*PLATFORMS, backoff=backoff, registry=registry)
    def platform_deleted(body: kopf.Body, **_: Any) -> None:
        agent.platforms.delete(body)

    @kopf.on.resume(*SEALED, registry=registry)
    @kopf.on.create(*SEALED, registry=registry)
    @kopf.on.update(*SEALED, field="spec", registry=registry)
    def sealed_changed(body: kopf.Body, **_: Any) -> None:
        agent.sealed.deliver(body)

    @kopf.timer(
        *SEALED, interval=max(config.resync_seconds, 30), backoff=backoff, registry=registry
    )
    def sealed_resync(body: kopf.Body, **_: Any) -> None:
        agent.sealed.deliver(body)

    @kopf.on.delete(*SEALED, registry=registry)
    def sealed_deleted(body: kopf.Body, **_: Any) -> None:
        agent.sealed.waits.done((body.metadata["namespace"], body.metadata["name"]))
        agent.sealed.forget(body)

    @kopf.on.event("", "v1", "namespaces", registry=registry,
                   when=lambda name, **_: agent.sealed.waits.waiting_for(str(name)))
    def namespace_event(type: str | None, body: kopf.Body, name: str, **_: Any) -> None:
        """A namespace that sealed connections wait for appeared: deliver them now."""
        if type == "DELETED" or body.metadata.get("deletionTimestamp"):
            return
        agent.sealed.deliver_waiting(name)
