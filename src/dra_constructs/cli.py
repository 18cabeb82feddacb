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

from . import __version__
from ._cli_runner import run_parser

__all__ = ["main"]

#: Modules that contribute subcommands, in help order.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "dra_constructs.catalog.cli",
    "dra_constructs.guardrails.cli",
    "dra_constructs.cel.cli",
    "dra_constructs.fit.cli",
)


class _ArgumentParser(argparse.ArgumentParser):
    """argparse exits with 2 on usage errors, which is the contract; keep messages short."""


def build_parser() -> argparse.ArgumentParser:
    """The full parser with every registered subcommand."""
    parser = _ArgumentParser(prog="dra-constructs", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"dra-constructs {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_ArgumentParser)
    for module_name in SUBCOMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    return run_parser(build_parser(), argv, "dra-constructs")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
