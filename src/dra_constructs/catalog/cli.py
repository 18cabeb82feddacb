"""``dra-constructs catalog``: list GPU models and MIG profiles, or dump synthetic ResourceSlices."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import yaml

from dra_constructs.catalog import GPU_SPECS, catalog_resource_slices, gpu_spec
from dra_constructs.catalog.amd import AMD_GPU_SPECS, amd_gpu_spec
from dra_constructs.catalog.amd_devices import amd_resource_slices

__all__ = ["dump_slices", "register"]

# libyaml's emitter where PyYAML was built with it: byte-identical output for every document this command
# emits (tests/fit/test_catalog_dump.py compares both dumpers on every shape), ~4x less CPU than the
# pure-Python emitter on the ~1.8 MB catalog.
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def register(subparsers: Any) -> None:
    """Add the ``catalog`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "catalog", help="list the GPU catalog, or print its synthetic ResourceSlices",
        description="List NVIDIA GPU models and MIG profiles known to dra-constructs.",
    )
    parser.add_argument("--vendor", choices=("nvidia", "amd"), default="nvidia",
                        help="amd: AMD Instinct GPUs and partition profiles (the AMD GPU DRA driver's shape)")
    parser.add_argument("--gpu", action="append", metavar="MODEL", help="only this model (repeatable)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--resource-slices", choices=("v1beta1", "v1beta2", "v1"), metavar="VERSION",
        help="print the synthetic ResourceSlices (YAML) of the models instead of the table",
    )
    parser.add_argument("--mig-mode", choices=("static", "dynamic"), default="static",
                        help="with --resource-slices: pre-created MIG devices (static) or DynamicMIG placements "
                             "consuming counters (dynamic)")
    parser.add_argument("--separate-counter-slices", action="store_true",
                        help="with --mig-mode dynamic: counter sets in a slice of their own (Kubernetes 1.35+)")
    parser.add_argument("--network", action="store_true",
                        help="with --resource-slices: also a dra.net slice per node, one RDMA NIC beside each GPU "
                             "(same pcieRoot and numaNode)")
    parser.add_argument("--nvidia-driver-version", default="main", metavar="VERSION",
                        help="with --resource-slices: only the topology attributes this NVIDIA DRA driver release "
                             "publishes (e.g. 25.8, 0.4: no numaNode on GPUs; default main: all)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.vendor == "amd":
        return _run_amd(args)
    specs = [gpu_spec(m, "dra-constructs catalog", "--gpu") for m in args.gpu] if args.gpu else list(GPU_SPECS)
    if args.resource_slices:
        slices = catalog_resource_slices([s.key for s in specs], resource_version=args.resource_slices,
                                         mig_mode=args.mig_mode, split_counter_sets=args.separate_counter_slices,
                                         network=args.network, nvidia_driver=args.nvidia_driver_version)
        _check_limits(slices, combined=args.mig_mode == "dynamic" and not args.separate_counter_slices)
        dump_slices(slices, sys.stdout)
        return 0
    if args.format == "json":
        json.dump([s.model_dump(mode="json") for s in specs], sys.stdout, indent=2)
        print()
        return 0
    for spec in specs:
        print(f"{spec.key:15} {spec.architecture:10} cc {spec.compute_capability:7} "
              f"{spec.memory_mib:>7} MiB  {spec.product_names[0]}")
        for p in spec.mig_profiles:
            print(f"  {p.name:12} x{p.max_count}  {p.multiprocessors:>3} SMs  ~{p.memory_mib} MiB")
    return 0


def dump_slices(slices: list[dict[str, Any]], stream: Any, dumper: Any = None) -> None:
    """Write ``slices`` as a YAML stream, as ``yaml.safe_dump_all(..., sort_keys=False)`` writes it."""
    yaml.dump_all(slices, stream, Dumper=dumper or _DUMPER, sort_keys=False)


def _check_limits(slices: list[dict[str, Any]], combined: bool) -> None:
    """Every emitted slice within the API server's 1.35+ limits (``fit/limits.py``); the combined
    layout (counter sets beside the devices) is the 1.34 one, asked for without
    ``--separate-counter-slices``."""
    from dra_constructs.errors import DraConstructsError
    from dra_constructs.fit.limits import slice_limit_problems

    for raw in slices:
        problems = [p for p in slice_limit_problems(raw) if not (combined and p[0] == "spec.sharedCounters"
                                                                 and p[2] == 0)]
        if problems:
            field_name, value, limit, fix = problems[0]
            raise DraConstructsError(f"ResourceSlice/{raw['metadata']['name']}", field_name, value,
                                     f"the catalog emits {value} entries, the API server allows {limit}", fix)


def _run_amd(args: argparse.Namespace) -> int:
    specs = [amd_gpu_spec(m, "dra-constructs catalog", "--gpu") for m in args.gpu] if args.gpu \
        else list(AMD_GPU_SPECS)
    if args.resource_slices:
        slices = amd_resource_slices([s.key for s in specs], resource_version=args.resource_slices)
        dump_slices(slices, sys.stdout)
        return 0
    if args.format == "json":
        json.dump([{**s.model_dump(mode="json"), "profiles": [p.model_dump(mode="json") for p in s.profiles]}
                   for s in specs], sys.stdout, indent=2)
        print()
        return 0
    for spec in specs:
        print(f"{spec.key:8} {spec.xccs} XCDs {spec.compute_units:>4} CUs {spec.memory_bytes >> 20:>7} MiB  "
              f"{spec.product_name}")
        for p in spec.profiles:
            print(f"  {p.name:9} x{p.max_count}  {p.compute_units:>3} CUs  {p.memory_bytes >> 20} MiB")
    return 0
