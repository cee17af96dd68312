"""The fleet endpoint (issue 34): what it adds to a prediction, and what a failover costs.

``python -m bench.endpoint --requests 1000 --concurrency 8 --rounds 5 --failovers 3``

The demo's fleet with its data plane (two spokes, KServe's sklearn server answering the iris
model through each spoke's ingress), and ``model-serving-addon endpoint serve`` (HAProxy, as a
fleet viewer) in front of the two ingresses.

Latency: each round sends ``--requests`` V1 predictions at ``--concurrency`` once straight to
cluster1's ingress (the model's host) and once through the fleet endpoint with the model's
endpoint Failover on cluster1 (so both reach the same server), in alternating order; every
answer is checked. The ratio is endpoint p50 over ingress p50, per round.

Failover: ``--failovers`` times, with 20 predictions/s running through the endpoint, cluster1's
model process is killed: the failed requests, the window they fall in, and the time from the
last answer from cluster1 to the first from cluster2; then the run waits until the hub has
cluster1 back and the traffic is on it again.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.ingress import Comparison
from testbed import demo
from testbed.support import endpoint as support
from testbed.support import haproxy
from testbed.support.waiting import on_fleet

NAME = "sklearn-iris"
NS = demo.NAMESPACE


def serving_set(bed: Any) -> dict[str, Any]:
    """The model's status.endpoint on the hub."""
    out = json.loads(bed.hub.kubectl("get", "mcisvc", NAME, "-n", NS, "-o", "json").stdout)
    return dict((out.get("status") or {}).get("endpoint") or {})


def members(bed: Any) -> list[str]:
    """The serving set's members, in order."""
    return [m["cluster"] for m in serving_set(bed).get("members", []) if m.get("weight")]


def main() -> None:
    """Run the bench and print one line per round and failover, then the summary."""
    ap = argparse.ArgumentParser(prog="python -m bench.endpoint")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--failovers", type=int, default=3)
    args = ap.parse_args()
    phases = demo.Phases()
    with demo.fleet(phases, dataplane=True) as bed, tempfile.TemporaryDirectory() as tmp:
        step = demo.start_kserve_when_stack_ready(bed)
        demo.apply_examples(bed.hub, bed)
        if not demo.watch_until_ready(bed, phases, say=lambda _t: None):
            raise SystemExit("the model did not become Ready")
        demo.predictions(bed)  # the routes are in place
        bed.hub.kubectl("patch", "mcisvc", NAME, "-n", NS, "--type=merge", "-p", json.dumps(
            {"spec": {"endpoint": {"policy": "Failover", "priority": ["cluster1", "cluster2"]}}}))
        via = {cl: bed.ingresses[cl].url for cl in ("cluster1", "cluster2")}
        with support.router(bed.hub, haproxy.binary(), via, Path(tmp)) as router:
            on_fleet(bed, step, lambda: members(bed) == ["cluster1"], timeout=120)
            on_fleet(bed, step, lambda: support.predict(router.listen, NAME, NS) == (
                200, "cluster1"), timeout=60)
            entry = next(e for e in json.loads(bed.hub.kubectl(
                "get", "mcisvc", NAME, "-n", NS, "-o", "json").stdout)["status"]["clusters"]
                if e["cluster"] == "cluster1")
            host = str(urlsplit(entry["url"]).hostname)
            path = f"/v1/models/{NAME}:predict"
            ways = {"ingress": (f"{via['cluster1']}{path}", host),
                    "endpoint": (f"http://{router.listen}{path}", f"{NAME}.{NS}.fleet.local")}
            compared = Comparison().run(ways, args.requests, args.concurrency, args.rounds)
            costs: list[support.Failover] = []
            for n in range(args.failovers):
                traffic = support.Load(router.listen, NAME, NS).start()
                on_fleet(bed, step, lambda t=traffic: t.answered_by("cluster1", 0) >= 40,
                         timeout=60)
                (pod,) = [p for p in bed.dataplanes["cluster1"].pods_of("models", NAME)
                          if p.ready]
                killed = time.monotonic()
                bed.dataplanes["cluster1"].kill("models", pod.name, sig=signal.SIGKILL)
                on_fleet(bed, step, lambda: members(bed) == ["cluster2"], timeout=120)
                dropped = time.monotonic() - killed
                on_fleet(bed, step, lambda: members(bed) == ["cluster1"], timeout=240)
                back = time.monotonic()
                on_fleet(bed, step, lambda t=traffic, b=back: t.answered_by("cluster1", b) >= 20,
                         timeout=60)
                cost = support.failover(traffic.stop(), killed, "cluster1", "cluster2")
                costs.append(cost)
                print(f"failover {n + 1}: {cost.text()}; the hub dropped cluster1 after "
                      f"{dropped:.1f}s, had it back after {back - killed:.1f}s", flush=True)
        compared.summary(f"{args.rounds} rounds x {args.requests} requests at concurrency "
                         f"{args.concurrency}, one replica behind cluster1's ingress",
                         "endpoint", "ingress")
        if costs:
            print(f"{len(costs)} failovers at 20 requests/s: median failover "
                  f"{statistics.median(c.seconds for c in costs):.2f}s, median failed requests "
                  f"{statistics.median(c.failed for c in costs):g}, median window "
                  f"{statistics.median(c.window for c in costs):.2f}s")
        bed.cleanup()


if __name__ == "__main__":
    main()
