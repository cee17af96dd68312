"""``model-serving-addon endpoint serve``: HAProxy as the fleet's endpoint, kept to the hub.

It lists and watches the hub's MultiClusterInferenceServices (with the caller's kubeconfig:
reading them cluster-wide is the chart's viewer role), renders HAProxy's configuration from
their serving sets (:mod:`addon_cli.endpoint`) and runs HAProxy in master-worker mode,
reloading it through its master socket when the configuration changes. A reload starts a new
worker on the same listening sockets while the old one finishes its connections, so no
connection is dropped; the servers' health (HAProxy's own checks) is saved before and loaded
after, so a server found down stays down.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any, cast

import urllib3
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from addon_api import constants as c
from addon_cli import endpoint
from addon_cli.hub import EXIT_UNREACHABLE, CliError, Hub
from addon_cli.views import KINDS

log = logging.getLogger("model-serving-addon.endpoint")

PLURAL = KINDS[c.KIND_INFERENCE_SERVICE].plural


def command(path: Path, line: str, timeout: float = 5.0) -> str:
    """One command on an HAProxy CLI socket (admin or master); its whole answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(line.encode() + b"\n")
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class Proxy:
    """One HAProxy in master-worker mode, configured from files in ``run_dir``."""

    def __init__(self, haproxy: str, run_dir: Path) -> None:
        self.haproxy, self.run_dir = haproxy, run_dir
        self.config_path = run_dir / "haproxy.cfg"
        self.map_path = run_dir / "hosts.map"
        self.admin, self.master = run_dir / "admin.sock", run_dir / "master.sock"
        self.process: subprocess.Popen[bytes] | None = None
        self.loaded: tuple[str, str] | None = None

    def _check(self, config: Path) -> None:
        done = subprocess.run([self.haproxy, "-c", "-q", "-f", str(config)],
                              capture_output=True, text=True, timeout=60, check=False)
        if done.returncode:
            raise CliError(EXIT_UNREACHABLE, f"HAProxy refused the configuration: "
                           f"{(done.stderr or done.stdout).strip()}")

    def _backends(self) -> set[str] | None:
        try:
            answer = command(self.admin, "show backend")
        except OSError:
            return None
        return {x.strip() for x in answer.splitlines()[1:] if x.strip()}

    def _wait(self, backends: set[str], pid_before: str, timeout: float = 30.0) -> None:
        """Until the worker of the new configuration answers on the admin socket."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise CliError(EXIT_UNREACHABLE,
                               f"HAProxy exited with {self.process.returncode}")
            found = self._backends()
            if found is not None and backends <= found and self._pid() != pid_before:
                return
            time.sleep(0.05)
        raise CliError(EXIT_UNREACHABLE, f"HAProxy did not load its configuration in "
                       f"{timeout:.0f}s")

    def _pid(self) -> str:
        try:
            info = command(self.admin, "show info")
        except OSError:
            return ""
        return next((x.split(":", 1)[1].strip() for x in info.splitlines()
                     if x.startswith("Pid:")), "")

    def load(self, config: str, hosts: str, backends: set[str]) -> bool:
        """Run HAProxy with ``config`` and the map ``hosts``.

        Starts it, or reloads it when they changed; returns whether anything was (re)loaded.
        """
        if self.loaded == (config, hosts) and self.process is not None:
            return False
        self.run_dir.mkdir(parents=True, exist_ok=True)
        candidate = self.run_dir / "haproxy.cfg.next"
        candidate.write_text(config)
        self.map_path.write_text(hosts)
        self._check(candidate)
        candidate.replace(self.config_path)
        pid_before = self._pid()
        if self.process is None or self.process.poll() is not None:
            (self.run_dir / "servers.state").write_text("")  # nothing known yet
            self.process = subprocess.Popen(
                [self.haproxy, "-W", "-db", "-f", str(self.config_path), "-S", str(self.master)],
                stdout=subprocess.DEVNULL, stderr=None)
        else:
            (self.run_dir / "servers.state").write_text(command(self.admin, "show servers state"))
            command(self.master, "reload")
        self._wait(backends, pid_before)
        self.loaded = (config, hosts)
        return True

    def stop(self) -> None:
        """Stop HAProxy (its master and workers)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def _describe(route: endpoint.Route) -> str:
    servers = ", ".join(f"{s.cluster}{' (backup)' if s.backup else f' ({s.weight})'}"
                        for s in route.servers) or "no cluster"
    skipped = "".join(f"; {cl} skipped: {why}" for cl, why in route.skipped)
    return f"{route.fleet_host} -> {servers}{skipped}"


def serve(hub: Hub, proxy: Proxy, via: Mapping[str, str], domain: str, listen: str,
          check_interval_ms: int, stopping: Callable[[], bool]) -> None:
    """Keep ``proxy`` to the hub's serving sets until ``stopping()`` (see the module)."""
    store: dict[tuple[str, str], dict[str, Any]] = {}
    shown: dict[tuple[str, str], str] = {}

    def apply() -> None:
        found = endpoint.routes(store.values(), via, domain)
        config = endpoint.haproxy_config(found, listen, proxy.run_dir, check_interval_ms)
        if proxy.load(config, endpoint.hosts_map(found), {r.backend for r in found}):
            log.info("HAProxy configured: %d model(s) on %s", len(found), listen)
        now = {(r.namespace, r.name): _describe(r) for r in found}
        for key in sorted(set(now) | set(shown)):
            if now.get(key) != shown.get(key):
                log.info("%s/%s: %s", *key, now.get(key, "removed"))
        shown.clear()
        shown.update(now)

    while not stopping():
        try:
            listing = cast(dict[str, Any], hub.custom.list_cluster_custom_object(
                c.GROUP, c.VERSION, PLURAL, _request_timeout=hub.timeout))
            store.clear()
            store.update({_key(o): o for o in listing.get("items") or []})
            apply()
            version = (listing.get("metadata") or {}).get("resourceVersion")
            for event in watch.Watch().stream(  # type: ignore[no-untyped-call]
                    hub.custom.list_cluster_custom_object, c.GROUP, c.VERSION, PLURAL,
                    resource_version=version, timeout_seconds=60):
                obj = event.get("object") or {}
                if event.get("type") == "DELETED":
                    store.pop(_key(obj), None)
                elif event.get("type") in ("ADDED", "MODIFIED"):
                    store[_key(obj)] = obj
                else:
                    continue
                apply()
                if stopping():
                    return
        except ApiException as err:
            if err.status in (401, 403):
                raise CliError(EXIT_UNREACHABLE, f"the hub refused to let you watch {PLURAL}: "
                               f"{err.reason}") from err
            log.warning("watch of %s ended (HTTP %s); listing again", PLURAL, err.status)
            time.sleep(1)
        except (OSError, urllib3.exceptions.HTTPError) as err:
            # The hub is unreachable: HAProxy keeps what it has; try again.
            log.warning("cannot reach the hub: %s; HAProxy keeps its configuration", err)
            time.sleep(2)


def run(hub: Hub, haproxy: str, run_dir: Path, via: Mapping[str, str], domain: str,
        listen: str, check_interval_ms: int) -> int:
    """The command: serve until SIGTERM or SIGINT, then stop HAProxy."""
    stop = {"now": False}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop["now"] = True
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    proxy = Proxy(haproxy, run_dir)
    os.makedirs(run_dir, exist_ok=True)
    try:
        serve(hub, proxy, via, domain, listen, check_interval_ms, lambda: stop["now"])
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
    return 0
