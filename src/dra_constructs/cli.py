"""The ``dra-constructs`` command: one entry point, one subcommand module per capability.

Each subcommand module exposes ``register(subparsers)`` which adds its parser and sets
``func`` (``argparse.Namespace -> int`` exit code). Exit codes are a stable contract:
0 success, 1 findings / failed checks, 2 usage or input errors. No traceback reaches the user
for bad input: :class:`~dra_constructs.errors.DraConstructsError` becomes a one-line message.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from dra_constructs import __version__
from dra_constructs._cli_runner import run_parser

__all__ = ["main"]

#: Modules that contribute subcommands, in help order.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "dra_constructs.catalog.cli",
    "dra_constructs.guardrails.cli",
    "dra_constructs.cel.cli",
    "dra_constructs.fit.cli",
)

#: Every top-level command: its module and its one-line help (the module registers the same help;
#: tests/test_cli_fast_help.py checks they agree). ``dra-constructs --help`` prints these without
#: importing the modules (catalog, CEL and rules cost ~0.5 s of imports); a command imports only its own.
COMMANDS: dict[str, tuple[str, str]] = {
    "catalog": ("dra_constructs.catalog.cli", "list the GPU catalog, or print its synthetic ResourceSlices"),
    "audit": ("dra_constructs.guardrails.cli",
              "check manifests (files, directories, - for stdin) against the DRA guardrail rules"),
    "rules": ("dra_constructs.guardrails.cli", "list the guardrail rules (id, severity, what and why)"),
    "cel": ("dra_constructs.cel.cli", "check DRA CEL selectors like the API server, or match them against devices"),
    "fit": ("dra_constructs.fit.cli", "allocate the claims of manifests together against ResourceSlices, node by node"),
}


class _ArgumentParser(argparse.ArgumentParser):
    """argparse exits with 2 on usage errors, which is the contract; keep messages short."""


DESCRIPTION = ("Check Kubernetes manifests and DRA CEL selectors for GPU workloads before they reach a "
               "cluster, and look up the NVIDIA GPU catalog.")
EPILOG = ("exit codes: 0 OK, 1 findings or failed checks, 2 usage or input errors.\n"
          "examples:\n"
          "  dra-constructs audit dist/                 check synthesized manifests\n"
          "  kubectl get pods -A -o yaml | dra-constructs audit -\n"
          "  dra-constructs rules                       what the guardrails check\n"
          "  dra-constructs cel check \"device.attributes['gpu.nvidia.com'].profile == '1g.10gb'\"\n"
          "  dra-constructs catalog --gpu H100_80GB\n"
          "  dra-constructs fit --slices slices.yaml claims.yaml   can the claims be allocated together?")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser: every subcommand in full, or (``command`` given) only that one's module in full.

    With ``command``, the other commands get a stub parser carrying their help line, so
    ``dra-constructs --help`` lists them all without importing their modules.
    """
    parser = _ArgumentParser(prog="dra-constructs", description=DESCRIPTION, epilog=EPILOG,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"dra-constructs {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_ArgumentParser)
    if command is None:
        for module_name in SUBCOMMAND_MODULES:
            importlib.import_module(module_name).register(subparsers)
        return parser
    wanted = COMMANDS.get(command, ("", ""))[0]
    loaded = False
    for name, (module_name, help_line) in COMMANDS.items():
        if module_name == wanted:
            if not loaded:
                importlib.import_module(module_name).register(subparsers)
                loaded = True
        else:
            subparsers.add_parser(name, help=help_line)
    return parser


def _command(argv: Sequence[str]) -> str:
    """The top-level command word of ``argv`` ('' for none: ``--help``, ``--version``, no arguments)."""
    return next((arg for arg in argv if not arg.startswith("-")), "")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code (given no ``argv``, as the console script and
    ``python -m`` call it, the process exits with it as soon as the command is done)."""
    args = list(sys.argv[1:] if argv is None else argv)
    return run_parser(build_parser(_command(args)), args, "dra-constructs", exit_at_once=argv is None)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
