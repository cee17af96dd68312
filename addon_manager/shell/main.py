"""``model-serving-addon manager``: run the hub manager (kopf, embedded, clusterwide)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

import kopf
from kubernetes import client, config
from prometheus_client import start_http_server

from addon_api import constants as c
from addon_api import tenancy
from addon_api.confinement import PodRules
from addon_manager.engine import partition
from addon_manager.engine.policy import Policy, parse_namespaces
from addon_manager.facts import records
from addon_manager.kinds.registry import KINDS
from addon_manager.shell import (
    addonconfig,
    addonregistration,
    crds,
    handlers,
    informers,
    leadership,
    sealkeys,
)
from addon_manager.shell.apply import HubWriter
from addon_manager.shell.corev1 import CoreV1
from addon_manager.shell.metricgate import PrometheusGate
from addon_manager.shell.reconcile import GATE_REFRESH
from addon_manager.shell.secrets import SecretWatches
from addon_manager.shell.shards import ShardKeeper, ShardSettings

RECURSION_LIMIT = 50_000
"""Python recursion limit of the manager: enough to decode (and let kopf handle) objects
nested as deep as the API server admits (10,000 levels)."""


class JsonFormatter(logging.Formatter):
    """One JSON object per log line: time, level, logger, message (+ exception)."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as JSON."""
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for attr in ("k8s_skip", "k8s_ref"):
            ref = getattr(record, attr, None)
            if isinstance(ref, dict) and ref.get("name"):
                out["object"] = f"{ref.get('namespace', '')}/{ref['name']}"
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The manager's command line."""
    p = argparse.ArgumentParser(prog="model-serving-addon manager")
    p.add_argument("--kubeconfig", help="kubeconfig of the hub (default: in-cluster)")
    p.add_argument("--metrics-port", type=int, default=8080,
                   help="port of /metrics (0 disables)")
    p.add_argument("--no-addon-enablement", action="store_true",
                   help="do not create ManagedClusterAddOn model-serving in selected clusters")
    p.add_argument("--concurrency", type=int, default=16,
                   help="concurrent writes to the hub API server")
    p.add_argument("--min-interval", type=float, default=1.0,
                   help="seconds between two reconciles (and status writes) of one intent")
    p.add_argument("--deletion-blocked-after", type=float, default=30.0,
                   help="seconds before a deletion waiting for works reports DeletionBlocked")
    p.add_argument("--leader-elect", action="store_true",
                   help="compete for a Lease so that only one of several replicas acts")
    p.add_argument("--leader-election-namespace",
                   default=os.environ.get("POD_NAMESPACE", "model-serving-system"),
                   help="namespace of the Lease (default: $POD_NAMESPACE)")
    p.add_argument("--leader-election-identity", default=leadership.default_identity(),
                   help="this replica's name in the election (default: $POD_NAME)")
    p.add_argument("--lease-duration", type=int, default=15,
                   help="seconds a standby waits for a silent leader before taking over "
                   "(with --shards: before the survivors take a silent replica's shards)")
    p.add_argument("--shards", type=int, default=0,
                   help="split the intents into this many shards, each written by the one "
                   "replica holding its Lease (in --leader-election-namespace); every replica "
                   "acts, on its share of the shards (0: not sharded; instead of "
                   "--leader-elect)")
    p.add_argument("--stale-after", type=float, default=60.0,
                   help="seconds a ManifestWork may wait for the work agent to pick up its spec "
                   "before the cluster's status entries show as stale (0 turns this off)")
    p.add_argument("--allow-dev-flags", action="store_true",
                   help="let ModelServings set spec.devFlags (images, manifests); without it "
                   "they are refused with DevFlagsNotAllowed")
    p.add_argument("--stack-owner-namespaces", default="",
                   help="comma-separated hub namespaces whose ModelServings may own a "
                   "cluster's stack ('*': every namespace; empty: --namespace only, the "
                   "platform admin's)")
    p.add_argument("--target-namespaces", default="",
                   help="which spoke namespaces each hub namespace's intents may target: "
                   "'hub=spoke1,spoke2;hub2=spoke3', '*' as a key for every hub namespace not "
                   "listed, '*' as a target for any namespace (no executor identity then); "
                   "empty: each hub namespace may target the spoke namespace of its own name. "
                   "kube-*, openshift-*, open-cluster-management* and the agent's namespace "
                   "are always denied")
    p.add_argument("--denied-namespaces", default="",
                   help="comma-separated spoke namespaces no tenant may target, whatever "
                   "--target-namespaces says (besides kube-*, openshift-*, "
                   "open-cluster-management*, the stacks' and the agent's namespaces)")
    p.add_argument("--pod-service-accounts", default="",
                   help="comma-separated ServiceAccounts (of the pod's namespace) tenants' "
                   "model pods may run as, besides 'default'")
    p.add_argument("--priority-classes", default="",
                   help="comma-separated priority classes tenants' model pods may name "
                   "(none by default)")
    p.add_argument("--shared-credential-namespaces", default="",
                   help="comma-separated spoke namespaces where the StorageConnections of "
                   "several hub namespaces may write entries into one storage-config Secret "
                   "(elsewhere the second tenant's is refused: Conflict)")
    p.add_argument("--unavailable-grace", type=float, default=partition.UNAVAILABLE_GRACE,
                   help="seconds the ManifestWorks of a cluster that left its Placement while "
                   "its ManagedCluster is not Available are kept, counted from when it stopped "
                   "being Available (default one day; 0 removes them at once)")
    p.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE", "model-serving-system"),
                   help="the manager's namespace: its sealing keys Secret and sealing ConfigMap "
                   "(pinned agent keys, approvals, sequences) live there (default: "
                   "$POD_NAMESPACE)")
    p.add_argument("--addon-config", default=f"{c.ADDON_NAME}-defaults",
                   help="AddOnDeploymentConfig (in --namespace) where the manager publishes its "
                   "seal verify key as the variable SEAL_VERIFY_KEY for the agents")
    p.add_argument("--addon-config-source", default="",
                   help="ConfigMap (in --namespace, key spec.yaml) with the rest of that "
                   "AddOnDeploymentConfig's spec (the chart's values): the manager then owns "
                   "the whole object and writes it from this and its key; empty: it only sets "
                   "its variable in an AddOnDeploymentConfig someone else keeps")
    p.add_argument("--registration-source", default="",
                   help="ConfigMap (in --namespace, key registration.yaml) with the add-on's "
                   "ClusterManagementAddOn and AddOnTemplate, which the manager then creates "
                   "and keeps (an OLM install: docs/olm.md); empty: the chart creates them")
    p.add_argument("--sealing-refresh", type=float, default=10.0,
                   help="seconds between two reads of pinned agent keys and approvals")
    p.add_argument("--prometheus-url", default="",
                   help="Prometheus or Thanos querier that progressive rollouts' metric gates "
                   "query (e.g. ACM's https://rbac-query-proxy.open-cluster-management-"
                   "observability.svc:8443); without it a metric gate never passes")
    p.add_argument("--prometheus-token-file", type=Path, default=None,
                   help="bearer token sent to --prometheus-url (e.g. the pod's ServiceAccount "
                   "token)")
    p.add_argument("--prometheus-ca-file", type=Path, default=None,
                   help="CA bundle that signed --prometheus-url's certificate")
    p.add_argument("--gate-refresh", type=float, default=GATE_REFRESH,
                   help="seconds a metric gate's or an endpoint spillover's answer is used "
                   "before its query runs again (how soon a change of the metric is acted "
                   "on, against one query per intent per interval)")
    p.add_argument("--log-level", default="INFO",
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--log-format", default="json", choices=["json", "text"])
    return p.parse_args(argv)


def connection_from_kubeconfig(cfg: client.Configuration) -> kopf.ConnectionInfo:
    """Kopf credentials from a loaded kubernetes client configuration."""
    header = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix(
        "authorization"
    )
    parts = header.split(" ", 1) if header else []
    scheme, token = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0] if parts else None)
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        username=cfg.username or None,
        password=cfg.password or None,
        scheme=scheme,
        token=token,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
    )


