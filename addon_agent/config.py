"""Runtime settings of the agent (from the command line)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class AgentConfig:
    """What the agent was started with."""

    kubeconfig: str | None
    namespace: str
    bundle_dir: Path
    cache_dir: Path
    metrics_port: int
    metrics_address: str
    cluster_name: str
    resync_seconds: float
    lease_seconds: float
    log_level: str = "INFO"
    external_webhook_url: str | None = None
    """Base URL of the stack's webhook server when its controllers run outside the cluster
    (the webhook configurations then call this URL instead of the in-cluster Service)."""
    external_webhook_ca: bytes | None = None
    """PEM of the CA that signed that server's certificate (their caBundle)."""
