"""Reading user-named inputs (a path, or ``-`` for standard input) and writing reports, hardened.

Every file the library reads goes through :func:`read_bytes` / :func:`read_input`: only regular
files are opened (FIFOs, devices, sockets and directories are refused from ``stat`` before any
read; the file is opened non-blocking and checked again with ``fstat`` against a swap), reads
are bounded (``limit + 1`` bytes, stdin too), and text must be UTF-8 (a BOM is dropped). Every
problem is a :class:`~dra_constructs.errors.DraConstructsError` naming the file (and line for
bad bytes) and the limit, which the command line turns into exit 2. Limits: docs/input-limits.md.
Pure Python (the node agent's zipapp carries it).
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from dra_constructs.errors import DraConstructsError

__all__ = [
    "MAX_INPUT_BYTES",
    "STDIN",
    "ReadBudget",
    "decode_text",
    "display_name",
    "read_bytes",
    "read_input",
    "write_output",
]

#: Bytes one command (or library call) reads in total, all files and stdin together. A
#: ``kubectl get -A -o yaml`` of a large cluster is a few MiB; 32 MiB of YAML parse to about
#: 1.2 GB of Python objects, which keeps a run under 2 GB of memory.
MAX_INPUT_BYTES = 32 * 1024 * 1024
#: The path argument meaning standard input.
STDIN = "-"

_BOM = b"\xef\xbb\xbf"
_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def display_name(source: str | Path) -> str:
    """How messages name ``source``: ``<stdin>`` for ``-``, else the path as given."""
    return "<stdin>" if str(source) == STDIN else str(source)


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 and n % (1024 * 1024) == 0 else f"{n} bytes"


@dataclass
class ReadBudget:
    """Bytes left for one command's inputs (shared by every file it reads).

    :meth:`of` builds one for a limit; a limit of ``None`` means no total limit (``left`` is then
    ``None`` and every read takes the whole input).
    """

    left: int | None = MAX_INPUT_BYTES
    limit: int | None = MAX_INPUT_BYTES

    @classmethod
    def of(cls, limit: int | None) -> ReadBudget:
        """A budget of ``limit`` bytes in all (``None``: unlimited)."""
        return cls(limit, limit)

    @property
    def read_size(self) -> int:
        """What one read may ask for: the bytes left plus one (to see an overrun), or -1 for all."""
        return -1 if self.left is None else self.left + 1

    def check(self, size: int, where: str, field: str) -> None:
        """Refuse (exit 2) an input of ``size`` bytes that does not fit in what is left."""
        if self.left is None or self.limit is None:
            return
        if size > self.left:
            spent = self.limit - self.left
            already = f" ({_size(spent)} already read from other inputs)" if spent else ""
            raise DraConstructsError(where, field, f">{_size(self.left)}",
                                     f"input too large: the limit is {_size(self.limit)} per run{already}",
                                     "split the input into several runs, or raise the limit (audit --max-input-bytes; "
                                     "limits: docs/input-limits.md)")

    def take(self, size: int, where: str, field: str) -> None:
        """Spend ``size`` bytes (refused like :meth:`check` when they do not fit)."""
        self.check(size, where, field)
        if self.left is not None:
            self.left -= size


def _refuse_special(mode: int, where: str, field: str, expected: str) -> None:
    for test, kind in _KINDS:
        if test(mode):
            raise DraConstructsError(where, field, where, f"{kind}, not a regular file: refused without reading",
                                     f"pass a regular {expected}")
    if not stat.S_ISREG(mode):
        raise DraConstructsError(where, field, where, "not a regular file: refused without reading",
                                 f"pass a regular {expected}")


def _read_stdin(stdin: IO[str] | IO[bytes] | None, budget: ReadBudget, field: str, expected: str) -> bytes:
    where = "<stdin>"
    if stdin is None or getattr(stdin, "closed", False):
        raise DraConstructsError(where, field, "-", "standard input is closed",
                                 f"pipe a {expected} into the command, or pass a file path instead of -")
    raw: IO[bytes] | None = getattr(stdin, "buffer", None)
    try:
        if raw is not None:
            data = raw.read(budget.read_size)
        else:
            chunk = stdin.read(budget.read_size)
            data = chunk.encode("utf-8", "surrogatepass") if isinstance(chunk, str) else bytes(chunk)
    except (OSError, ValueError) as error:  # EBADF, or a stream closed underneath
        raise DraConstructsError(where, field, "-", f"cannot read standard input ({error})",
                                 f"pipe a {expected} into the command, or pass a file path") from None
    budget.take(len(data), where, field)
    return data


def read_bytes(source: str | Path, field: str, expected: str, *, budget: ReadBudget | None = None,
               stdin: IO[str] | IO[bytes] | None = None) -> bytes:
    """The bytes of ``source`` (``-``: ``stdin``, default ``sys.stdin``), bounded by ``budget``."""
    budget = budget if budget is not None else ReadBudget()
    if str(source) == STDIN:
        return _read_stdin(stdin if stdin is not None else sys.stdin, budget, field, expected)
    where = str(source)
    try:
        _refuse_special(os.stat(source).st_mode, where, field, expected)  # follows links: a link to /dev/zero
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise DraConstructsError(where, field, where, f"cannot read the file ({error.strerror or error})",
                                 f"pass an existing, readable {expected}") from None
    with os.fdopen(fd, "rb") as handle:
        try:
            status = os.fstat(fd)
            _refuse_special(status.st_mode, where, field, expected)  # swapped between stat and open
            budget.check(status.st_size, where, field)  # refused before reading
            data = handle.read(budget.read_size)
        except OSError as error:
            raise DraConstructsError(where, field, where, f"cannot read the file ({error.strerror or error})",
                                     f"pass an existing, readable {expected}") from None
    budget.take(len(data), where, field)
    return data


def decode_text(data: bytes, where: str, field: str, expected: str) -> str:
    """UTF-8 text without a leading BOM; bad bytes name their line (``file:line``)."""
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise DraConstructsError(f"{where}:{line}", field, data[error.start:error.start + 4],
                                 f"not UTF-8 text ({error.reason} at byte {error.start})",
                                 f"pass a UTF-8 {expected}") from None


def read_input(source: str | Path, field: str, expected: str, *, budget: ReadBudget | None = None,
               stdin: IO[str] | IO[bytes] | None = None) -> str:
    """The UTF-8 text of ``source`` (``-``: stdin); ``expected`` names the input in the fix."""
    data = read_bytes(source, field, expected, budget=budget, stdin=stdin)
    return decode_text(data, display_name(source), field, expected)


def write_output(path: str | None, text: str, field: str = "--output") -> None:
    """Write ``text`` to ``path`` (``None``: stdout); what the encoding cannot hold is escaped."""
    if path is None:
        stream = sys.stdout
        if stream is None:
            return
        try:
            stream.write(text)
        except UnicodeEncodeError:
            encoding = getattr(stream, "encoding", None) or "utf-8"
            stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
        stream.flush()
        return
    try:
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as out:
            out.write(text)
    except OSError as error:
        raise DraConstructsError(path, field, path, f"cannot write the report ({error.strerror or error})",
                                 "pass a writable file path (its directory must exist)") from None
