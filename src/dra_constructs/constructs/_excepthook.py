"""An uncaught library error ends a synth with its message, not a Python traceback.

Construct layer. Under ``cdk8s synth`` (or ``python main.py``) a ``DraConstructsError`` - a bad
argument at construction, or the guardrails' ``GuardrailsError`` at synth - already names the
object, field, value and fix; the traceback above it (jsii frames, the library's internals) only
hides that. This hook prints the message, the line of the user's program that led there, and
how to get the traceback (``DRA_CONSTRUCTS_TRACEBACK=1``). The exit status stays 1, as for any
uncaught exception. Installed only over Python's default hook; every other exception goes to it.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from types import TracebackType

from dra_constructs.errors import DraConstructsError

__all__ = ["install"]

TRACEBACK_ENV = "DRA_CONSTRUCTS_TRACEBACK"
_PACKAGE = str(Path(__file__).resolve().parents[1])
#: Installed packages (cdk8s, jsii) and the standard library.
_NOT_THE_USERS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}lib{os.sep}python")


def _user_frame(tb: TracebackType | None) -> traceback.FrameSummary | None:
    """The innermost frame outside the library, cdk8s, jsii and the standard library."""
    def users(frame: traceback.FrameSummary) -> bool:
        path = str(Path(frame.filename).resolve())
        return not path.startswith(_PACKAGE) and not any(part in path for part in _NOT_THE_USERS)

    frames = [f for f in traceback.extract_tb(tb) if users(f)]
    return frames[-1] if frames else None


def _hook(kind: type[BaseException], error: BaseException, tb: TracebackType | None) -> None:
    if not isinstance(error, DraConstructsError) or os.environ.get(TRACEBACK_ENV):
        sys.__excepthook__(kind, error, tb)
        return
    lines = [f"Error: {line}" if i == 0 else f"       {line}" for i, line in enumerate(str(error).splitlines())]
    frame = _user_frame(tb)
    if frame is not None:
        lines.append(f"  at {frame.filename}:{frame.lineno}" + (f": {frame.line.strip()}" if frame.line else ""))
    lines.append(f"  ({TRACEBACK_ENV}=1 shows the Python traceback)")
    print("\n".join(lines), file=sys.stderr)


def install() -> None:
    """Use :func:`_hook` for uncaught exceptions, unless a program or tool installed its own hook."""
    if sys.excepthook is sys.__excepthook__:
        sys.excepthook = _hook