def main(argv: list[str]) -> int:
    """Run the manager until interrupted."""
    args = parse_args(argv)
    if args.shards and args.leader_elect:
        raise SystemExit("model-serving-addon manager: --shards and --leader-elect exclude "
                         "each other (sharded replicas all act, each on its shards)")
    if args.shards < 0:
        raise SystemExit("model-serving-addon manager: --shards must be 0 or more")
    if args.gate_refresh <= 0:
        raise SystemExit("model-serving-addon manager: --gate-refresh must be more than 0")
    handler = logging.StreamHandler(sys.stderr)
    if args.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=args.log_level, handlers=[handler], force=True)
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    logging.getLogger("leaderelection").setLevel(logging.WARNING)  # a line per retry
    quiet = max(logging.WARNING, logging.getLevelName(args.log_level))
    logging.getLogger("kopf.objects").setLevel(quiet)  # "handler succeeded" noise

    state = handlers.ManagerState()
    cfg = client.Configuration()
    if args.kubeconfig:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=args.kubeconfig, client_configuration=cfg
        )
        state.settings.connection = connection_from_kubeconfig(cfg)
    else:
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    cfg.connection_pool_maxsize = max(args.concurrency, 4)
    writer = HubWriter(cfg, concurrency=args.concurrency)
    settings = state.settings
    settings.writer = writer
    watches = SecretWatches(client.ApiClient(cfg),
                            functools.partial(handlers.secret_changed, state))
    settings.secrets = watches
    settings.addons = not args.no_addon_enablement
    settings.min_interval = args.min_interval
    settings.deletion_blocked_after = args.deletion_blocked_after
    settings.stale_after = args.stale_after
    settings.policy = policy_from_args(args)
    settings.unavailable_grace = args.unavailable_grace
    settings.sealer = sealer_from_hub(client.ApiClient(cfg), args)
    settings.sealing_refresh = args.sealing_refresh
    settings.gate_refresh = args.gate_refresh
    if args.prometheus_url:
        settings.gate = PrometheusGate(args.prometheus_url, args.prometheus_token_file,
                                       args.prometheus_ca_file)
    state.informers = hub_informers(cfg, state)
    registry = kopf.OperatorRegistry()
    handlers.register(registry, KINDS.values())
    if args.metrics_port:
        start_http_server(args.metrics_port)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    elector: leadership.Elector | None = None
    keeper: ShardKeeper | None = None
    if args.shards:
        keeper = ShardKeeper(client.ApiClient(cfg), shard_settings(args), functools.partial(
            _on_loop, loop, functools.partial(handlers.shards_changed, state)))
        state.sharding = handlers.Sharding(keeper, args.shards, args.leader_election_identity)
        keeper.start()
    elif args.leader_elect:
        elector = leadership.Elector(client.ApiClient(cfg), election_settings(args))
        elector.start()
        # A warm standby: the informers list and watch while it waits, so that on taking
        # over it plans at once instead of listing every work first (no write before it leads:
        # nothing reconciles until kopf runs).
        handlers.start_informers(state, loop)
        try:
            loop.run_until_complete(loop.run_in_executor(None, elector.wait_until_leading))
        except KeyboardInterrupt:
            return 0
    # As the one that acts: the hub CRDs get this manager's schema (Helm never upgrades them).
    crds.ensure(client.ApiClient(cfg), _version())
    # The API server admits JSON nested 10,000 levels deep (in the open parts of a schema) and
    # kopf decodes every object of a watched kind: with Python's default limit (1,000) one such
    # object made the watcher, and with it the whole manager, fail. The models reject it
    # (InvalidSpec) without recursing (addon_api.base.too_deep).
    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
    try:
        kopf.run(loop=loop, standalone=True, clusterwide=True, memo=state.memo(),
                 registry=registry)
    finally:
        if elector is not None:
            elector.release()
        if keeper is not None:
            keeper.stop()
        watches.stop()
    return 0


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    """Run ``fn(*args)`` on ``loop`` (from another thread); dropped once the loop is closed."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, *args)


def _version() -> str:
    """Return the manager's version (its package's)."""
    try:
        return metadata.version("model-serving-addon")
    except metadata.PackageNotFoundError:
        return "0"


def hub_informers(cfg: client.Configuration, state: handlers.ManagerState
                 ) -> list[informers.WorkInformer]:
    """The informers of the resources with one object per cluster (or more), outside kopf.

    kopf's per-object machinery costs tens of milliseconds per object: at thousands of
    clusters it took minutes before the first reconcile. Works are filtered by the add-on's
    label, add-ons by name, on the API server.
    """
    bind = functools.partial
    return [
        informers.informer_for(cfg, bind(handlers.work_changed, state), store=state.works),
        informers.WorkInformer(
            informers.HubSource(cfg, "", path=CLUSTERS_PATH), bind(handlers.cluster_changed, state),
            store=state.clusters, parse=records.parse_cluster, what="ManagedCluster"),
        informers.WorkInformer(
            informers.HubSource(cfg, "", path=ADDONS_PATH,
                                field_selector=f"metadata.name={c.ADDON_NAME}"),
            bind(handlers.addon_changed, state), store=state.addons, parse=records.parse_addon,
            what="ManagedClusterAddOn"),
    ]


CLUSTERS_PATH = "/apis/cluster.open-cluster-management.io/v1/managedclusters"
ADDONS_PATH = "/apis/addon.open-cluster-management.io/v1alpha1/managedclusteraddons"


def sealer_from_hub(api: client.ApiClient, args: argparse.Namespace) -> sealkeys.Sealer:
    """Load (or create) the sealing keys; publish the verify key in the add-on's config."""
    core = CoreV1(api)
    keys = sealkeys.load_or_create_keys(core, args.namespace)
    publish: Callable[[], bool]
    if args.addon_config_source:
        publish = functools.partial(
            addonconfig.publish, core, client.CustomObjectsApi(api), args.namespace,
            args.addon_config, args.addon_config_source, keys.verify_key,
        )
    else:
        publish = functools.partial(
            sealkeys.publish_verify_key, client.CustomObjectsApi(api), args.namespace,
            args.addon_config, keys.verify_key,
        )
    if args.registration_source:
        publish = functools.partial(
            _registered_then, functools.partial(
                addonregistration.apply, core, client.CustomObjectsApi(api), args.namespace,
                args.registration_source),
            publish)
    published = publish()
    if published:
        logging.getLogger(__name__).info(
            "seal verify key published in AddOnDeploymentConfig %s/%s (%s)",
            args.namespace, args.addon_config, sealkeys.VERIFY_KEY_VARIABLE)
    else:
        logging.getLogger(__name__).warning(
            "no AddOnDeploymentConfig %s/%s: start agents with --seal-verify-key=%s",
            args.namespace, args.addon_config, keys.verify_key)
    sealer = sealkeys.Sealer(keys, sealkeys.HubStore(core, args.namespace), args.namespace)
    sealer.publish = publish
    return sealer


