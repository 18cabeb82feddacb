"""``dra-constructs fit``: can the claims in the manifests be allocated together, and on which nodes?

The claims of each Pod are allocated together (each template stands for the Pod's own claim),
against the ResourceSlices of the slice files, node by node: a workload in the manifests (a Pod,
Deployment, Job...) makes one Pod of the claims and templates it references in its namespace;
claims no workload references are allocated together per namespace. Exit codes: 0 every Pod is
allocatable on some node, 1 one is not, 2 usage or input errors (naming the object and field).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from typing import Any

from dra_constructs._io import ReadBudget
from dra_constructs._progress import Progress
from dra_constructs.errors import DraConstructsError
from dra_constructs.fit import FitReport, FleetCache, collect, default_device_classes, feature_gates
from dra_constructs.fit.allocator import DEFAULT_STEP_BUDGET, DeviceResult
from dra_constructs.fit.capacity import format_quantity
from dra_constructs.fit.fleet import read_attributes
from dra_constructs.fit.inputs import check_selectors, pod_groups
from dra_constructs.fit.model import Inventory
from dra_constructs.fit.shapes import FleetReader, fit_fleet
from dra_constructs.guardrails.loader import MAX_AUDIT_INPUT_BYTES, STDIN, load_paths, size_arg
from dra_constructs.target import DEFAULT_KUBERNETES_VERSION, Target

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``fit`` subcommand."""
    parser = subparsers.add_parser(
        "fit", help="allocate the claims of manifests together against ResourceSlices, node by node",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("manifests", nargs="+", metavar="MANIFEST",
                        help="YAML/JSON file or directory with ResourceClaims / ResourceClaimTemplates "
                             "(and DeviceClasses); - for stdin")
    parser.add_argument("--slices", action="append", required=True, metavar="FILE",
                        help="ResourceSlices (kubectl get resourceslices -o yaml); may also hold DeviceClasses, "
                             "Nodes and DeviceTaintRules (repeatable)")
    parser.add_argument("--allocated", action="append", default=[], metavar="FILE",
                        help="allocated ResourceClaims (kubectl get resourceclaims -A -o yaml): their devices "
                             "are in use; results with shareID are shares whose consumedCapacity is subtracted")
    parser.add_argument("--kubernetes-version", default=DEFAULT_KUBERNETES_VERSION, metavar="V",
                        help=f"target version: CEL environment and default feature gates "
                             f"(default {DEFAULT_KUBERNETES_VERSION})")
    parser.add_argument("--feature-gates", default="", metavar="Name=true,...",
                        help="override DRA feature gates, kube-scheduler syntax")
    parser.add_argument("--node", action="append", metavar="NAME", help="only this node (repeatable)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--max-input-bytes", type=size_arg, default=MAX_AUDIT_INPUT_BYTES, metavar="SIZE",
                        help="refuse manifests, slices or allocated claims adding up to more than SIZE each "
                             "(bytes, or with a KiB/MiB/GiB suffix; none: no total limit); default 256MiB (a "
                             "5,000-node fleet's kubectl -o json is ~4 GiB; each document keeps its own limits)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress indicator on stderr (it shows only when stderr is a terminal)")
    parser.add_argument("--count", action="store_true",
                        help="also count how many such Pods fit on each node at once")
    parser.add_argument("--step-budget", type=_step_budget, default=DEFAULT_STEP_BUDGET, metavar="N",
                        help=f"search steps per node before 'gave up' (default {DEFAULT_STEP_BUDGET:,}: the "
                             "scheduler's 10 s filter timeout at its rate; lower it for a quick answer on "
                             "hopeless searches, where 'gave up' then means only that fit stopped)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load, allocate, report."""
    target = Target.parse(args.kubernetes_version, "--kubernetes-version")
    gates = feature_gates(args.feature_gates, target)
    paths = [*args.manifests, *args.slices, *args.allocated]
    if paths.count(STDIN) > 1:
        raise DraConstructsError("-", "stdin", "-", "standard input can be read only once", "pass files instead")
    stdin = io.StringIO(sys.stdin.read()) if STDIN in paths else None
    with Progress(enabled=not args.quiet) as progress:
        progress.step("reading manifests")
        limit = args.max_input_bytes
        loaded = load_paths(args.manifests, stdin=stdin, max_bytes=limit)
        manifests = [m.obj for m in loaded]
        progress.step("reading slices")
        early = collect(manifests, [])  # what the claims read: the values the slices' hashes keep
        reader = FleetReader(read_attributes(early.claims, {**default_device_classes(), **early.classes}, target),
                             target)
        budget = ReadBudget.of(limit)
        for path in args.slices:
            reader.read_path(path, budget, stdin, progress)
        allocated = [m.obj for m in load_paths(args.allocated, stdin=stdin, max_bytes=limit)] if args.allocated else []
        inputs = collect(manifests, reader.others, allocated)
        if not inputs.claims:
            raise DraConstructsError(", ".join(args.manifests), "kind", None,
                                     "no ResourceClaim or ResourceClaimTemplate in the manifests",
                                     "pass the manifests that hold the Pod's claims")
        if not reader.slices:
            raise DraConstructsError(", ".join(args.slices), "kind", None, "no ResourceSlice in the slice files",
                                     "pass kubectl get resourceslices -o yaml")
        classes = {**default_device_classes(), **inputs.classes}
        progress.step("grouping nodes")
        shapes = reader.shapes(inputs.nodes, inputs.allocated, inputs.taint_rules,
                               read_attributes(inputs.claims, classes, target))
        del reader
        inputs.slices = shapes.slices
        inventory = Inventory.from_slices(inputs.slices, shapes.nodes, inputs.taint_rules)
        known = {n.name for n in inventory.nodes} | set(shapes.order)
        for name in args.node or []:
            if name not in known:
                raise DraConstructsError("--node", "node", name, "no slice or Node object names this node",
                                         f"use one of {', '.join(sorted(known))}")
        check_selectors(inputs, target)
        groups = pod_groups(loaded, inputs)
        reports = []
        fleet = FleetCache()  # node keys computed once for all Pods
        for number, group in enumerate(groups, 1):
            progress.step("fitting" if len(groups) == 1 else f"fitting {number}/{len(groups)}")
            reports.append((group, fit_fleet(list(group.claims), inventory, shapes, target=target, classes=classes,
                                             gates=gates, allocated=inputs.allocated,
                                             taint_rules=inputs.taint_rules, nodes=args.node, count=args.count,
                                             fleet=fleet, step_budget=args.step_budget,
                                             progress=lambda done, total: progress.update(done, total, "nodes"))))
    allocatable = all(report.allocatable for _, report in reports)
    if args.format == "json":
        if len(reports) == 1:
            out = {"pod": groups[0].label, **reports[0][1].as_json()}
        else:
            out = {"allocatable": allocatable,
                   "pods": [{"pod": g.label, "claims": [c.name for c in g.claims], **r.as_json()} for g, r in reports]}
        json.dump(out, sys.stdout, indent=2)
        print()
    elif len(reports) == 1:
        sys.stdout.write(_text(reports[0][1]))
    else:
        for group, report in reports:
            sys.stdout.write(f"{group.label} (claims {', '.join(c.name for c in group.claims)}):\n")
            sys.stdout.write("".join(f"  {line}\n" for line in _text(report).splitlines()))
        fitting = sum(r.allocatable for _, r in reports)
        sys.stdout.write(f"{fitting} of {len(reports)} pod(s) can be allocated\n")
    return 0 if allocatable else 1


def _step_budget(text: str) -> int:
    """A positive whole number of search steps (argparse turns the ValueError into exit 2 with the value)."""
    value = int(text.replace(",", "").replace("_", ""))
    if value < 1:
        raise ValueError(text)
    return value


def _text(report: FitReport) -> str:
    lines = []
    for name, result in report.nodes.items():
        count = f" (x{report.counts.get(name, 0)} Pods)" if report.counts is not None else ""
        if result.allocatable:
            lines.append(f"{name}: allocatable{count}")
            lines += [f"  {d.claim}/{d.request}: {d.driver}/{d.pool}/{d.device}" + _consumed(d) for d in result.devices]
            if result.warning:
                lines.append(f"  warning: {result.warning}")
        else:
            lines.append(f"{name}: not allocatable: {result.reason}")
    fitting = sum(r.allocatable for r in report.nodes.values())
    lines.append(f"{fitting} of {len(report.nodes)} node(s) can allocate the claims")
    return "\n".join(lines) + "\n"


def _consumed(device: DeviceResult) -> str:
    """`` (consumes memory=16Gi)`` for a shared device, else nothing."""
    if not device.consumed:
        return ""
    return " (consumes " + ", ".join(f"{n}={format_quantity(a)}" for n, a in device.consumed) + ")"
