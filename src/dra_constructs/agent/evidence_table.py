"""``dra-sanitizer evidence``: a node's or one device's barrier history as a text table.

One row per record, oldest first: time (UTC), device, UUID, trigger, result, coverage, bytes
verified / total, fill and verify bandwidth, seconds, the device nodes held (processes found
through ``/proc/*/fd``, ``pid <n> (<owner>): <node>``; ``-`` for none), then the reason (last: it
is the long column). Evidence holds tenant-influenced strings (claim names, reasons quoting them): every
control character is shown escaped (``\\x1b``), so a record cannot move the cursor or recolour
the operator's terminal.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime

from dra_constructs.agent.evidence_read import Evidence, EvidenceRow

__all__ = ["bandwidth", "coverage", "printable", "render_table", "size", "timestamp"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_COLUMNS = ("TIME", "DEVICE", "UUID", "TRIGGER", "RESULT", "COVERAGE", "BYTES", "FILL", "VERIFY", "SECONDS",
            "NODES HELD", "REASON")


def printable(text: str | None) -> str:
    """``text`` with control and bidi-override characters escaped (``-`` for none)."""
    if not text:
        return "-"
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def timestamp(wall: float) -> str:
    """UTC ISO time of a record, ``-`` when the record has none (``started_at`` 0)."""
    if wall <= 0:
        return "-"
    try:
        return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return "-"


def size(n: int) -> str:
    """Bytes in binary units: ``80.0 GiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover - the loop returns


def bandwidth(bps: float | None) -> str:
    """Bytes per second in GB/s (decimal, as HBM peaks are quoted), ``-`` when not measured."""
    return "-" if bps is None else f"{bps / 1e9:.1f} GB/s"


def coverage(row: EvidenceRow) -> str:
    """Coverage of what CUDA can hold, as a percentage (``-`` for a cycle that verified nothing)."""
    return "-" if not row.bytes_verified else f"{row.coverage * 100:.2f}%"


def _cells(row: EvidenceRow) -> tuple[str, ...]:
    verified = f"{size(row.bytes_verified)}/{size(row.bytes_total)}" if row.bytes_total else "-"
    return (timestamp(row.started_at), printable(row.device), printable(row.uuid), printable(row.trigger),
            printable(row.result), coverage(row), verified, bandwidth(row.fill_bytes_per_s),
            bandwidth(row.verify_bytes_per_s), f"{row.seconds:.2f}", printable("; ".join(row.device_nodes)),
            printable(row.reason))


def render_table(evidence: Evidence, rows: Sequence[EvidenceRow] | None = None) -> str:
    """The table of ``rows`` (default: all of ``evidence``), then a line per skipped bad line."""
    chosen = evidence.rows if rows is None else rows
    table = [_COLUMNS, *(_cells(r) for r in chosen)]
    widths = [max(len(line[i]) for line in table) for i in range(len(_COLUMNS) - 1)]
    out = ["  ".join([*(c.ljust(w) for c, w in zip(line[:-1], widths, strict=True)), line[-1]]).rstrip()
           for line in table]
    shown = f"{len(chosen)} of {len(evidence.rows)}" if len(chosen) != len(evidence.rows) else str(len(chosen))
    out.append(f"{shown} record(s) from {printable(evidence.source)} ({evidence.lines} line(s))")
    out.extend(f"skipped line {n}: {printable(problem)}" for n, problem in evidence.bad_lines)
    return "\n".join(out) + "\n"
