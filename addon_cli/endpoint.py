"""Fleet endpoints: each model's serving set (``status.endpoint``) in the form a router reads.

The manager publishes, per MultiClusterInferenceService, the clusters that may take its
traffic with their weights (``status.endpoint``, see
:mod:`addon_manager.engine.endpoint`). This module turns that into:

- the text of ``model-serving-addon endpoint show`` (members, weights, why each other cluster
  takes no traffic);
- the configuration of HAProxy (a well-kept proxy; Debian packages it) as the fleet's global
  load balancer that ``model-serving-addon endpoint serve`` runs: one frontend; per model a
  host ``NAME.NAMESPACE.DOMAIN`` (a map file routes it) and a backend with one server per
  member (Spread: weighted round robin; Failover: the active member, the standbys as backup
  servers in priority order), the model's host sent to each cluster's ingress, active health
  checks of each server (the model-ready call of its protocol: ``GET /v1/models/NAME``, or
  ``/v2/models/NAME/ready``) as a second signal beside the hub's, and retries of a failed
  request on another member.

Pure functions only: what they return is written and loaded by :mod:`addon_cli.endpoint_serve`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HAPROXY_MAX_WEIGHT = 256
"""HAProxy's largest server weight; larger endpoint weights are scaled down to it."""

CLUSTER_HEADER = "X-Fleet-Cluster"
"""Response header naming the cluster (the HAProxy server) that answered."""


@dataclass(frozen=True)
class Server:
    """One member of a model's serving set as an HAProxy server."""

    cluster: str
    address: str
    """``host:port`` the request is sent to (the cluster's ingress, or the model URL's host)."""
    weight: int
    backup: bool = False
    tls: bool = False


@dataclass(frozen=True)
class Route:
    """One model behind the fleet endpoint."""

    namespace: str
    name: str
    fleet_host: str
    """The host callers use: ``NAME.NAMESPACE.DOMAIN``."""
    model_host: str
    """The host sent to each cluster (the model's host there; "" when no member has one)."""
    servers: tuple[Server, ...]
    skipped: tuple[tuple[str, str], ...] = ()
    """Members that cannot be routed to, with why (no address, another host)."""
    check_path: str = ""
    """The model-ready call of its protocol the health checks send ("" for a TCP check)."""

    @property
    def backend(self) -> str:
        """The HAProxy backend's name."""
        return f"m_{self.namespace}_{self.name}"


def _address(url: str) -> tuple[str, bool]:
    """``host:port`` of a URL and whether it is https ("" when it has no host)."""
    parts = urlsplit(url)
    if not parts.hostname:
        return "", False
    tls = parts.scheme == "https"
    return f"{parts.hostname}:{parts.port or (443 if tls else 80)}", tls


def parse_via(values: Iterable[str]) -> dict[str, str]:
    """``CLUSTER=BASE`` pairs (``--via``): the cluster's ingress ``host:port`` by cluster."""
    out: dict[str, str] = {}
    for value in values:
        cluster, sep, base = value.partition("=")
        address, _ = _address(base if "//" in base else f"http://{base}")
        if not sep or not cluster or not address:
            raise ValueError(f"--via takes CLUSTER=BASE (http://host:port), not {value!r}")
        out[cluster] = address
    return out


def _scaled(weights: Sequence[int]) -> list[int]:
    top = max(weights, default=0)
    if top <= HAPROXY_MAX_WEIGHT:
        return list(weights)
    return [max(1, round(w * HAPROXY_MAX_WEIGHT / top)) if w else 0 for w in weights]


def check_path(intent: Mapping[str, Any]) -> str:
    """The model-ready call health checks send, by the model's protocol (its template's).

    V1 (KServe's default): ``GET /v1/models/NAME``; V2 (Open Inference Protocol, as MLServer
    speaks it): ``GET /v2/models/NAME/ready``; gRPC: "" (a TCP check: the proxy speaks
    HTTP/1).
    """
    name = str((intent.get("metadata") or {}).get("name", ""))
    predictor = (((intent.get("spec") or {}).get("template") or {}).get("predictor") or {})
    protocol = str((predictor.get("model") or {}).get("protocolVersion")
                   or predictor.get("protocolVersion") or "v1")
    if protocol == "v2":
        return f"/v2/models/{name}/ready"
    return "" if protocol.startswith("grpc") else f"/v1/models/{name}"


def route_of(intent: Mapping[str, Any], via: Mapping[str, str], domain: str) -> Route:
    """The route of one MultiClusterInferenceService from its ``status.endpoint``."""
    meta = intent.get("metadata") or {}
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    found = ((intent.get("status") or {}).get("endpoint") or {})
    failover = found.get("policy") == "Failover"
    members = [m for m in found.get("members") or [] if failover or int(m.get("weight", 0)) > 0]
    host = ""
    kept: list[tuple[Mapping[str, Any], str, bool]] = []
    skipped: list[tuple[str, str]] = []
    for member in members:
        cluster, url = str(member.get("cluster", "")), str(member.get("url", ""))
        member_host = urlsplit(url).hostname or ""
        if host and member_host and member_host != host:
            skipped.append((cluster, f"its model host {member_host} is not {host}"))
            continue
        address, tls = (via[cluster], False) if cluster in via else _address(url)
        if not address:
            skipped.append((cluster, "no address: its URL has no host and --via names none"))
            continue
        host = host or member_host
        kept.append((member, address, tls))
    # Failover: the first member (the hub's active one) serves, the standbys are backup
    # servers in priority order (HAProxy sends to the first one up when the active is down,
    # before the hub has noticed); a backup needs a weight above 0 to be used.
    weights = ([1] * len(kept) if failover
               else _scaled([int(m.get("weight", 0)) for m, _, _ in kept]))
    servers = tuple(
        Server(str(m.get("cluster")), address, weight, backup=failover and i > 0, tls=tls)
        for i, ((m, address, tls), weight) in enumerate(zip(kept, weights, strict=True)))
    return Route(namespace, name, f"{name}.{namespace}.{domain}", host, servers,
                 tuple(skipped), check_path(intent))


