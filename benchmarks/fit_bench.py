#!/usr/bin/env python3
"""``fit`` of 100 claim templates against 64 nodes x 8 DynamicMIG A100 80GB GPUs (every placement).

The inventory is the catalog's DynamicMIG shape for 1.36 (a counter-set slice + one slice per GPU,
26 devices per GPU: the full GPU and all 25 MIG placements), copied to 64 nodes with their own
node names and GPU UUIDs: 13,312 devices, 512 counter sets. The claims are 100
ResourceClaimTemplates cycling through 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb and 4g.40gb, allocated
together as the claims of one Pod (as ``dra-constructs fit`` does); no node can take them (56 MIG
devices at most per node), and every node must prove it.

Measured in one process, median of ``--repeat`` runs, CPU time (``time.process_time``: the
shared machine's load inflates wall time) and wall time:

- ``parse``: ``Inventory.from_slices`` (the slices already loaded from JSON);
- ``fit``: ``fit(...)`` over all 64 nodes (CEL selectors, counters, bound, reasons);
- ``baseline``: what the old check did - CEL-match every template's selectors against every device
  and count matches per node - the same selector work without allocation, as a ratio reference;
- ``cli``: ``dra-constructs fit --format json`` end to end in a fresh process (wall time, includes
  interpreter start, imports, JSON reading).

    python benchmarks/fit_bench.py [--repeat 3] [--nodes 64] [--templates 100]

``--packings``: instead, the hardest packings of the densest catalog nodes (8 GPUs in DynamicMIG,
every placement; issue 24 item 4): one-device claims that fill all 8 GPUs exactly (per GPU
3g+2g+1g+1g, or mixed with 4g+3g and 2g+2g+2g+1g), in several orders, and the same plus one 1g
that does not fit. Each is solved by ``fit``'s allocator (the exact packing check on; with the count of
the scheduler's own steps, ``fit/scheduler_time.py``, and without it: ``fit_uncounted``) and, in the
same run, by the plain search with the old 50,000-step budget (``packing_after=None``, what
``fit`` did before); steps, verdict and CPU time of both, and their ratio.

    python benchmarks/fit_bench.py --packings [--repeat 3] [--models A100_80GB,B200_180GB]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

PROFILES = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb")
SELECTOR = "device.attributes['gpu.nvidia.com'].profile == '{}'"


def inventory(nodes: int) -> list[dict[str, Any]]:
    """64 copies of the catalog's DynamicMIG node, each with its own name and GPU UUIDs."""
    from dra_constructs.catalog import catalog_resource_slices

    base = json.dumps(catalog_resource_slices(["A100_80GB"], gpus_per_node=8, mig_mode="dynamic",
                                              split_counter_sets=True))
    slices: list[dict[str, Any]] = []
    for n in range(nodes):
        name = f"node-{n:02d}"
        text = base.replace("catalog-a100-80gb", name)
        text = re.sub(r"GPU-[0-9a-f-]{36}",
                      lambda m, name=name: f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, name + m.group())}", text)
        slices.extend(json.loads(text))
    return slices


def templates(count: int) -> list[dict[str, Any]]:
    return [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": f"t{i}", "namespace": "bench"},
        "spec": {"spec": {"devices": {"requests": [{"name": "mig", "exactly": {
            "deviceClassName": "mig.nvidia.com", "count": 1,
            "selectors": [{"cel": {"expression": SELECTOR.format(PROFILES[i % len(PROFILES)])}}]}}]}}},
    } for i in range(count)]


FILLS = {"a": ["3g", "2g", "1g", "1g"], "b": ["4g", "3g"], "c": ["2g", "2g", "2g", "1g"]}
PACKINGS = {  # name: (fill per GPU, order, extra claims)
    "3g+2g+1g+1g x8, largest first": ("aaaaaaaa", "largest", []),
    "3g+2g+1g+1g x8, smallest first": ("aaaaaaaa", "smallest", []),
    "3g+2g+1g+1g x8, interleaved": ("aaaaaaaa", "filled", []),
    "mixed fills, shuffled": ("aabcabca", "shuffled", []),
    "3g+2g+1g+1g x8 + one 1g (no fit)": ("aaaaaaaa", "largest", ["1g"]),
    "mixed fills + one 1g (no fit), shuffled": ("aabcabca", "shuffled", ["1g"]),
}


