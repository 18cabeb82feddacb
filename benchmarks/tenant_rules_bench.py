#!/usr/bin/env python3
"""Cost of the tenant rules (DRA012-DRA014) in an audit, as a ratio against the rest of the pack.

Method: the 10,000-object manifest set of ``audit_bench.py`` (GPU templates and Deployments,
Services, ConfigMaps, web Deployments) is loaded once; the pack without DRA012-DRA014 and the full
pack run alternately in one process, CPU time (``time.process_time``) per run, median of
``--repeat``. Twice: as written (no ResourceQuota: the quota index stays empty), and with a
ResourceQuota on GPU devices in every namespace (every workload's usage is counted).

    python benchmarks/tenant_rules_bench.py [--objects 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import audit_bench

from dra_constructs.guardrails import RULES, Manifest, audit, load_paths

TENANT_RULES = ("DRA012", "DRA013", "DRA014")


def _quota(namespace: str) -> Manifest:
    return Manifest({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu", "namespace": namespace},
                     "spec": {"hard": {"mig.nvidia.com.deviceclass.resource.k8s.io/devices": "1000",
                                       "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "1000"}}})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    base = tuple(r for r in RULES if r.id not in TENANT_RULES)
    with tempfile.TemporaryDirectory() as tmp:
        audit_bench.write_manifests(Path(tmp), args.objects, False)
        manifests = load_paths([tmp])
    quotas = [_quota(ns) for ns in sorted({m.namespace for m in manifests if m.namespace})]
    for label, objects in (("no quotas", manifests), (f"{len(quotas)} quotas", manifests + quotas)):
        times: dict[str, list[float]] = {"base": [], "all": []}
        for _ in range(args.repeat):
            for name, rules in (("base", base), ("all", RULES)):
                start = time.process_time()
                audit(objects, rules=rules)
                times[name].append(time.process_time() - start)
        without, with_ = statistics.median(times["base"]), statistics.median(times["all"])
        print(f"{label}: {len(objects)} objects, rules without DRA012-014 {without:.3f} s CPU, with {with_:.3f} s "
              f"CPU, ratio {with_ / without:.2f} (median of {args.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
