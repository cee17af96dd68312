"""The agent: its cluster client and the two kinds it reconciles (the shell's state).

Built once from the configuration by :func:`addon_agent.main.main` and handed to
:func:`addon_agent.shell.handlers.register`, whose handlers call
:class:`~addon_agent.shell.platform.Platforms` (ServingPlatforms) and
:class:`~addon_agent.shell.sealed.SealedConnections` (SealedStorageConnections).
"""

from __future__ import annotations

from addon_agent.config import AgentConfig
from addon_agent.io.applier import Applier
from addon_agent.io.crd_cache import CrdCache
from addon_agent.io.inventory import Inventory
from addon_agent.io.kube import Kube, api_client_for
from addon_agent.io.observe import Observer
from addon_agent.io.planner import Planner
from addon_agent.shell.platform import Platforms
from addon_agent.shell.sealed import SealedConnections


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
