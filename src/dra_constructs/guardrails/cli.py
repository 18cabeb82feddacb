"""``dra-constructs audit``: run the guardrail rules over any YAML/JSON manifests.

Exit codes: 0 no error-level finding, 1 at least one, 2 unreadable or malformed input.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from typing import Any

from .._io import write_output
from ..target import DEFAULT_KUBERNETES_VERSION, Target
from .engine import audit
from .loader import load_paths
from .locate import with_field_lines
from .model import Severity
from .report import to_json, to_text

__all__ = ["register", "run"]

_FORMATS = ("text", "json", "sarif")


def register(subparsers: Any) -> None:
    """Add the ``audit`` subcommand."""
    parser = subparsers.add_parser(
        "audit",
        help="check manifests (files, directories, - for stdin) against the DRA guardrail rules",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="YAML/JSON file, directory (searched for *.yaml, *.yml, *.json) or - for stdin")
    parser.add_argument("--kubernetes-version", default=DEFAULT_KUBERNETES_VERSION, metavar="V",
                        help=f"target Kubernetes version for CEL and API checks (default {DEFAULT_KUBERNETES_VERSION})")
    parser.add_argument("--format", choices=_FORMATS, default="text", help="output format (default text)")
    parser.add_argument("--fail-on", choices=("error", "warning"), default="error",
                        help="lowest severity that makes the exit code 1 (default error)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    parser.add_argument("--tenant-scope", choices=("file", "set"), default="file",
                        help="DRA009 (several tenants, no sanitizer): judge each file as its own manifest set "
                             "(default; what one `kubectl apply -f` deploys) or all inputs together (set); a "
                             "sanitizer DaemonSet anywhere in the input covers every tenant")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load, audit, report; the exit code follows the module docstring."""
    target = Target.parse(args.kubernetes_version, "--kubernetes-version")
    texts: dict[str, str] = {}
    manifests = load_paths(args.paths, stdin=sys.stdin, texts=texts)
    gc.freeze()  # the manifests live to the end: keep the collector from re-scanning them
    result = audit(manifests, kubernetes_version=target, tenant_scope=args.tenant_scope)
    result = with_field_lines(result, texts)
    if args.format == "json":
        text = to_json(result)
    elif args.format == "sarif":
        from .sarif import to_sarif

        text = json.dumps(to_sarif(result), indent=2) + "\n"
    else:
        text = to_text(result)
    write_output(args.output or None, text)
    failing = result.errors if args.fail_on == Severity.ERROR.value else result.findings
    return 1 if failing else 0