def packings(args: argparse.Namespace) -> int:
    """The densest nodes' hardest packings: the allocator against the plain search, same run."""
    import random

    from dra_constructs.catalog import GPU_SPECS, catalog_resource_slices
    from dra_constructs.fit import Inventory, claim_from_spec, default_device_classes
    from dra_constructs.fit.allocator import Allocator
    from dra_constructs.fit.scheduler_time import SCHEDULER_COUNT_WORK
    from dra_constructs.target import Target

    target = Target.parse("1.36")
    gates = target.default_feature_gates
    rows = []
    for model in args.models.split(","):
        names = [p.name for p in next(s for s in GPU_SPECS if s.key == model).mig_profiles]
        short = {"1g": names[0], "2g": names[3], "3g": names[4], "4g": names[5]}
        inventory = Inventory.from_slices(catalog_resource_slices([model], gpus_per_node=8, mig_mode="dynamic",
                                                                  split_counter_sets=True))
        for title, (fills, order, extra) in PACKINGS.items():
            wanted = [p for fill in fills for p in FILLS[fill]]
            if order == "largest":
                wanted.sort(key=lambda p: -int(p[0]))
            elif order == "smallest":
                wanted.sort(key=lambda p: int(p[0]))
            elif order == "shuffled":
                random.Random(7).shuffle(wanted)
            wanted += extra
            claims = [claim_from_spec(f"c{i}", {"devices": {"requests": [{"name": "mig", "exactly": {
                "deviceClassName": "mig.nvidia.com",
                "selectors": [{"cel": {"expression": SELECTOR.format(short[p])}}]}}]}}, "bench")
                for i, p in enumerate(wanted)]
            row: dict[str, Any] = {"model": model, "packing": title, "claims": len(claims)}
            for label, plain in (("fit", False), ("fit_uncounted", False), ("plain", True)):
                cpus = []
                for _ in range(args.repeat):
                    count = 0 if label == "fit_uncounted" else SCHEDULER_COUNT_WORK
                    allocator = (Allocator(inventory, default_device_classes(), gates, target, packing_after=None,
                                           step_budget=50_000) if plain else
                                 Allocator(inventory, default_device_classes(), gates, target,
                                           scheduler_count_work=count))
                    result, cpu, _ = timed(lambda a=allocator, c=claims, n=inventory.nodes[0]: a.allocate(c, n))
                    cpus.append(cpu)
                verdict = "fits" if result.allocatable else "gave up" if (result.reason or "").startswith(
                    "gave up") else "does not fit"
                row[label] = {"verdict": verdict, "steps": result.steps, "cpu_s": round(statistics.median(cpus), 3)}
                if label == "fit":  # the scheduler's own steps to the solution (fit/scheduler_time.py)
                    row[label]["scheduler_steps"] = (f"> {result.scheduler_steps}" if result.scheduler_steps_over
                                                     else result.scheduler_steps)
                    row[label]["warns"] = result.warning is not None
            row["cpu_ratio"] = round(row["fit"]["cpu_s"] / row["plain"]["cpu_s"], 3)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(json.dumps({"cases": len(rows), "gave_up": sum(r["fit"]["verdict"] == "gave up" for r in rows),
                      "plain_gave_up": sum(r["plain"]["verdict"] == "gave up" for r in rows),
                      "max_fit_cpu_s": max(r["fit"]["cpu_s"] for r in rows),
                      "max_fit_steps": max(r["fit"]["steps"] for r in rows)}, indent=1))
    return 0


def timed(func: Any) -> tuple[Any, float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    result = func()
    return result, time.process_time() - cpu, time.perf_counter() - wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--templates", type=int, default=100)
    parser.add_argument("--no-cli", action="store_true", help="skip the end-to-end command run")
    parser.add_argument("--packings", action="store_true", help="the densest nodes' hardest packings instead")
    parser.add_argument("--models", default="A100_80GB,B200_180GB", help="with --packings: catalog models")
    args = parser.parse_args()
    if args.packings:
        return packings(args)

    from dra_constructs.catalog import DEVICE_CLASS_SELECTORS
    from dra_constructs.cel import devices_from_slices, match_devices
    from dra_constructs.fit import Inventory, collect, fit
    from dra_constructs.target import Target

    target = Target.parse("1.36")
    slices = inventory(args.nodes)
    docs = templates(args.templates)
    claims = collect(docs, []).claims
    samples: dict[str, list[float]] = {k: [] for k in ("parse_cpu", "parse_wall", "fit_cpu", "fit_wall",
                                                        "baseline_cpu", "baseline_wall", "cli_wall")}
    report: dict[str, Any] = {}
    for _ in range(args.repeat):
        inv, cpu, wall = timed(lambda: Inventory.from_slices(slices))
        samples["parse_cpu"].append(cpu)
        samples["parse_wall"].append(wall)
        result, cpu, wall = timed(lambda inv=inv: fit(claims, inv, target=target))
        samples["fit_cpu"].append(cpu)
        samples["fit_wall"].append(wall)
        report = result.as_json()

        def baseline() -> int:
            devices = devices_from_slices(slices)  # fresh objects: no cache carried over from fit
            best = 0
            for doc in docs:
                request = doc["spec"]["spec"]["devices"]["requests"][0]["exactly"]
                results = match_devices([DEVICE_CLASS_SELECTORS["mig.nvidia.com"]],
                                        [s["cel"]["expression"] for s in request["selectors"]], devices, target)
                per_node = Counter(k.split("/")[1] for k, v in results.items() if v is True)
                best = max(best, max(per_node.values()))
            return best

        _, cpu, wall = timed(baseline)
        samples["baseline_cpu"].append(cpu)
        samples["baseline_wall"].append(wall)
    if not args.no_cli:
        with tempfile.TemporaryDirectory() as tmp:
            slice_file, claim_file = Path(tmp) / "slices.json", Path(tmp) / "claims.json"
            slice_file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": slices}))
            claim_file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
            for _ in range(args.repeat):
                start = time.perf_counter()
                out = subprocess.run([sys.executable, "-m", "dra_constructs.cli", "fit", "--slices", str(slice_file),
                                      "--kubernetes-version", "1.36", "--format", "json", str(claim_file)],
                                     capture_output=True, text=True, env={**os.environ})
                samples["cli_wall"].append(time.perf_counter() - start)
                assert out.returncode == 1 and json.loads(out.stdout) == report, out.stderr
    medians = {k: statistics.median(v) for k, v in samples.items() if v}
    nodes = report["nodes"]
    summary = {
        "nodes": args.nodes, "gpus_per_node": 8, "devices": sum(len(s["spec"].get("devices", [])) for s in slices),
        "templates": args.templates, "repeat": args.repeat, "median_seconds": medians,
        "fit_over_baseline_cpu": medians["fit_cpu"] / medians["baseline_cpu"],
        "allocatable": report["allocatable"], "nodes_answered": len(nodes),
        "reason_node_00": nodes.get("node-00", {}).get("reason"),
        "goal_fit_cpu_le_2s": medians["fit_cpu"] <= 2.0,
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
