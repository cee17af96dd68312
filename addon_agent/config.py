"""Runtime settings of the agent.

They come from the command line, except the development-only ones that exist for the testbed
alone (its KServe controller runs outside the cluster): those come from the environment, so
they are not part of the agent's public command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from addon_api import constants as c
from addon_api.tenancy import NamespacePolicy

DEV_EXTERNAL_WEBHOOK_URL = "MODEL_SERVING_DEV_EXTERNAL_WEBHOOK_URL"
"""Environment variable, development only (the testbed): base URL of a webhook server that
runs outside the cluster; the stack's webhook configurations call it (+ their path)."""
DEV_EXTERNAL_WEBHOOK_CA_FILE = "MODEL_SERVING_DEV_EXTERNAL_WEBHOOK_CA_FILE"
"""Environment variable, development only (the testbed): PEM file of the CA that signed that
server's certificate. Set both or neither."""


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
    seal_verify_keys: tuple[str, ...] = ()
    """Base64 Ed25519 verify keys of the manager (``--seal-verify-key``): a sealed payload
    must carry a signature of one of them. None configured: every payload is refused
    (``SealUnsigned``)."""
    target_namespaces: NamespacePolicy | None = None
    """The namespace policy of ``--target-namespaces``, used only while the manager's ConfigMap
    ``model-serving-namespace-policy`` is not in the agent's namespace; None (not given): until
    then, whatever names a spoke namespace waits for it."""
    state_namespace: str = c.AGENT_STATE_NAMESPACE
    """Namespace of the agent's private key Secret and seal ledger (``--state-namespace``),
    apart from the add-on namespace other add-ons may share."""
    allow_dev_flags: bool = False
    """Whether ServingPlatforms may carry devFlags (``--allow-dev-flags``): the hub's policy
    again, on the spoke (a ServingPlatform with devFlags is refused otherwise)."""
    external_webhook_url: str | None = None
    """Development only (``MODEL_SERVING_DEV_EXTERNAL_WEBHOOK_URL``): base URL of the stack's
    webhook server when its controllers run outside the cluster, as the testbed's KServe
    controller does (the webhook configurations then call this URL instead of the in-cluster
    Service)."""
    external_webhook_ca: bytes | None = None
    """Development only (``MODEL_SERVING_DEV_EXTERNAL_WEBHOOK_CA_FILE``, read at start): PEM
    of the CA that signed that server's certificate (their caBundle)."""
