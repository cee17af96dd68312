"""The agent: its cluster client and the two kinds it reconciles (the shell's state).

Built once from the configuration by :func:`addon_agent.main.main` and handed to
:func:`addon_agent.shell.handlers.register`, whose handlers call
:class:`~addon_agent.shell.platform.Platforms` (ServingPlatforms) and
:class:`~addon_agent.shell.sealed.SealedConnections` (SealedStorageConnections).
"""

from __future__ import annotations

import logging
from typing import cast

import kopf

from addon_agent.config import AgentConfig
from addon_agent.io.applier import Applier
from addon_agent.io.crd_cache import CrdCache
from addon_agent.io.inventory import Inventory
from addon_agent.io.kube import Kube, api_client_for
from addon_agent.io.observe import Observer
from addon_agent.io.planner import Planner
from addon_agent.shell.platform import Platforms
from addon_agent.shell.sealed import SealedConnections
from addon_api import constants as c
from addon_api.reasons import SealedPhase, ServingPlatformPhase

log = logging.getLogger(__name__)

SPOKE_API = f"{c.GROUP}/{c.VERSION}"
JUDGED_AGAIN = frozenset({ServingPlatformPhase.INSTALLING, ServingPlatformPhase.DEGRADED})
"""ServingPlatform phases a changed namespace policy may change (a wait for it, a refusal)."""


class Agent:
    """State shared by the handlers: the configuration, the client, the two reconcilers."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.kube = Kube(api_client_for(config.kubeconfig))
        crds = CrdCache(self.kube)
        observer = Observer(self.kube, crds)
        inventory = Inventory(self.kube, config.namespace)
        planner = Planner(
            self.kube, observer, config.bundle_dir, config.cache_dir, config.namespace,
            config.metrics_port,
            external_webhook=(
                (config.external_webhook_url, config.external_webhook_ca)
                if config.external_webhook_url and config.external_webhook_ca
                else None
            ),
        )
        self.platforms = Platforms(config, self.kube, planner, observer,
                                   Applier(self.kube, crds, inventory), inventory)
        """ServingPlatforms: install, upgrade, remove, report."""
        self.sealed = SealedConnections(config, self.kube)
        """SealedStorageConnections: deliver, report, forget."""

    def policy_changed(self) -> None:
        """Judge again what waited for the namespace policy or was refused by the last one.

        ServingPlatforms not ``Available`` and sealed connections not ``Delivered``: a policy
        that now allows them installs or delivers at once, not at the next resync.
        """
        for body in self.kube.list(SPOKE_API, c.KIND_SERVING_PLATFORM):
            if (body.get("status") or {}).get("phase") in JUDGED_AGAIN:
                try:
                    self.platforms.reconcile(kopf.Body(cast(kopf.RawBody, body)))
                except Exception as err:  # the resync tries again
                    log.info("judging %s again: %s", body["metadata"]["name"], err)
        for body in self.kube.list(SPOKE_API, c.KIND_SEALED_STORAGE_CONNECTION,
                                   namespace=self.config.namespace):
            if (body.get("status") or {}).get("phase") != SealedPhase.DELIVERED:
                self.sealed.deliver(kopf.Body(cast(kopf.RawBody, body)))