def _registered_then(register: Callable[[], bool], publish: Callable[[], bool]) -> bool:
    """Write the add-on's registration, then its AddOnDeploymentConfig; whether both are right.

    The registration goes first: its ClusterManagementAddOn owns the AddOnDeploymentConfig.
    """
    registered = register()
    return publish() and registered


def policy_from_args(args: argparse.Namespace) -> Policy:
    """The admin's policy from the command line.

    ``--allow-dev-flags``, ``--stack-owner-namespaces``, ``--target-namespaces`` (an
    invalid value ends the process, naming the entry), ``--denied-namespaces``,
    ``--pod-service-accounts``, ``--priority-classes`` and ``--shared-credential-namespaces``.
    """
    try:
        targets = tenancy.parse(args.target_namespaces)
    except ValueError as err:
        raise SystemExit(f"model-serving-addon manager: {err}") from err
    return Policy(
        allow_dev_flags=bool(args.allow_dev_flags),
        stack_owner_namespaces=parse_namespaces(args.stack_owner_namespaces,
                                                args.namespace),
        namespaces=replace(targets, denied=_names(args.denied_namespaces)),
        pods=PodRules(service_accounts=_names(args.pod_service_accounts),
                      priority_classes=_names(args.priority_classes)),
        shared_credential_namespaces=_names(args.shared_credential_namespaces),
    )


def _names(value: str) -> frozenset[str]:
    """A comma-separated flag's names (blanks dropped)."""
    return frozenset(n.strip() for n in value.split(",") if n.strip())


def shard_settings(args: argparse.Namespace) -> ShardSettings:
    """Shard Lease timings from ``--lease-duration``, as the leader election's."""
    election = election_settings(args)
    return ShardSettings(
        namespace=election.namespace, identity=election.identity, shards=int(args.shards),
        lease_duration=election.lease_duration, renew_deadline=election.renew_deadline,
        retry_period=election.retry_period)


def election_settings(args: argparse.Namespace) -> leadership.ElectionSettings:
    """Lease timings from ``--lease-duration`` (renew deadline 2/3 of it, retries 1/5)."""
    duration = max(int(args.lease_duration), 4)
    renew = max(duration * 2 // 3, 3)
    retry = max(min(duration // 5, renew // 2), 1)
    return leadership.ElectionSettings(
        namespace=args.leader_election_namespace,
        identity=args.leader_election_identity,
        lease_duration=duration,
        renew_deadline=renew,
        retry_period=retry,
    )
