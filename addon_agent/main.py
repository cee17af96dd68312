"""``model-serving-addon agent``: run the spoke agent (kopf, embedded, cluster-wide)."""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import kopf
from prometheus_client import start_http_server

from addon_agent.config import DEV_EXTERNAL_WEBHOOK_CA_FILE, DEV_EXTERNAL_WEBHOOK_URL, AgentConfig
from addon_agent.io import lease, metrics
from addon_agent.shell.agent import Agent
from addon_agent.shell.handlers import register
from addon_api import constants as c
from addon_api import sealing, tenancy


def default_namespace(environ: Mapping[str, str] | None = None) -> str:
    """The agent's namespace when ``--namespace`` does not say: its own pod's.

    ``POD_NAMESPACE`` (set from the downward API's ``metadata.namespace``), else OCM's
    default add-on install namespace. The AddOnTemplate passes ``--namespace`` explicitly.
    """
    env = os.environ if environ is None else environ
    return env.get("POD_NAMESPACE") or c.AGENT_NAMESPACE


def parse(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> AgentConfig:
    """The agent's configuration from its command line and environment.

    The environment gives ``KUBECONFIG`` and ``POD_NAMESPACE`` (defaults of flags) and the
    development-only settings of :mod:`addon_agent.config` (``MODEL_SERVING_DEV_*``), which
    only the testbed sets.
    """
    env = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(prog="model-serving-addon agent")
    parser.add_argument(
        "--kubeconfig",
        default=env.get("KUBECONFIG"),
        help="kubeconfig of the managed cluster (default: in-cluster)",
    )
    parser.add_argument(
        "--namespace",
        default="",
        help="namespace the agent runs in: its published identity and health Lease live there "
        "(default: $POD_NAMESPACE, else open-cluster-management-agent-addon)",
    )
    parser.add_argument(
        "--state-namespace",
        default=c.AGENT_STATE_NAMESPACE,
        help="namespace of the agent's private key Secret and seal ledger, which no other "
        f"add-on shares (default: {c.AGENT_STATE_NAMESPACE}; created when missing)",
    )
    parser.add_argument(
        "--bundle-dir",
        type=Path,
        default=Path("/bundles"),
        help="root of the rendered stack bundles (<platform>/<version>/)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "model-serving-agent-cache",
        help="where devFlags.manifests tarballs are downloaded and extracted",
    )
    parser.add_argument("--metrics-port", type=int, default=8383)
    parser.add_argument("--metrics-address", default="0.0.0.0")
    parser.add_argument(
        "--cluster-name",
        default="",
        help="name of the managed cluster; every sealed payload must be bound to it",
    )
    parser.add_argument(
        "--seal-verify-key",
        default="",
        help="comma-separated base64 Ed25519 keys of the manager; sealed payloads must be "
        "signed by one of them (the AddOnTemplate passes {{SEAL_VERIFY_KEY}}, which the manager "
        "keeps in the add-on's AddOnDeploymentConfig)",
    )
    parser.add_argument(
        "--resync-seconds",
        type=float,
        default=60.0,
        help="interval of the full reconcile that repairs drift",
    )
    parser.add_argument("--lease-seconds", type=float, default=10.0, help="Lease renewal interval")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument(
        "--target-namespaces",
        default=None,
        help="namespace policy, as the manager's flag: 'hub=spoke1,spoke2;hub2=spoke3' "
        "('*' as a key: every other hub namespace; as a target: any namespace); empty: each "
        "hub namespace may target the namespace of its own name. Used only while the "
        "manager's ConfigMap model-serving-namespace-policy is not in the agent's namespace "
        "(not given: until it is, what names a spoke namespace waits for it). Out-of-policy "
        "namespaces are refused (NamespaceNotAllowed)",
    )
    parser.add_argument(
        "--allow-dev-flags", nargs="?", const="true", default="false",
        help="accept ServingPlatforms with devFlags (images, manifests): 'true' or 'false' "
        "(the chart passes manager.policy.allowDevFlags, variable ALLOW_DEV_FLAGS); refused "
        "otherwise (DevFlagsNotAllowed), whatever the hub sent",
    )
    args = parser.parse_args(list(argv))
    if args.allow_dev_flags.strip().lower() not in ("true", "false", ""):
        parser.error(f"--allow-dev-flags: 'true' or 'false', not {args.allow_dev_flags!r}")
    try:
        verify_keys = sealing.parse_verify_keys(args.seal_verify_key)
    except sealing.SealError as err:
        parser.error(f"--seal-verify-key: {err}")
    try:
        targets = (None if args.target_namespaces is None
                   else tenancy.parse(args.target_namespaces))
    except ValueError as err:
        parser.error(str(err))
    webhook_url = env.get(DEV_EXTERNAL_WEBHOOK_URL) or None
    webhook_ca_file = env.get(DEV_EXTERNAL_WEBHOOK_CA_FILE) or None
    if (webhook_url is None) != (webhook_ca_file is None):
        parser.error(f"{DEV_EXTERNAL_WEBHOOK_URL} and {DEV_EXTERNAL_WEBHOOK_CA_FILE} go together")
    return AgentConfig(
        kubeconfig=args.kubeconfig,
        namespace=args.namespace or default_namespace(env),
        state_namespace=args.state_namespace,
        bundle_dir=args.bundle_dir,
        cache_dir=args.cache_dir,
        metrics_port=args.metrics_port,
        metrics_address=args.metrics_address,
        cluster_name=args.cluster_name,
        resync_seconds=args.resync_seconds,
        lease_seconds=args.lease_seconds,
        log_level=args.log_level.upper(),
        seal_verify_keys=verify_keys,
        target_namespaces=targets,
        allow_dev_flags=args.allow_dev_flags.strip().lower() == "true",
        external_webhook_url=webhook_url,
        external_webhook_ca=Path(webhook_ca_file).read_bytes() if webhook_ca_file else None,
    )


def main(argv: Sequence[str]) -> int:
    """Run the agent until interrupted."""
    config = parse(argv)
    logging.basicConfig(
        level=config.log_level,
        format=f"%(asctime)s %(levelname)s [{config.cluster_name or 'agent'}] %(name)s %(message)s",
    )
    start_http_server(config.metrics_port, addr=config.metrics_address)
    metrics.start()
    registry = kopf.OperatorRegistry()
    register(Agent(config), registry)
    try:
        kopf.run(registry=registry, standalone=True, clusterwide=True)
    finally:
        lease.stop()
    return 0
