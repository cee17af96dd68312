"""What a read of KServe's InferenceService CRD costs the API server, by how it is asked.

``python -m bench.crd_reads --reads 200 --rounds 3``

A testbed hub (no spokes) with the CRDs of the KServe bundle the agent carries. Each round
reads the InferenceService CRD (about a megabyte) ``--reads`` times in each of three ways,
in turn, through one client: the agent's consistent read before 2026-12-07 (a metadata GET,
no resourceVersion: the API server reads the object from etcd), the agent's consistent read
since (:meth:`addon_agent.io.kube.Kube.latest_metadata`: a metadata LIST of that one name,
which a 1.31+ API server answers from its watch cache once it caught up with etcd), and the
cached read the agent uses for polling (a metadata GET at resourceVersion 0, the reference:
the watch cache alone). For each: the API server's CPU per read (its ``/proc`` user and
system time) and the client's wall time per read, medians of the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from addon_agent.bundle_render import BUNDLE_FILE, bundle_path
from addon_agent.io.kube import PARTIAL_METADATA, PARTIAL_METADATA_LIST, Kube
from addon_agent.stacks import KSERVE
from testbed import documents
from testbed.fleet import Testbed
from testbed.support import agent as agent_support

CRD = "inferenceservices.serving.kserve.io"
CRD_API, CRD_KIND = "apiextensions.k8s.io/v1", "CustomResourceDefinition"


def _cpu_seconds(pid: int) -> float:
    """User and system CPU-seconds of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


def _ways(kube: Kube) -> dict[str, Callable[[], Any]]:
    res = kube.resource(CRD_API, CRD_KIND)
    return {
        "metadata GET, consistent (before)": lambda: res.get(
            name=CRD, header_params={"Accept": PARTIAL_METADATA}, _preload_content=False),
        "metadata LIST of the name, consistent (now)": lambda: res.get(
            field_selector=f"metadata.name={CRD}",
            header_params={"Accept": PARTIAL_METADATA_LIST}, _preload_content=False),
        "metadata GET at resourceVersion 0 (watch cache)": lambda: res.get(
            name=CRD, resource_version="0", header_params={"Accept": PARTIAL_METADATA},
            _preload_content=False),
    }


def main() -> None:
    """Run the rounds and print a Markdown table."""
    parser = argparse.ArgumentParser(prog="python -m bench.crd_reads", description=__doc__)
    parser.add_argument("--reads", type=int, default=200, help="reads per way and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    bundle = bundle_path(agent_support.rendered_bundles(), KSERVE) / BUNDLE_FILE
    crds = [d for d in documents.load_file(bundle) if d and d.get("kind") == CRD_KIND]
    bed = Testbed(spokes=0)
    try:
        bed.start()
        bed.hub.apply_objects(crds)
        bed.hub.wait_crds_established()
        kube = Kube(bed.hub.api_client())
        assert kube.lists_from_cache(), "the testbed's API server should list from its cache"
        pid = bed.hub.processes["kube-apiserver"].pid
        assert pid is not None
        ways = _ways(kube)
        cpu: dict[str, list[float]] = {w: [] for w in ways}
        wall: dict[str, list[float]] = {w: [] for w in ways}
        time.sleep(5)  # the CRDs' own status writes settle
        for _ in range(args.rounds):
            for way, read in ways.items():
                c0, t0 = _cpu_seconds(pid), time.monotonic()
                for _ in range(args.reads):
                    read()
                cpu[way].append((_cpu_seconds(pid) - c0) / args.reads * 1000)
                wall[way].append((time.monotonic() - t0) / args.reads * 1000)
    finally:
        bed.cleanup()
    print(f"\n{args.reads} reads of {CRD} a way, {args.rounds} rounds (medians):\n")
    print("| way | API server CPU per read (ms) | wall per read (ms) |")
    print("|---|---|---|")
    for way in ways:
        print(f"| {way} | {statistics.median(cpu[way]):.1f} | "
              f"{statistics.median(wall[way]):.1f} |")


if __name__ == "__main__":
    main()
