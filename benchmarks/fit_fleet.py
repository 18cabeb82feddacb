#!/usr/bin/env python3
"""``fit`` across a fleet: N nodes x 8 DynamicMIG A100 80GB GPUs, 100 claim templates (issue 25 item 3).

The fleet is what ``kubectl get resourceslices -o json`` prints for N copies of the catalog's
DynamicMIG node for 1.36 (a counter-set slice + one slice per GPU, 26 devices a GPU: the full GPU
and its 25 MIG placements), each copy with its own node, pool and slice names and GPU UUIDs: 208
devices a node. It is written to a file as kubectl prints it (a ``List``, 4-space indent: ~0.8 MiB
a node) and measured in a fresh process per fleet size, step by step, CPU time
(``time.process_time``: the shared machine's load inflates wall time) and wall time, with the
peak RSS (``resource.getrusage``) after each step, as ``dra-constructs fit`` runs them:

- ``read``: ``FleetReader`` (``fit/shapes.py``): the file item by item (``_json_stream.py``:
  orjson and every input limit per item), each slice checked against the API's limits and
  hashed, the slices grouped into nodes and one node of each shape read again;
- ``parse``: ``Inventory.from_slices`` of those nodes;
- ``fit``: ``fit_fleet`` of the 100 templates (one Pod: they do not fit together, every node must
  prove it), the answer carried to every node of a shape;
- with ``--per-node`` (the smaller fleets): the whole file through ``load_paths``, the whole
  inventory, ``fit(..., dedupe=False)`` node by node, the answers compared node by node.

    python benchmarks/fit_fleet.py [--nodes 500 5000] [--per-node-up-to 500] [--templates 100]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from fit_bench import templates  # the same 100 MIG claim templates as the single-fleet benchmark


def node_texts(nodes: int, indent: int | None = None) -> Any:
    """Per node, its slices as JSON (a list): the catalog's node with its own names and UUIDs.

    The text of one node is made once (``indent``: as the items of a kubectl ``List``) and cut at
    its names and UUIDs; every node is those pieces with its names and its UUIDs (uuid5 of node
    and original UUID) put in (bytes: 5,000 nodes are written in about a minute).
    """
    from dra_constructs.catalog import catalog_resource_slices

    base = json.dumps(catalog_resource_slices(["A100_80GB"], gpus_per_node=8, mig_mode="dynamic",
                                              split_counter_sets=True), indent=indent,
                      separators=None if indent else (",", ":"))
    if indent:
        base = base.replace("\n", "\n" + " " * indent)
    parts = [part.encode() for part in re.split(r"(GPU-[0-9a-f-]{36}|catalog-a100-80gb)", base)]
    uuids = sorted({part for part in parts[1::2] if part.startswith(b"GPU-")})
    for n in range(nodes):
        name = f"node-{n:05d}"
        put = {b"catalog-a100-80gb": name.encode()}
        put.update((u, f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, name + u.decode())}".encode()) for u in uuids)
        yield b"".join(part if i % 2 == 0 else put[part] for i, part in enumerate(parts))


def write_fleet(nodes: int, path: Path) -> int:
    """``nodes`` nodes as ``kubectl get resourceslices -o json`` prints them (a ``List``, 4-space indent)."""
    with path.open("wb") as out:
        out.write(b'{\n    "apiVersion": "v1",\n    "items": [')
        for n, text in enumerate(node_texts(nodes, indent=4)):
            out.write((b"," if n else b"") + text[1:text.rindex(b"]")].rstrip())
        out.write(b'\n    ],\n    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n    }\n}\n')
    return path.stat().st_size


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(path: str, count: int, per_node: bool) -> dict[str, Any]:
    """One fleet in this process: each step's CPU and wall seconds and the peak RSS after it."""
    from dra_constructs._io import ReadBudget
    from dra_constructs.fit import Inventory, collect, default_device_classes, fit
    from dra_constructs.fit.fleet import read_attributes
    from dra_constructs.fit.shapes import FleetReader, fit_fleet
    from dra_constructs.target import Target

    target = Target.parse("1.36")
    claims = collect(templates(count), []).claims
    classes = default_device_classes()
    steps: dict[str, Any] = {"rss_start_mb": rss_mb()}

    def step(name: str, func: Any) -> Any:
        cpu, wall = time.process_time(), time.perf_counter()
        result = func()
        steps[name] = {"cpu_s": round(time.process_time() - cpu, 2), "wall_s": round(time.perf_counter() - wall, 2),
                       "rss_peak_mb": round(rss_mb())}
        return result

    def read() -> Any:  # as ``dra-constructs fit`` reads --slices
        reader = FleetReader(read_attributes(claims, classes, target), target)
        reader.read_path(path, ReadBudget.of(None))
        state = collect([], reader.others)
        return state, reader.shapes(state.nodes, state.allocated, state.taint_rules,
                                    read_attributes(claims, classes, target))

    state, shapes = step("read", read)
    inventory = step("parse", lambda: Inventory.from_slices(shapes.slices, shapes.nodes, state.taint_rules))
    report = step("fit", lambda: fit_fleet(claims, inventory, shapes, target=target, classes=classes,
                                           gates=target.default_feature_gates, allocated=state.allocated))
    steps["nodes"] = len(report.nodes)
    steps["shapes_parsed"] = len(inventory.nodes)
    steps["devices_parsed"] = len(inventory)
    steps["allocatable_nodes"] = sum(r.allocatable for r in report.nodes.values())
    steps["reason_first_node"] = next(iter(report.nodes.values())).reason
    if per_node:
        from dra_constructs.guardrails.loader import load_paths

        del inventory, shapes
        whole = step("read_whole", lambda: [m.obj for m in load_paths([path], max_bytes=None)])
        everything = step("parse_whole", functools.partial(Inventory.from_slices, whole))
        whole.clear()
        slow = step("fit_per_node", lambda: fit(claims, everything, target=target, dedupe=False))
        steps["same_answers"] = slow.nodes == report.nodes and list(slow.nodes) == list(report.nodes)
        steps["per_node_over_streamed_cpu"] = round(
            steps["fit_per_node"]["cpu_s"] / max(steps["fit"]["cpu_s"], 1e-9), 1)
    return steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--per-node-up-to", type=int, default=500, help="also solve node by node up to this size")
    parser.add_argument("--templates", type=int, default=100)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--per-node", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.templates, args.per_node)))
        return 0
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for nodes in args.nodes:
            path = Path(tmp) / f"fleet-{nodes}.json"
            start = time.perf_counter()
            size = write_fleet(nodes, path)
            command = [sys.executable, __file__, "--child", str(path), "--templates", str(args.templates)]
            if nodes <= args.per_node_up_to:
                command.append("--per-node")
            out = subprocess.run(command, capture_output=True, text=True, check=False)
            if out.returncode != 0:
                results.append({"fleet_nodes": nodes, "failed": out.stderr[-2000:]})
            else:
                results.append({"fleet_nodes": nodes, "json_mb": round(size / 2**20, 1), "load": os.getloadavg()[0],
                                "generate_s": round(time.perf_counter() - start, 1), **json.loads(out.stdout)})
            path.unlink(missing_ok=True)
            print(json.dumps(results[-1]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
