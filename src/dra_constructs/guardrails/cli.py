"""``dra-constructs audit`` and ``dra-constructs rules``: the guardrail rules on the command line.

Exit codes: 0 no error-level finding, 1 at least one, 2 unreadable or malformed input (every other
file is still audited and reported) or nothing to audit because every file was skipped. Files that
are no manifests (Helm templates, kustomizations, values) are reported as skipped and do not
change the exit code otherwise.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
from typing import Any

from dra_constructs._cli_runner import KEEP_TO_EXIT
from dra_constructs._io import ReadBudget, write_output
from dra_constructs._progress import Progress
from dra_constructs._safe_load import no_gc
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails.engine import AuditResult, audit
from dra_constructs.guardrails.loader import MAX_AUDIT_INPUT_BYTES
from dra_constructs.guardrails.loader import size_arg as _size_arg
from dra_constructs.guardrails.locate import with_field_lines
from dra_constructs.guardrails.manifest import Manifest
from dra_constructs.guardrails.model import Rule, Severity
from dra_constructs.guardrails.report import to_json, to_text
from dra_constructs.guardrails.resources import parse_dra_extended_resources
from dra_constructs.guardrails.rules import RULES, RULES_BY_ID
from dra_constructs.guardrails.skipped import SkippedInput
from dra_constructs.guardrails.stream import Collector, stream_paths
from dra_constructs.guardrails.target_inference import chosen_target
from dra_constructs.validation import did_you_mean

__all__ = ["register", "run", "run_rules"]

_FORMATS = ("text", "json", "sarif")


def register(subparsers: Any) -> None:
    """Add the ``audit`` subcommand."""
    parser = subparsers.add_parser(
        "audit",
        help="check manifests (files, directories, - for stdin) against the DRA guardrail rules",
        description="Check Kubernetes manifests against the DRA guardrail rules (list them with "
                    "`dra-constructs rules`). Exit 0 when no finding reaches --fail-on, 1 otherwise, "
                    "2 for unreadable or malformed input.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="YAML/JSON file, directory (searched for *.yaml, *.yml, *.json) or - for stdin")
    parser.add_argument("--kubernetes-version", default=None, metavar="V",
                        help="target Kubernetes version for CEL and API checks (default: inferred, the oldest "
                             "release serving every resource.k8s.io API version of the input, e.g. 1.34 for v1; "
                             "without DRA objects the newest supported release; the report's header says which)")
    parser.add_argument("--format", choices=_FORMATS, default="text", help="output format (default text)")
    parser.add_argument("--fail-on", choices=("error", "warning"), default="error",
                        help="lowest severity that makes the exit code 1 (default error)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    parser.add_argument("--tenant-scope", choices=("file", "set"), default="file",
                        help="DRA009 (several tenants, no sanitizer): judge each file as its own manifest set "
                             "(default; what one `kubectl apply -f` deploys) or all inputs together (set); a "
                             "sanitizer DaemonSet anywhere in the input covers every tenant")
    parser.add_argument("--dra-extended-resource", action="append", default=[], metavar="NAME=CLASS",
                        help="the cluster serves extended resource NAME through DRA from DeviceClass CLASS "
                             "(KEP-5004, Kubernetes 1.34+; e.g. nvidia.com/gpu=gpu.nvidia.com, which NVIDIA's "
                             "chart sets on v1 clusters): reported as DRA010 instead of DRA001; repeatable")
    parser.add_argument("--skip", action="append", default=[], metavar="RULE",
                        help="do not run these rules (ids, comma-separated or repeated, e.g. DRA008,DRA009)")
    parser.add_argument("--only", action="append", default=[], metavar="RULE",
                        help="run only these rules (ids, comma-separated or repeated)")
    parser.add_argument("--max-findings", type=_count_arg("--max-findings"), default=None, metavar="N",
                        help="text output: print at most N findings (the per-rule summary and the count of the "
                             "rest are always printed; json and sarif list all)")
    parser.add_argument("--max-input-bytes", "--max-total-bytes", dest="max_input_bytes", type=_size_arg,
                        default=MAX_AUDIT_INPUT_BYTES, metavar="SIZE",
                        help="refuse a run whose inputs add up to more than SIZE (bytes, or with a KiB/MiB/GiB "
                             "suffix; none: no total limit; memory does not grow with it: inputs are read object "
                             "by object); default 256MiB, which stops an endless stdin (each document keeps its "
                             "own limits: docs/input-limits.md)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress indicator on stderr (it shows only when stderr is a terminal)")
    parser.set_defaults(func=run)

    rules_parser = subparsers.add_parser(
        "rules", help="list the guardrail rules (id, severity, what and why)",
        description="List the guardrail rules that audit, synth and the admission policy apply.",
    )
    rules_parser.add_argument("--format", choices=("text", "json"), default="text",
                              help="output format (default text)")
    rules_parser.set_defaults(func=run_rules)


def _count_arg(option: str) -> Any:
    def parse(value: str) -> int:
        if not value.isdigit():
            raise argparse.ArgumentTypeError(f"{option} takes a whole number >= 0, not {value!r}")
        return int(value)
    return parse


def _rule_ids(values: list[str], option: str) -> list[str]:
    ids = [part.strip().upper() for value in values for part in value.split(",") if part.strip()]
    for rule_id in ids:
        if rule_id not in RULES_BY_ID:
            raise DraConstructsError(option, "RULE", rule_id, "not a rule id" + did_you_mean(rule_id, RULES_BY_ID),
                                     f"use ids from `dra-constructs rules`: {', '.join(sorted(RULES_BY_ID))}")
    return ids


def selected_rules(skip: list[str], only: list[str]) -> tuple[Rule, ...]:
    """The rules ``--skip``/``--only`` leave (DRA000, which checks suppressions, always runs)."""
    skipped, kept = set(_rule_ids(skip, "--skip")), set(_rule_ids(only, "--only"))
    if "DRA000" in skipped:
        raise DraConstructsError("--skip", "RULE", "DRA000", "DRA000 checks that suppressions are valid; it "
                                 "cannot be skipped", "fix or remove the broken suppression annotations")
    return tuple(r for r in RULES if r.id == "DRA000" or (r.id not in skipped and (not kept or r.id in kept)))


def run_rules(args: argparse.Namespace) -> int:
    """Print the rule table."""
    if args.format == "json":
        sys.stdout.write(json.dumps([{"id": r.id, "name": r.name, "severity": r.severity.value, "why": r.why,
                                      "fix": r.fix, "scope": "set" if r.set_check else "object"}
                                     for r in RULES], indent=2) + "\n")
        return 0
    for rule in RULES:
        sys.stdout.write(f"{rule.id}  {rule.severity.value:<7}  {rule.name}\n")
        sys.stdout.write(f"        why: {rule.why}\n        fix: {rule.fix}\n")
    return 0


def run(args: argparse.Namespace) -> int:
    """Load, audit, report; the exit code follows the module docstring."""
    if args.kubernetes_version is not None:  # a bad version fails before any file is read
        chosen_target(args.kubernetes_version, [])
    rules = selected_rules(args.skip, args.only)
    skipped: list[SkippedInput] = []
    errors: list[DraConstructsError] = []
    sources: dict[str, str] = {}
    with Progress(enabled=not args.quiet) as progress, tempfile.TemporaryDirectory(prefix="dra-audit-") as spool:
        collector = Collector()
        # The collector stays off from the read to ``gc.freeze``: turned on in between, its first
        # pass would walk every object read (~0.4 s for 200,000 Pods) only to find them all alive.
        with no_gc():
            stream_paths(args.paths, collector, sys.stdin, skipped=skipped, errors=errors,
                         budget=ReadBudget.of(args.max_input_bytes), progress=progress, sources=sources,
                         spool_dir=spool)
            manifests = collector.manifests
            if errors and not manifests and not skipped:
                if len(errors) == 1:
                    raise errors[0]
                progress.done()
                _print_errors(errors)
                return 2
            choice = chosen_target(args.kubernetes_version, manifests)
            declared = parse_dra_extended_resources(args.dra_extended_resource, choice.target,
                                                    "--dra-extended-resource")
            gc.freeze()  # the manifests live to the end: keep the collector from re-scanning them
        result = audit(manifests, kubernetes_version=choice.target, tenant_scope=args.tenant_scope, rules=rules,
                       dra_extended_resources=declared, progress=progress)
        progress.step("locating findings")
        result = with_field_lines(result, spans=_spans(manifests, result), sources=sources)
    setattr(args, KEEP_TO_EXIT, (collector, manifests))  # (freed at the exit, or with ``args``)
    if args.format == "json":
        text = to_json(result, skipped, choice)
    elif args.format == "sarif":
        from dra_constructs.guardrails.sarif import to_sarif

        text = json.dumps(to_sarif(result, skipped=skipped, target=choice), indent=2) + "\n"
    else:
        text = to_text(result, skipped, choice, max_findings=args.max_findings)
    write_output(args.output or None, text)
    if errors:
        _print_errors(errors)
        return 2
    if skipped and not manifests:
        print(f"dra-constructs: error: nothing to audit: all {len(skipped)} input files were skipped "
              "(render templates and kustomizations first)", file=sys.stderr)
        return 2
    failing = result.errors if args.fail_on == Severity.ERROR.value else result.findings
    return 1 if failing else 0


def _spans(manifests: list[Manifest], result: AuditResult) -> dict[tuple[str, int], tuple[int, int]]:
    """The byte spans of the objects with findings that were read item by item."""
    wanted = {(f.file, f.line) for f in (*result.findings, *(s.finding for s in result.suppressed))
              if f.file and f.line}
    lines = {line for _, line in wanted}  # (an int looked up per object before a tuple is made)
    return {(m.file, m.line): m.span for m in manifests
            if m.line in lines and m.span is not None and m.file and (m.file, m.line) in wanted}


def _print_errors(errors: list[DraConstructsError]) -> None:
    for error in errors:
        print(f"dra-constructs: error: {error}", file=sys.stderr)
