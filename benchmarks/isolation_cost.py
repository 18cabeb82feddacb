#!/usr/bin/env python3
"""What ``exclusive-gpu`` MIG isolation costs in packing, on the catalog's 8-GPU nodes, placed by ``fit``'s allocator.

For each model (A100 80GB, H100 80GB, H200 141GB) and each of its static MIG profiles (the catalog's
node with every GPU partitioned into that profile), plus DynamicMIG nodes (every placement
published, the allocator choosing placements against the shared counters), N tenants each ask for
k single-slice claims of the profile, arriving round-robin. ``dra_constructs.fit.isolation.pack``
allocates each claim with fit's allocator and, for ``exclusive-gpu``, applies the isolation
taints the sanitizer agent places (``agent/isolation.py``) before the next claim; ``shared`` is
today's cluster (no isolation taints). Reported per case: slices placed (of N x k), GPUs used,
slices per GPU, and tenants served in full.

    python benchmarks/isolation_cost.py [--json FILE] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

MODELS = ("A100_80GB", "H100_80GB", "H200_141GB")
#: (tenants, slices per tenant)
CASES = ((2, 2), (4, 3), (8, 1), (16, 1))
DYNAMIC_CASES = ((4, 3), (8, 1))
DYNAMIC_PROFILES = 2  # the smallest and a half-GPU profile per model (each DynamicMIG case is ~25x a static one)


def _profiles(slices: list[dict[str, Any]]) -> dict[str, str]:
    """Static catalog node -> its profile (read from the devices' ``profile`` attribute)."""
    found: dict[str, str] = {}
    for s in slices:
        for device in s["spec"].get("devices") or []:
            profile = (device.get("attributes") or {}).get("profile", {}).get("string")
            if profile:
                found.setdefault(s["spec"]["pool"]["name"], profile)
    return found


def run(quick: bool) -> list[dict[str, Any]]:
    from dra_constructs.catalog import catalog_resource_slices
    from dra_constructs.fit.isolation import pack
    from dra_constructs.target import Target

    target = Target.parse("1.37")  # device taints GA: DeviceTaintRule served, the allocator honours taints
    rows: list[dict[str, Any]] = []
    models = MODELS[1:2] if quick else MODELS
    for model in models:
        static = catalog_resource_slices([model], gpus_per_node=8)
        dynamic = catalog_resource_slices([model], gpus_per_node=8, mig_mode="dynamic", split_counter_sets=True)
        dynamic_node = dynamic[0]["spec"]["pool"]["name"]
        profiles = _profiles(static)
        by_size = sorted(set(profiles.values()), key=lambda p: (int(p.split("g.")[0]), p))
        plan = [("static", node, profile, CASES) for node, profile in sorted(profiles.items(), key=lambda x: x[1])]
        dyn_profiles = [by_size[0], next(p for p in by_size if p.startswith("3g."))]
        plan += [("dynamic", dynamic_node, p, DYNAMIC_CASES) for p in dyn_profiles[:DYNAMIC_PROFILES]]
        for mode, node, profile, cases in plan:
            slices = static if mode == "static" else dynamic
            for tenants, per_tenant in cases[:2] if quick else cases:
                start = time.process_time()
                shared = pack(slices, node, profile, tenants, per_tenant, "shared-gpu", target, taints=False)
                exclusive = pack(slices, node, profile, tenants, per_tenant, "exclusive-gpu", target)
                rows.append({
                    "model": model, "mig": mode, "profile": profile, "tenants": tenants, "per_tenant": per_tenant,
                    "requested": shared.requested,
                    "shared": {"placed": shared.placed, "gpus": shared.gpus_used, "served": shared.tenants_served},
                    "exclusive": {"placed": exclusive.placed, "gpus": exclusive.gpus_used,
                                  "served": exclusive.tenants_served},
                    "cpu_seconds": round(time.process_time() - start, 3),
                })
                print(_line(rows[-1]), flush=True)
    return rows


def _line(row: dict[str, Any]) -> str:
    s, e = row["shared"], row["exclusive"]
    return (f"| {row['model']} | {row['mig']} | {row['profile']} | {row['tenants']} x {row['per_tenant']} | "
            f"{s['placed']} / {s['gpus']} / {s['served']} | {e['placed']} / {e['gpus']} / {e['served']} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--quick", action="store_true", help="H100 only, two cases per profile")
    args = parser.parse_args()
    print("| model | MIG | profile | tenants x slices | shared: placed / GPUs / served | "
          "exclusive-gpu: placed / GPUs / served |")
    print("|---|---|---|---|---|---|")
    rows = run(args.quick)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
