"""``model-serving-addon console``: serve the fleet console (the command line's parsing).

Run by one person, with their kubeconfig: ``model-serving-addon console`` (listens on
localhost). Run for many behind an authenticating proxy: ``model-serving-addon console
--proxy --listen 0.0.0.0:8080`` in a pod (the hub's address and CA are the pod's), each
request carrying its user's token.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from addon_cli.console import credentials, server


def parser() -> argparse.ArgumentParser:
    """The console's arguments."""
    p = argparse.ArgumentParser(prog="model-serving-addon console", description=(
        "Serve the fleet console: the hub's intents and clusters in a web page, read and "
        "written with each user's own hub access."))
    p.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT",
                   help="address to serve on (with a kubeconfig: a loopback address only)")
    p.add_argument("--kubeconfig", default=None,
                   help="serve as yourself: the hub and your credentials from this kubeconfig "
                        "(default: KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", default=None, help="the kubeconfig context to use")
    p.add_argument("--proxy", action="store_true",
                   help="serve many users behind an authenticating proxy: each request's own "
                        "token (X-Forwarded-Access-Token or Authorization: Bearer), never a "
                        "kubeconfig's")
    p.add_argument("--hub-server", default=None,
                   help="with --proxy: the hub API server's URL (default: the pod's cluster)")
    p.add_argument("--hub-ca", default=None, help="with --proxy: the hub API server's CA file")
    p.add_argument("--static", default=str(server.STATIC), help=argparse.SUPPRESS)
    return p


def main(argv: Sequence[str]) -> int:
    """Serve until interrupted; 2 on bad arguments."""
    args = parser().parse_args(list(argv))
    host, _, port_text = args.listen.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_text)
        if args.proxy:
            source = credentials.behind_proxy(args.hub_server, args.hub_ca)
        else:
            if args.hub_server or args.hub_ca:
                raise credentials.CredentialsError("--hub-server and --hub-ca go with --proxy")
            if not ipaddress.ip_address(host or "127.0.0.1").is_loopback:
                raise credentials.CredentialsError(
                    f"--listen {args.listen}: a console run with your kubeconfig serves only "
                    "you, on a loopback address (use --proxy behind an authenticating proxy "
                    "to serve others)")
            source = credentials.from_kubeconfig(args.kubeconfig, args.context)
    except (ValueError, credentials.CredentialsError) as err:
        print(f"model-serving-addon console: {err}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    mode = "behind a proxy, as each request's user" if args.proxy else "as you"
    print(f"console on http://{args.listen}/ reading the hub at {source.server} {mode}",
          flush=True)
    web.run_app(server.make_app(source, Path(args.static)), host=host or "127.0.0.1",
                port=port, print=None)
    return 0
