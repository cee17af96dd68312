"""The ManifestWork informer alone: initial sync time and memory for N works.

``python -m bench.informers --works 3000,30000 [--repeat 3] [--page-size 500,100]``

One testbed hub; ``works / 10`` cluster namespaces, each with 10 works of 10
MultiClusterInferenceServices (the body ``addon_manager.kinds.render`` produces, about 2.5 KB) and
the status OCM's work agent would write (Applied/Available, per-manifest conditions and the
feedback values ready, url, activeModelState). They are created by a tight asyncio client
(32 requests in flight, admin identity): POST each work, then its status. Works of no owner
(no add-on label, ``--foreign`` per namespace) sit next to them; the label selector keeps
them out.

For each N (ascending; the works grow), a fresh process (``--child``) runs
:class:`addon_manager.shell.informers.WorkInformer` with the manager's identity (the chart's
ServiceAccount) until it is synced, and reports: the seconds from the first list request
until the store holds every work, its RSS before and after, its peak RSS (``VmHWM``), and
the seconds a relist of the unchanged works takes (what a 410 costs). The sync is split
into the time spent in ``HubSource.list_page`` (HTTP and JSON decoding) and the rest
(``parse_work`` and the store). The reference ("bare list") is the same paged list by the
same identity in the same process just before, its bodies read but not decoded: what the
API server and the transfer cost.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import ssl
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
from kubernetes import client, config

from bench.common import ISVC_META, hub, inference_service, log, memory_mib, rendered, table
from testbed import identities

INTENTS = 10
WORKS_URL = "/apis/work.open-cluster-management.io/v1/namespaces/{ns}/manifestworks"
CONCURRENCY = 32


# ---------------------------------------------------------------------------- writing works
def _templates() -> list[bytes]:
    """The 10 works of one cluster, as JSON with the placeholder namespace ``@NS@``."""
    out = []
    for i in range(INTENTS):
        body = rendered(inference_service(f"iris-{i}", "fleet"), "@NS@")
        out.append(json.dumps(body).encode())
    return out


def _status(cluster: str, intent: str) -> bytes:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conds = [{"type": t, "status": "True", "reason": f"{t}Complete", "message": "reported",
              "lastTransitionTime": now, "observedGeneration": 1}
             for t in ("Applied", "Available")]
    values = [
        {"name": "ready", "fieldValue": {"type": "String", "string": "True"}},
        {"name": "url", "fieldValue": {"type": "String",
                                       "string": f"http://{intent}-models.{cluster}.example"}},
        {"name": "activeModelState", "fieldValue": {"type": "String", "string": "Loaded"}},
    ]
    return json.dumps({"status": {"conditions": conds, "resourceStatus": {"manifests": [{
        "resourceMeta": {"ordinal": 0, **ISVC_META, "name": intent},
        "statusFeedback": {"values": values}, "conditions": conds,
    }]}}}).encode()


class Writer:
    """A tight asyncio client (admin) for namespaces and works."""

    def __init__(self, kubeconfig: Path) -> None:
        cfg = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig), client_configuration=cfg)
        self.host = str(cfg.host)
        ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
        if cfg.cert_file:
            ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
        self.ssl = ctx
        token = cfg.get_api_key_with_prefix("authorization")
        self.headers = {"Authorization": token} if token else {}

    async def _run(self, jobs: list[Callable[[aiohttp.ClientSession], Awaitable[None]]]) -> None:
        queue: asyncio.Queue[Callable[[aiohttp.ClientSession], Awaitable[None]]] = (
            asyncio.Queue())
        for job in jobs:
            queue.put_nowait(job)
        connector = aiohttp.TCPConnector(ssl=self.ssl, limit=CONCURRENCY)
        async with aiohttp.ClientSession(connector=connector, headers=self.headers) as session:
            async def worker() -> None:
                while not queue.empty():
                    await queue.get_nowait()(session)

            await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))

    async def _send(self, session: aiohttp.ClientSession, method: str, path: str, data: bytes,
                    content_type: str = "application/json", ok: tuple[int, ...] = (200, 201)
                    ) -> None:
        for attempt in range(8):
            async with session.request(method, self.host + path, data=data,
                                       headers={"Content-Type": content_type}) as resp:
                if resp.status in ok:
                    return
                text = await resp.text()
                if resp.status not in (429, 500, 503, 504) or attempt == 7:
                    raise RuntimeError(f"{method} {path}: HTTP {resp.status} {text[:300]}")
            await asyncio.sleep(0.2 * 2 ** attempt)

    def namespaces(self, names: list[str]) -> None:
        """Create these namespaces."""
        def job(name: str) -> Callable[[aiohttp.ClientSession], Awaitable[None]]:
            body = json.dumps({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": name}}).encode()
            return lambda s: self._send(s, "POST", "/api/v1/namespaces", body,
                                        ok=(200, 201, 409))
        asyncio.run(self._run([job(n) for n in names]))

    def works(self, clusters: list[str], templates: list[bytes], foreign: int) -> None:
        """Create the 10 works (and their status) and ``foreign`` unlabelled works on each."""
        def job(cluster: str, template: bytes
                ) -> Callable[[aiohttp.ClientSession], Awaitable[None]]:
            body = template.replace(b"@NS@", cluster.encode())
            name = json.loads(body)["metadata"]["name"]
            intent = json.loads(body)["metadata"]["labels"][
                "modelserving.opendatahub.io/intent-name"]
            path = WORKS_URL.format(ns=cluster)

            async def run(s: aiohttp.ClientSession) -> None:
                await self._send(s, "POST", path, body, ok=(200, 201, 409))
                await self._send(s, "PATCH", f"{path}/{name}/status", _status(cluster, intent),
                                 "application/merge-patch+json")
            return run

        def foreign_job(cluster: str, i: int
                        ) -> Callable[[aiohttp.ClientSession], Awaitable[None]]:
            body = json.loads(templates[0].replace(b"@NS@", cluster.encode()))
            body["metadata"] = {"name": f"other-addon-{i}", "namespace": cluster,
                                "labels": {"app.kubernetes.io/managed-by": "other-addon"}}
            data = json.dumps(body).encode()
            return lambda s: self._send(s, "POST", WORKS_URL.format(ns=cluster), data,
                                        ok=(200, 201, 409))

        jobs = [job(cl, t) for cl in clusters for t in templates]
        jobs += [foreign_job(cl, i) for cl in clusters for i in range(foreign)]
        asyncio.run(self._run(jobs))


# ---------------------------------------------------------------------------- the informer
def child(kubeconfig: str, expect: int, page_size: int) -> None:
    """Sync an informer as the manager; print one JSON line of what it took."""
    from addon_manager.shell import informers

    cfg = client.Configuration()
    config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=kubeconfig, client_configuration=cfg)
    gc.collect()
    base = memory_mib(os.getpid(), "VmRSS")

    async def bare_list() -> float:
        """The reference: the same pages as the same identity, bodies read, not decoded."""
        source = informers.HubSource(cfg)
        cont, start = "", time.monotonic()
        while True:
            params = {"labelSelector": informers.SELECTOR, "limit": str(page_size)}
            if cont:
                params["continue"] = cont
            async with source.http.session().get(source.http.base + source.path, params=params,
                                                 **source.http.options()) as resp:
                data = await resp.read()
            found = re.search(rb'"continue":"([^"]+)"', data[data.rindex(b'"metadata"'):])
            cont = found[1].decode() if found else ""
            if not cont:
                break
        await source.close()
        return time.monotonic() - start

    async def run() -> dict[str, float]:
        floor = await bare_list()
        informer = informers.informer_for(cfg, page_size=page_size)
        fetch = 0.0
        list_page = informer.source.list_page

        async def timed(cont: str, limit: int) -> informers.Page:
            nonlocal fetch
            began = time.monotonic()
            try:
                return await list_page(cont, limit)
            finally:
                fetch += time.monotonic() - began

        informer.source.list_page = timed  # type: ignore[method-assign]
        start = time.monotonic()
        task = await informers.run_until_synced(informer, 1800)
        synced = time.monotonic() - start
        fetched = fetch
        task.cancel()
        size = len(informer.store)
        if size != expect:
            raise RuntimeError(f"store holds {size} works, expected {expect}")
        rss = memory_mib(os.getpid(), "VmRSS")
        start = time.monotonic()
        await informer.relist()
        relist = time.monotonic() - start
        await informer.source.close()  # type: ignore[attr-defined]
        return {"works": size, "sync_s": synced, "fetch_s": fetched, "bare_list_s": floor,
                "relist_s": relist, "base_mib": base,
                "rss_mib": rss, "peak_mib": memory_mib(os.getpid()),
                "after_relist_mib": memory_mib(os.getpid(), "VmRSS")}

    print(json.dumps(asyncio.run(run())), flush=True)


def measure_once(kubeconfig: Path, expect: int, page_size: int) -> dict[str, float]:
    """One informer process to sync; its report."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.informers", "--child", str(kubeconfig),
         "--expect", str(expect), "--page-size", str(page_size)],
        capture_output=True, text=True, check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"informer process failed:\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--works", default="3000", help="comma-separated sizes")
    parser.add_argument("--repeat", type=int, default=3, help="informer runs per size")
    parser.add_argument("--foreign", type=int, default=1,
                        help="works of another owner per cluster namespace")
    parser.add_argument("--page-size", default="500",
                        help="list page size (comma-separated: each is measured)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--expect", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.expect, int(args.page_size))
        return
    sizes = sorted(int(n) for n in args.works.split(",") if n.strip())
    rows = []
    with hub() as tb:
        writer = Writer(tb.hub.kubeconfig)
        manager = identities.manager_kubeconfig(tb.hub)
        templates = _templates()
        clusters: list[str] = []
        for n in sizes:
            want = [f"w-{i:05d}" for i in range(n // INTENTS)]
            new = want[len(clusters):]
            start = time.monotonic()
            writer.namespaces(new)
            made_ns = time.monotonic() - start
            writer.works(new, templates, args.foreign)
            made = time.monotonic() - start - made_ns
            clusters = want
            log(f"{len(new)} namespaces in {made_ns:.1f}s, {len(new) * INTENTS} works with "
                f"status + {len(new) * args.foreign} foreign in {made:.1f}s "
                f"({len(new) * (INTENTS + args.foreign) / max(made, 1e-9):.0f} works/s)")
            runs = [(int(p), r) for p in args.page_size.split(",") for r in range(args.repeat)]
            for page, r in runs:
                got = measure_once(manager, len(clusters) * INTENTS, page)
                log(f"N={got['works']:.0f} run {r + 1}: {json.dumps(got)}")
                grown = got["rss_mib"] - got["base_mib"]
                rows.append([
                    f"{got['works']:,.0f}", f"{len(clusters) * args.foreign:,}",
                    f"{len(clusters):,}", str(page), str(r + 1), f"{got['bare_list_s']:.2f}",
                    f"{got['sync_s']:.2f}", f"{got['fetch_s']:.2f}",
                    f"{got['sync_s'] - got['fetch_s']:.2f}",
                    f"{got['sync_s'] / got['bare_list_s']:.1f}",
                    f"{got['works'] / got['sync_s']:,.0f}", f"{got['relist_s']:.2f}",
                    f"{got['base_mib']:.0f}", f"{got['rss_mib']:.0f}", f"{got['peak_mib']:.0f}",
                    f"{grown:.1f}", f"{1024 * grown / got['works']:.2f}",
                ])
    print("\n" + table(
        ["works", "foreign works", "namespaces", "page", "run", "bare list s", "sync s",
         "of which HTTP + JSON s", "of which parse + store s", "sync / bare list", "works/s",
         "relist s",
         "base RSS MiB", "RSS MiB", "peak RSS MiB", "store MiB", "KiB per work"],
        rows,
    ), flush=True)


if __name__ == "__main__":
    main()
