"""``dra-constructs cel check`` and ``dra-constructs cel match``: a stable command-line contract.

Exit codes: 0 every expression is OK; 1 at least one is not (``TooLong``, ``Invalid``,
``Forbidden``); 2 usage or input errors (unreadable files, bad JSON lines, unknown versions
or device classes). No traceback for bad input.

``--jsonl FILE|-`` reads one JSON object per line with an ``expression`` key (other keys are
passed through) and writes one JSON object per line: the input keys plus ``verdict``,
``error`` and ``cost`` (``check``) or ``matches`` (``match``; ``null`` when the expression does
not pass the check).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from dra_constructs._io import display_name, read_input
from dra_constructs._safe_load import json_document
from dra_constructs.errors import DraConstructsError
from dra_constructs.target import DEFAULT_KUBERNETES_VERSION

__all__ = ["MAX_JSONL_RECORDS", "MAX_MATCH_EVALUATIONS", "register"]

#: Expressions one ``--jsonl`` run checks (about 40 s when none is shared; docs/input-limits.md).
MAX_JSONL_RECORDS = 100_000
#: Expression x device evaluations one ``cel match`` run does (a few seconds).
MAX_MATCH_EVALUATIONS = 2_000_000


def register(subparsers: Any) -> None:
    """Add the ``cel`` command with its ``check`` and ``match`` subcommands."""
    cel_parser: argparse.ArgumentParser = subparsers.add_parser(
        "cel", help="check DRA CEL selectors like the API server, or match them against devices",
        description="Check DRA CEL selectors as the Kubernetes API server does, or evaluate them "
                    "against the devices of ResourceSlices as the scheduler does.",
    )
    commands = cel_parser.add_subparsers(dest="cel_command", metavar="SUBCOMMAND",
                                         parser_class=type(cel_parser))
    check_parser = commands.add_parser(
        "check", help="print the API server's verdict (OK, Invalid, TooLong, Forbidden) per expression",
        description="Exit 0 if every expression is OK, 1 if any is not, 2 on usage or input errors.",
    )
    _common(check_parser)
    check_parser.add_argument("expressions", nargs="*", metavar="EXPRESSION",
                              help="CEL selector expressions; - reads them from standard input, one per line")
    check_parser.set_defaults(func=_run_check)

    match_parser = commands.add_parser(
        "match", help="evaluate a selector on every device of ResourceSlice files (JSON output)",
        description="Print a JSON object mapping driver/pool/device to true, false or \"error: <message>\".",
    )
    _common(match_parser)
    match_parser.add_argument("--slices", action="append", required=True, metavar="FILE",
                              help="ResourceSlice YAML/JSON (kubectl get resourceslices -o yaml); "
                                   "repeatable; - for stdin")
    match_parser.add_argument("--device-class", metavar="NAME",
                              help="also apply this NVIDIA DeviceClass's selector first (e.g. gpu.nvidia.com)")
    match_parser.add_argument("expression", nargs="?", metavar="EXPRESSION", help="CEL selector expression")
    match_parser.set_defaults(func=_run_match)
    cel_parser.set_defaults(func=lambda _args: _usage(cel_parser))


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubernetes-version", default=DEFAULT_KUBERNETES_VERSION, metavar="V",
                        help="target Kubernetes version, e.g. 1.32, 1.32.3, 1.34 "
                             f"(default {DEFAULT_KUBERNETES_VERSION})")
    parser.add_argument("--jsonl", metavar="FILE",
                        help="read {\"expression\": ...} objects, one per line (- for stdin); write JSON lines")


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _read_jsonl(source: str) -> list[dict[str, Any]]:
    """Every object of a JSON-lines file; any malformed line is an input error (exit 2)."""
    where = display_name(source)
    lines = read_input(source, "--jsonl", "JSON-lines file, or - for standard input").splitlines()
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json_document(line, where, "line", first_line=number)
        except DraConstructsError as error:
            if not error.problem.startswith("malformed JSON"):
                raise
            raise DraConstructsError(f"{where}:{number}", "line", line[:80], f"not JSON ({error.problem[16:]})",
                                     'write one JSON object per line, e.g. {"expression": "true"}') from None
        if not isinstance(record, dict) or not isinstance(record.get("expression"), str):
            raise DraConstructsError(f"{where}:{number}", "expression", line[:80],
                                     "each line must be a JSON object with a string \"expression\"",
                                     'write {"expression": "..."} (other keys are passed through)')
        records.append(record)
        if len(records) > MAX_JSONL_RECORDS:
            raise DraConstructsError(f"{where}:{number}", "--jsonl", f">{MAX_JSONL_RECORDS:,} records",
                                     f"more than {MAX_JSONL_RECORDS:,} expressions in one run",
                                     "split the file into several runs (limits: docs/input-limits.md)")
    return records


def _write(record: dict[str, Any], out: TextIO) -> None:
    # Input NaN is refused when read; allow_nan=False keeps any other from reaching the output.
    out.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")


def _utf8_expression(expression: str, where: str) -> str:
    """An expression from the command line whose bytes were not UTF-8 (surrogate-escaped) is refused."""
    try:
        expression.encode("utf-8")
    except UnicodeEncodeError as error:
        raise DraConstructsError(where, "EXPRESSION", expression, f"not valid UTF-8 (at character {error.start})",
                                 "pass the expression as UTF-8 text") from None
    return expression


def _run_check(args: argparse.Namespace) -> int:
    from dra_constructs.cel.checker import check_many, parse_target

    target = parse_target(args.kubernetes_version)
    if args.jsonl is not None and args.expressions:
        raise DraConstructsError("cel check", "EXPRESSION", args.expressions[0],
                                 "give expressions or --jsonl, not both",
                                 "drop the positional expressions or the --jsonl option")
    if args.jsonl is not None:
        all_ok = True
        records = _read_jsonl(args.jsonl)
        for record, result in zip(records, check_many([r["expression"] for r in records], target), strict=True):
            all_ok &= result.ok
            _write({**record, "verdict": result.verdict, "error": result.error, "cost": result.cost}, sys.stdout)
        return 0 if all_ok else 1
    if not args.expressions:
        raise DraConstructsError("cel check", "EXPRESSION", None, "no expression given",
                                 "pass one or more expressions, - for standard input, or --jsonl FILE")
    expressions: list[str] = []
    for expression in args.expressions:
        if expression == "-":
            text = read_input("-", "EXPRESSION", "list of expressions, one per line (standard input)")
            expressions.extend(line for line in text.splitlines() if line.strip())
        else:
            expressions.append(_utf8_expression(expression, "cel check"))
    from dra_constructs.cel.fixes import misspelt_names

    all_ok = True
    for expression, result in zip(expressions, check_many(expressions, target), strict=True):
        all_ok &= result.ok
        cost = f" (cost {result.cost})" if result.cost is not None else ""
        print(f"{result.verdict}{cost}: {expression}")
        if result.error:
            for line in result.error.splitlines():
                print(f"  {line}")
        if result.fix:
            print(f"  fix: {result.fix}")
        for note in misspelt_names(expression):
            print(f"  note: {note}")
    return 0 if all_ok else 1


def _run_match(args: argparse.Namespace) -> int:
    from dra_constructs.catalog import DEVICE_CLASS_SELECTORS as NVIDIA_CLASS_SELECTORS
    from dra_constructs.catalog.network import NIC_CLASS_SELECTORS
    from dra_constructs.cel import check, devices_from_slices, load_resource_slices, match_devices
    from dra_constructs.cel.checker import parse_target

    target = parse_target(args.kubernetes_version)
    class_selectors: list[str] = []
    DEVICE_CLASS_SELECTORS = {**NVIDIA_CLASS_SELECTORS, **NIC_CLASS_SELECTORS}
    if args.device_class is not None:
        if args.device_class not in DEVICE_CLASS_SELECTORS:
            raise DraConstructsError("cel match", "--device-class", args.device_class,
                                     "not an NVIDIA DeviceClass nor the NIC class",
                                     f"use one of {', '.join(DEVICE_CLASS_SELECTORS)}")
        class_selectors = [DEVICE_CLASS_SELECTORS[args.device_class]]
    if (args.jsonl is None) == (args.expression is None):
        raise DraConstructsError("cel match", "EXPRESSION", args.expression, "give one expression or --jsonl",
                                 "pass exactly one of EXPRESSION and --jsonl FILE")
    records = _read_jsonl(args.jsonl) if args.jsonl is not None else []
    devices = devices_from_slices(load_resource_slices(args.slices))
    evaluations = max(len(records), 1) * len(devices)
    if evaluations > MAX_MATCH_EVALUATIONS:
        raise DraConstructsError("cel match", "--slices", f"{len(devices):,} devices x {max(len(records), 1):,} "
                                 "expressions", f"more than {MAX_MATCH_EVALUATIONS:,} evaluations in one run",
                                 "split the expressions or the ResourceSlices into several runs "
                                 "(limits: docs/input-limits.md)")

    def matches(expression: str) -> dict[str, bool | str] | None:
        if not check(expression, target).ok:
            return None
        return match_devices(class_selectors, [expression], devices, target)

    if args.jsonl is not None:
        all_ok = True
        for record in records:
            try:
                result, failure = matches(record["expression"]), None
            except Exception as error:  # one expression's engine failure never stops the others
                result, failure = None, f"error: {type(error).__name__}: {error}"
            all_ok &= result is not None
            _write({**record, "matches": result} | ({"error": failure} if failure else {}), sys.stdout)
        return 0 if all_ok else 1
    verdict = check(_utf8_expression(args.expression, "cel match"), target)
    if not verdict.ok:
        print(f"{verdict.verdict}: {verdict.error}", file=sys.stderr)
        if verdict.fix:
            print(f"fix: {verdict.fix}", file=sys.stderr)
        return 1
    json.dump(match_devices(class_selectors, [args.expression], devices, target), sys.stdout, indent=2,
              ensure_ascii=False)
    print()
    return 0
