"""kopf credentials from an explicit kubeconfig (never falls back to in-cluster ones)."""

from __future__ import annotations

import kopf
from kubernetes import client, config


def connection_info(kubeconfig: str) -> kopf.ConnectionInfo:
    """Kopf ConnectionInfo for the current context of ``kubeconfig``."""
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
    # The client keeps a kubeconfig's token under "BearerToken" (older releases used
    # "authorization"); either way it carries the "Bearer " prefix.
    keys = cfg.api_key or {}
    token = str(keys.get("BearerToken") or keys.get("authorization") or "")
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
        token=token.removeprefix("Bearer ") or None,
        scheme="Bearer" if token else None,
        priority=100,
    )
