"""Run an argparse command line with the project's exit-code contract (shared by both console scripts).

0 success, 1 findings / failed checks (returned by the command), 2 usage or input errors, 130 on
Ctrl-C, 141 when the reader of standard output went away (``| head``), silently, as Unix tools
do. Bad input (:class:`~dra_constructs.errors.DraConstructsError`, unreadable files) becomes one
line on stderr, never a traceback. Pure Python: the node agent's zipapp carries it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .errors import DraConstructsError

__all__ = ["run_parser"]


def run_parser(parser: argparse.ArgumentParser, argv: Sequence[str] | None, prog: str) -> int:
    """Parse ``argv`` and call the chosen subcommand's ``func(args) -> int``."""
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        code = int(func(args))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit flush
        return code
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except DraConstructsError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"{prog}: error: {error.filename or ''}: {error.strerror or error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a test's StringIO): nothing left to flush
        pass
