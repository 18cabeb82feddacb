"""Reading a node's evidence file (JSON lines of :class:`~.evidence.EvidenceRecord`) for reports.

The file is streamed line by line (it grows for the node's whole life): only the fields a
report shows are kept, as :class:`EvidenceRow`. Only a regular file is opened (a FIFO or a
directory is refused before any read) and a line is bounded (:data:`MAX_LINE_BYTES`). A line
that is not JSON, or not an evidence record, is a :class:`~dra_constructs.errors.DraConstructsError`
naming the file and the line number, unless ``skip_bad`` asks to list it in
:attr:`Evidence.bad_lines` instead (a crash mid-append leaves a torn last line).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from dra_constructs.agent.evidence import EvidenceRecord
from dra_constructs.errors import DraConstructsError

__all__ = ["MAX_LINE_BYTES", "Evidence", "EvidenceRow", "read_evidence"]

#: One record is a few KB; a cycle with thousands of foreign processes stays far below this.
MAX_LINE_BYTES = 4 * 1024 * 1024
_FIX = "repair or delete that line (a crash mid-append leaves a torn last line), or pass --skip-bad-lines"


@dataclass(frozen=True)
class EvidenceRow:
    """What a report shows of one record (tenant-influenced strings unescaped: the renderer escapes)."""

    line: int
    started_at: float
    node: str
    device: str
    uuid: str
    kind: str
    trigger: str
    result: str
    reason: str | None
    claim: str | None
    tenant_namespace: str | None
    coverage: float
    coverage_of_total: float | None
    bytes_total: int
    bytes_verified: int
    fill_bytes_per_s: float | None
    verify_bytes_per_s: float | None
    seconds: float
    taint: str | None
    warnings: tuple[str, ...]
    #: Processes found holding the device's nodes through ``/proc/*/fd`` (not in NVML's lists or beside
    #: it): ``pid <n> (<owner>): <node>, ...`` per process, from the record's ``foreign_processes``.
    device_nodes: tuple[str, ...] = ()

    @classmethod
    def of(cls, record: EvidenceRecord, line: int) -> EvidenceRow:
        """The row of ``record`` (read from line ``line``)."""
        return cls(
            line=line, started_at=record.started_at, node=record.node, device=record.device, uuid=record.uuid,
            kind=record.kind, trigger=record.trigger, result=record.result, reason=record.reason,
            claim=record.claim, tenant_namespace=record.tenant_namespace, coverage=record.coverage,
            coverage_of_total=record.coverage_of_total, bytes_total=record.bytes_total,
            bytes_verified=record.bytes_verified, fill_bytes_per_s=record.fill_bytes_per_s,
            verify_bytes_per_s=record.verify_bytes_per_s, seconds=sum(record.phase_seconds.values()),
            taint=record.taint, warnings=tuple(record.warnings), device_nodes=_device_nodes(record),
        )


def _device_nodes(record: EvidenceRecord) -> tuple[str, ...]:
    """``pid <n> (<owner>): <nodes>`` of each process the record saw holding the device's nodes."""
    held = []
    for process in record.foreign_processes:
        nodes = process.get("device_nodes") or []
        if nodes:
            held.append(f"pid {process.get('pid')} ({process.get('owner') or process.get('owner_kind')}): "
                        f"{', '.join(str(n) for n in nodes)}")
    return tuple(held)


@dataclass
class Evidence:
    """The rows read (by start time, then file order); with ``skip_bad``, the lines skipped (number, problem)."""

    source: str
    rows: list[EvidenceRow] = field(default_factory=list)
    bad_lines: list[tuple[int, str]] = field(default_factory=list)
    lines: int = 0


def _problem(raw: bytes) -> tuple[str, EvidenceRecord | None]:
    """(problem, record): the record of one line, or what is wrong with it."""
    if len(raw.rstrip(b"\r\n")) > MAX_LINE_BYTES:
        return f"line longer than {MAX_LINE_BYTES} bytes", None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        return f"not JSON ({str(error)[:120]})", None
    try:
        return "", EvidenceRecord.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        return f"not an evidence record: {where}: {first['msg']}", None


def _open(path: Path) -> int:
    where = str(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise DraConstructsError(where, "evidence_file", where, "no such file",
                                 "pass --file PATH, or --config with the agent's evidence_file") from None
    if not stat.S_ISREG(info.st_mode):
        raise DraConstructsError(where, "evidence_file", where, "not a regular file",
                                 "pass the evidence JSONL file the agent appends to")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped between stat and open
        os.close(fd)
        raise DraConstructsError(where, "evidence_file", where, "not a regular file",
                                 "pass the evidence JSONL file the agent appends to")
    return fd


def read_evidence(path: str | Path, *, device: str | None = None, skip_bad: bool = False) -> Evidence:
    """The records of ``path``; ``device`` keeps those whose device name or UUID is it."""
    evidence = Evidence(str(path))
    with open(_open(Path(path)), "rb") as handle:
        for number, raw in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), start=1):
            evidence.lines = number
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):  # drain the rest of an over-long line
                while (rest := handle.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                    pass
            if not raw.strip():
                continue
            problem, record = _problem(raw)
            if record is None:
                if not skip_bad:
                    shown = raw[:80].rstrip(b"\r\n").decode("utf-8", "replace")
                    raise DraConstructsError(f"{path}:{number}", "line", shown, problem, _FIX)
                evidence.bad_lines.append((number, problem))
                continue
            if device is None or device in (record.device, record.uuid):
                evidence.rows.append(EvidenceRow.of(record, number))
    evidence.rows.sort(key=lambda r: (r.started_at, r.line))  # appended at each cycle's end: by start
    return evidence
