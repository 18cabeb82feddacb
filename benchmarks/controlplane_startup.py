#!/usr/bin/env python3
"""Start-up time and memory of the tests' real control plane (tests/controlplane, built by ``make controlplane``).

For each pinned version: ``--repeat`` fresh starts of etcd + kube-apiserver (until ``/readyz``), then
kube-controller-manager (until its serviceaccount controller made ``default/default``) and kube-scheduler;
the median of each step and the resident memory (VmRSS) of each component right after. The goal
(issue 21): a cluster ready in under 10 s once built. Output: a table and JSON.

    python benchmarks/controlplane_startup.py [--repeat 3] [1.37 1.34]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from controlplane.cluster import VERSIONS, start_control_plane


def measure(minor: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        with start_control_plane(minor, Path(tmp)) as plane:
            ready = time.monotonic() - started
            plane.ensure_allocation()
            full = time.monotonic() - started
            rss = plane.rss_bytes()
    return {"apiserver_ready_s": ready, "with_controllers_s": full,
            **{f"rss_{name}_mib": value / 2**20 for name, value in rss.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("versions", nargs="*", default=sorted(VERSIONS, reverse=True))
    args = parser.parse_args()
    results = {}
    for minor in args.versions:
        runs = [measure(minor) for _ in range(args.repeat)]
        results[minor] = {key: round(statistics.median(r[key] for r in runs), 2) for key in runs[0]}
        print(f"{minor}: " + ", ".join(f"{k}={v}" for k, v in results[minor].items()), flush=True)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
