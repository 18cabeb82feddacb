"""Run an argparse command line with the project's exit-code contract (shared by both console scripts).

0 success, 1 findings / failed checks (returned by the command), 2 usage or input errors, 130 on
Ctrl-C, 141 when the reader of standard output went away (``| head``), silently, as Unix tools
do. Bad input (:class:`~dra_constructs.errors.DraConstructsError`, unreadable files) becomes one
line on stderr, never a traceback. Pure Python: the node agent's zipapp carries it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from dra_constructs.errors import DraConstructsError

__all__ = ["KEEP_TO_EXIT", "run_parser"]

#: Attribute of the parsed arguments where a command puts what it built (an audit's 200,000 objects) to
#: outlive it: a run with ``exit_at_once`` then ends without freeing it object by object.
KEEP_TO_EXIT = "keep_to_exit"


def run_parser(parser: argparse.ArgumentParser, argv: Sequence[str] | None, prog: str, *,
               exit_at_once: bool = False) -> int:
    """Parse ``argv`` and call the chosen subcommand's ``func(args) -> int``.

    ``exit_at_once`` (a console run, never an in-process caller): once the command returned its exit code
    and its output is flushed, the process exits there (``os._exit``), as mypy does (``util.hard_exit``):
    freeing what the command kept (:data:`KEEP_TO_EXIT`) one object at a time is ~6% of a large
    audit, and no one waits for it. The command's own clean-up (temporary files) is done by then.
    """
    _escape_unencodable()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        code = int(func(args))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit flush
        if exit_at_once:
            sys.stderr.flush()
            os._exit(code)
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
    except MemoryError:
        print(f"{prog}: error: out of memory reading the input (limits: docs/input-limits.md)", file=sys.stderr)
        return 2
    except RecursionError:  # a limit missed somewhere: still the input's fault, never a traceback
        print(f"{prog}: error: input nested too deeply (limits: docs/input-limits.md)", file=sys.stderr)
        return 2


def _escape_unencodable() -> None:
    """Reports never fail on text the terminal cannot encode (lone surrogates): escape it.

    A closed stdout or stderr (``>&-``: Python sets it to ``None``) becomes /dev/null: the exit
    code still tells the result.
    """
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives to the exit
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives to the exit
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):  # a closed or detached stream
                reconfigure(errors="backslashreplace")


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a test's StringIO): nothing left to flush
        pass
