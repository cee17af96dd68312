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
from dataclasses import dataclass, field
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


@dataclass
class Comparison:
    """Latencies of several ways to the same model, measured in alternating rounds."""

    got: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    p50s: dict[str, list[float]] = field(default_factory=dict)
    """Each round's p50, by way."""

    def run(self, ways: dict[str, tuple[str, str]], requests: int, concurrency: int,
            rounds: int) -> Comparison:
        """``rounds`` rounds of each way (URL, Host), in alternating order; one line each."""
        for way in ways:
            self.got.setdefault(way, [])
            self.errors.setdefault(way, 0)
            self.p50s.setdefault(way, [])
        for r in range(rounds):
            for way in (list(ways) if r % 2 == 0 else list(reversed(ways))):
                lat, err = asyncio.run(load(*ways[way], requests, concurrency))
                self.got[way] += lat
                self.errors[way] += err
                self.p50s[way].append(quantile(lat, 0.5))
                print(f"round {r + 1} {way:8s} p50 {quantile(lat, 0.5) * 1000:6.2f} ms  "
                      f"p99 {quantile(lat, 0.99) * 1000:6.2f} ms  errors {err}", flush=True)
        return self

    def summary(self, title: str, over: str, under: str) -> None:
        """Print each way's p50, p99 and errors, then the p50 ratio ``over``/``under``."""
        print(f"\n{title}:")
        for way in self.got:
            print(f"  {way:8s} p50 {quantile(self.got[way], 0.5) * 1000:6.2f} ms  "
                  f"p99 {quantile(self.got[way], 0.99) * 1000:6.2f} ms  "
                  f"errors {self.errors[way]}")
        ratios = [o / u for o, u in zip(self.p50s[over], self.p50s[under], strict=True)]
        print(f"  {over}/{under} p50 ratio per round: "
              f"{', '.join(f'{x:.2f}' for x in ratios)} (median {statistics.median(ratios):.2f})")


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
        ways = {"direct": (f"http://{pods[0].upstream}{path}", host),
                "ingress": (f"{bed.ingresses[cluster].url}{path}", host)}
        if len(pods) != 1:
            raise SystemExit(f"expected one ready replica on {cluster}, found {len(pods)}")
        Comparison().run(ways, args.requests, args.concurrency, args.rounds).summary(
            f"{args.rounds} rounds x {args.requests} requests at concurrency "
            f"{args.concurrency}, one replica", "ingress", "direct")
        bed.cleanup()


if __name__ == "__main__":
    main()
