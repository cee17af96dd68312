"""Whose credentials a console request reads the hub with (no I/O but reading files).

Two ways to run the console:

- **behind a proxy** (the chart's Deployment, many users): the hub's address and CA are the
  console's (``--hub-server``/``--hub-ca``, or the pod's in-cluster ones), and each request
  carries its user's token, put there by the authenticating proxy in front of it
  (OpenShift's oauth-proxy ``--pass-access-token`` sends ``X-Forwarded-Access-Token``; others
  send ``Authorization: Bearer``). A request without one is refused (401); the console never
  falls back to a token of its own.
- **on a workstation** (one user): every request uses that user's kubeconfig (a token or a
  client certificate), and the console listens on localhost only.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

TOKEN_HEADERS = ("X-Forwarded-Access-Token", "Authorization")
"""Where an authenticating proxy puts the user's token, in the order they are read."""
IN_CLUSTER_CA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
"""The CA of the cluster a pod runs in (the hub, for the chart's Deployment)."""


class CredentialsError(Exception):
    """The console cannot read the hub as anyone (bad flags, no kubeconfig)."""


@dataclass(frozen=True)
class Credentials:
    """What one request reads the hub with: where the hub is, and who the user is."""

    server: str
    """The hub API server's URL."""
    ca_file: str | None = None
    """Its CA bundle (None: the system's)."""
    token: str | None = None
    """The user's bearer token."""
    cert_file: str | None = None
    """The user's client certificate (a kubeconfig's), with ``key_file``."""
    key_file: str | None = None
    insecure: bool = False
    """A kubeconfig that says ``insecure-skip-tls-verify`` (never the proxy mode)."""

    def headers(self) -> dict[str, str]:
        """The request headers that carry the user's identity (none for a certificate)."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def configuration(self) -> client.Configuration:
        """The same identity as the Kubernetes client's configuration (for the CLI's Hub)."""
        cfg = client.Configuration()
        cfg.host = self.server
        cfg.ssl_ca_cert = self.ca_file
        cfg.verify_ssl = not self.insecure
        cfg.cert_file, cfg.key_file = self.cert_file, self.key_file
        if self.token:
            cfg.api_key = {"BearerToken": f"Bearer {self.token}"}
        return cfg

    def ssl_context(self) -> ssl.SSLContext:
        """TLS to the hub: its CA, and the user's certificate when that is who they are."""
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_file and self.key_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


def token_of(headers: Mapping[str, str]) -> str | None:
    """The user's token in a request's headers (None: it carries none).

    ``X-Forwarded-Access-Token`` first (OpenShift's oauth-proxy), then a bearer
    ``Authorization``. Anything else in ``Authorization`` (Basic, a bare word) is not a token.
    """
    forwarded = (headers.get(TOKEN_HEADERS[0]) or "").strip()
    if forwarded:
        return forwarded
    scheme, _, value = (headers.get(TOKEN_HEADERS[1]) or "").strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


@dataclass(frozen=True)
class Source:
    """Where the console finds each request's credentials."""

    server: str
    ca_file: str | None = None
    workstation: Credentials | None = None
    """The one user's (kubeconfig mode); None: each request's own token (proxy mode)."""

    def for_request(self, headers: Mapping[str, str]) -> Credentials | None:
        """The credentials of a request; None when it carries no identity (proxy mode)."""
        if self.workstation is not None:
            return self.workstation
        token = token_of(headers)
        return Credentials(self.server, self.ca_file, token=token) if token else None


def from_kubeconfig(path: str | None, context: str | None = None) -> Source:
    """One user: the kubeconfig's server, CA and credentials (``KUBECONFIG`` when None)."""
    cfg = client.Configuration()
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=path, context=context, client_configuration=cfg)
    except (ConfigException, OSError, TypeError) as err:
        raise CredentialsError(f"no usable kubeconfig: {err}") from err
    keys = cfg.api_key or {}
    auth = str(keys.get("BearerToken") or keys.get("authorization") or "")
    token = auth.partition(" ")[2] if auth.lower().startswith("bearer ") else None
    user = Credentials(str(cfg.host), cfg.ssl_ca_cert or None, token=token,
                       cert_file=cfg.cert_file or None, key_file=cfg.key_file or None,
                       insecure=not cfg.verify_ssl)
    return Source(user.server, user.ca_file, workstation=user)


def behind_proxy(server: str | None, ca_file: str | None) -> Source:
    """Many users, each request with its own token: the hub given, else the pod's own."""
    if server:
        return Source(server, ca_file)
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get(
        "KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise CredentialsError("--hub-server is required outside a pod (or use --kubeconfig "
                               "to run the console as yourself)")
    return Source(f"https://{host}:{port}", ca_file or IN_CLUSTER_CA)
