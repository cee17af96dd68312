"""What a spoke's ingress adds to a prediction: the same requests through the ingress and
straight to the model server's process, alternating, in one process.

``python -m bench.ingress --requests 2000 --concurrency 8 --rounds 5``

A fleet of one spoke with its data plane (``Testbed(dataplane=True)``) serves the demo's iris
model (KServe's sklearn server, its model downloaded from the fleet's S3 by KServe's storage
initializer). Each round sends ``--requests`` V1 predictions at ``--concurrency`` in flight,
once to the server's own port and once through the spoke's ingress (Caddy, routing by the
model's URL host), in alternating order; every answer is checked against the model's known
one. Latencies are per request, wall clock from send to the last byte.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from testbed import demo
from testbed.support.dataplane import IRIS, IRIS_CLASSES

NAME = "sklearn-iris"


async def load(url: str, host: str, requests: int, concurrency: int) -> tuple[list[float], int]:
    """``requests`` POSTs to ``url`` (Host ``host``), ``concurrency`` at once: latencies, errors."""
    body = json.dumps({"instances": IRIS}).encode()
    want = {"predictions": IRIS_CLASSES}
    latencies: list[float] = []
    errors = 0
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(requests):
        queue.put_nowait(i)

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal errors
        while not queue.empty():
            queue.get_nowait()
            started = time.perf_counter()
            try:
                async with session.post(url, data=body, headers={
                        "Host": host, "Content-Type": "application/json"}) as response:
                    answer = await response.json(content_type=None)
                    ok = response.status == 200 and answer == want
            except (aiohttp.ClientError, ValueError):
                ok = False
            latencies.append(time.perf_counter() - started)
            errors += 0 if ok else 1

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return latencies, errors


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    """Run the bench and print one line per round and the summary."""
    ap = argparse.ArgumentParser(prog="python -m bench.ingress")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    phases = demo.Phases()
    with demo.fleet(phases, spokes=1, dataplane=True) as bed:
        demo.apply_examples(bed.hub, bed)
        if not demo.watch_until_ready(bed, phases, say=lambda _t: None):
            raise SystemExit("the model did not become Ready")
        demo.predictions(bed)  # the route is in place
        cluster = bed.spokes[0].name
        entry: dict[str, Any] = next(
            e for e in json.loads(bed.hub.kubectl(
                "get", "mcisvc", NAME, "-n", demo.NAMESPACE, "-o", "json").stdout
            )["status"]["clusters"] if e["cluster"] == cluster)
        host = str(urlsplit(entry["url"]).hostname)
        pods = [p for p in bed.dataplanes[cluster].pods_of("models", NAME) if p.ready]
        path = f"/v1/models/{NAME}:predict"
        ways = {"direct": f"http://{pods[0].upstream}{path}",
                "ingress": f"{bed.ingresses[cluster].url}{path}"}
        if len(pods) != 1:
            raise SystemExit(f"expected one ready replica on {cluster}, found {len(pods)}")
        got: dict[str, list[float]] = {w: [] for w in ways}
        errors = dict.fromkeys(ways, 0)
        p50s: dict[str, list[float]] = {w: [] for w in ways}
        for r in range(args.rounds):
            order = list(ways) if r % 2 == 0 else list(reversed(ways))
            for way in order:
                lat, err = asyncio.run(load(ways[way], host, args.requests, args.concurrency))
                got[way] += lat
                errors[way] += err
                p50s[way].append(quantile(lat, 0.5))
                print(f"round {r + 1} {way:8s} p50 {quantile(lat, 0.5) * 1000:6.2f} ms  "
                      f"p99 {quantile(lat, 0.99) * 1000:6.2f} ms  errors {err}", flush=True)
        print(f"\n{args.rounds} rounds x {args.requests} requests at concurrency "
              f"{args.concurrency}, one replica:")
        for way in ways:
            print(f"  {way:8s} p50 {quantile(got[way], 0.5) * 1000:6.2f} ms  "
                  f"p99 {quantile(got[way], 0.99) * 1000:6.2f} ms  errors {errors[way]}")
        ratios = [i / d for i, d in zip(p50s["ingress"], p50s["direct"], strict=True)]
        print(f"  ingress/direct p50 ratio per round: "
              f"{', '.join(f'{x:.2f}' for x in ratios)} (median {statistics.median(ratios):.2f})")
        bed.cleanup()


if __name__ == "__main__":
    main()
