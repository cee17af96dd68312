"""The agent's X25519 identity: private key Secret and published identity ConfigMap."""

from __future__ import annotations

import base64

from addon_agent import labels as lb
from addon_agent.kube import Kube
from addon_api import constants as c
from addon_api import sealing

PRIVATE_KEY_FIELD = "privateKey"


def ensure_namespace(kube: Kube, namespace: str) -> None:
    """Create the agent namespace when it does not exist (never takes it over)."""
    if kube.get("v1", "Namespace", namespace) is None:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})


def ensure_identity(kube: Kube, namespace: str) -> bytes:
    """Load or create the private key and publish the identity ConfigMap; return the key."""
    secret = kube.get("v1", "Secret", c.AGENT_KEY_SECRET, namespace)
    raw = ((secret or {}).get("data") or {}).get(PRIVATE_KEY_FIELD)
    if raw:
        key = base64.b64decode(raw)
    else:
        key = sealing.generate_private_key()
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": c.AGENT_KEY_SECRET,
                    "namespace": namespace,
                    "labels": lb.ours(),
                },
                "type": "Opaque",
                "data": {PRIVATE_KEY_FIELD: base64.b64encode(key).decode()},
            },
            force=False,
        )
    public = sealing.public_key_of(key)
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": c.AGENT_IDENTITY_CONFIGMAP,
                "namespace": namespace,
                "labels": lb.ours(),
            },
            "data": {c.IDENTITY_PUBLIC_KEY: public, c.IDENTITY_KEY_ID: sealing.key_id(public)},
        }
    )
    return key