def routes(intents: Iterable[Mapping[str, Any]], via: Mapping[str, str], domain: str
           ) -> list[Route]:
    """The routes of every model, in namespace and name order."""
    out = [route_of(i, via, domain) for i in intents]
    return sorted(out, key=lambda r: (r.namespace, r.name))


_SAFE = re.compile(r"^[A-Za-z0-9.:_-]+$")
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9._/-]+$")


def _safe(value: str, what: str) -> str:
    """``value`` for an HAProxy configuration line: names, hosts and addresses only."""
    if not _SAFE.match(value):
        raise ValueError(f"{what} {value!r} cannot go into the proxy's configuration")
    return value


def hosts_map(found: Sequence[Route]) -> str:
    """The map file from a caller's host to the model's backend."""
    return "".join(f"{_safe(r.fleet_host, 'host')} {r.backend}\n" for r in found)


def haproxy_config(found: Sequence[Route], listen: str, run_dir: Path,
                   check_interval_ms: int = 500) -> str:
    """HAProxy's configuration for ``found`` (see the module docstring).

    ``run_dir`` holds the admin socket, the map file (:func:`hosts_map`) and the servers'
    state, which a reload carries over so that a server found down stays down.
    """
    lines = [
        "# Written by model-serving-addon endpoint serve from the hub's serving sets.",
        "global",
        f"    stats socket {run_dir}/admin.sock mode 600 level admin expose-fd listeners",
        f"    server-state-file {run_dir}/servers.state",
        "",
        "defaults",
        "    mode http",
        "    timeout connect 2s",
        "    timeout client 60s",
        "    timeout server 60s",
        "    timeout check 2s",
        "    load-server-state-from-file global",
        # A failed request is tried again on another member (it is buffered for that).
        "    option http-buffer-request",
        "    retries 3",
        "    retry-on conn-failure empty-response response-timeout 502 503 504",
        "    option redispatch 1",
        f"    default-server inter {check_interval_ms}ms fastinter {check_interval_ms}ms "
        f"downinter {check_interval_ms}ms fall 2 rise 2",
        "",
        "frontend fleet",
        f"    bind {_safe(listen, 'listen address')}",
        f"    http-request set-var(txn.backend) req.hdr(host),field(1,:),lower,"
        f"map({run_dir}/hosts.map)",
        '    http-request return status 404 content-type text/plain string '
        '"no model at this host" if !{ var(txn.backend) -m found }',
        "    use_backend %[var(txn.backend)]",
    ]
    for r in found:
        _safe(r.name, "model name")
        lines += [
            "",
            f"backend {_safe(r.backend, 'backend')}",
            "    balance roundrobin",
            f"    http-response set-header {CLUSTER_HEADER} %[srv_name]",
        ]
        if r.model_host:
            host = _safe(r.model_host, "model host")
            lines.append(f"    http-request set-header Host {host}")
            if r.check_path:
                if not _SAFE_PATH.match(r.check_path):
                    raise ValueError(f"check path {r.check_path!r} cannot go into the proxy's "
                                     "configuration")
                path = r.check_path
                lines += [
                    "    option httpchk",
                    f"    http-check send meth GET uri {path} ver HTTP/1.1 hdr Host {host}",
                    "    http-check expect status 200",
                ]
        for s in r.servers:
            flags = " backup" if s.backup else ""
            if s.tls:
                flags += f" ssl verify required ca-file @system-ca sni str({r.model_host})"
            lines.append(f"    server {_safe(s.cluster, 'cluster')} "
                         f"{_safe(s.address, 'address')} weight {s.weight} check{flags}")
    return "\n".join(lines) + "\n"


def show(intent: Mapping[str, Any]) -> str:
    """``endpoint show``: the serving set of one model, and why each other cluster is out."""
    meta = intent.get("metadata") or {}
    found = (intent.get("status") or {}).get("endpoint")
    what = f"mcisvc/{meta.get('name')} in {meta.get('namespace')}"
    if not found:
        return f"{what}: no serving set yet (the manager has not reported on it)"
    members = found.get("members") or []
    lines = [f"{what}: {found.get('policy') or 'Spread'}, {found.get('serving', 0)} of "
             f"{len(members) + len(found.get('excluded') or [])} cluster(s) serving"
             + (f", since {found['lastChangeTime']}" if found.get("lastChangeTime") else "")]
    rows = [("CLUSTER", "WEIGHT", "REVISION", "URL / WHY NOT")]
    for m in members:
        weight = str(m.get("weight", 0)) + (" (standby)" if found.get("policy") == "Failover"
                                             and not m.get("weight") else "")
        rows.append((str(m.get("cluster")), weight, str(m.get("revision") or "-"),
                     str(m.get("url") or "")))
    for x in found.get("excluded") or []:
        rows.append((str(x.get("cluster")), "-", "-",
                     f"{x.get('reason')}: {x.get('message')}".rstrip(": ")))
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    lines += ["  ".join([*(r[i].ljust(width[i]) for i in range(3)), r[3]]).rstrip()
              for r in rows]
    if found.get("omitted"):
        lines.append(f"({found['omitted']} more cluster(s) not listed)")
    return "\n".join(lines)
