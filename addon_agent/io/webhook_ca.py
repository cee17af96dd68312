"""The agent's own webhook CA and serving certificates, added to a plan (I/O).

Used when neither cert-manager nor OpenShift's
service CA provides the stack's webhook certificates: the CA is kept in Secret
:data:`WEBHOOK_CA_SECRET` (agent namespace), each leaf is reused while valid
(:mod:`addon_agent.pure.certs` decides) and becomes a TLS Secret of the plan, and the CA goes into
every ``caBundle`` of the plan (:func:`addon_agent.pure.planning.inject_ca_bundle`).
"""

from __future__ import annotations

import base64
import datetime as dt

from addon_agent import labels as lb
from addon_agent.io.kube import Kube
from addon_agent.pure import certs, planning
from addon_agent.pure.manifests import b64
from addon_agent.pure.planning import Plan

WEBHOOK_CA_SECRET = "model-serving-agent-webhook-ca"


def _unb64(value: str) -> str:
    return base64.b64decode(value).decode()


def current_ca(kube: Kube, agent_namespace: str, now: dt.datetime) -> certs.KeyPair:
    """The agent's webhook CA: the stored one while valid, else a new one (stored)."""
    secret = kube.get("v1", "Secret", WEBHOOK_CA_SECRET, agent_namespace)
    data = (secret or {}).get("data") or {}
    if data.get("tls.crt") and data.get("tls.key"):
        pair = certs.KeyPair(_unb64(data["tls.crt"]), _unb64(data["tls.key"]))
        if not certs.needs_renewal(pair.cert_pem, now):
            return pair
    pair = certs.new_ca(now)
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": WEBHOOK_CA_SECRET,
                "namespace": agent_namespace,
                "labels": lb.ours(),
            },
            "type": "kubernetes.io/tls",
            "data": {
                "tls.crt": b64(pair.cert_pem),
                "tls.key": b64(pair.key_pem),
            },
        }
    )
    return pair


def add_webhook_certs(kube: Kube, agent_namespace: str, the_plan: Plan) -> None:
    """Serve the plan's certificate requests from the agent's CA (``the_plan`` is changed)."""
    now = dt.datetime.now(dt.UTC)
    ca = current_ca(kube, agent_namespace, now)
    secrets = []
    for request in the_plan.certificates:
        existing = kube.get("v1", "Secret", request.secret_name, request.namespace)
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
    planning.inject_ca_bundle(objects, b64(ca.cert_pem))
    the_plan.objects = planning.order(objects)
