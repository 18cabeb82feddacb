"""Human-readable and JSON renderings of an audit (pure Python)."""

from __future__ import annotations

import json

from .engine import AuditResult
from .model import Finding

__all__ = ["format_finding", "to_json", "to_text"]


def format_finding(finding: Finding) -> str:
    """``file:line: error DRA001 Kind/ns/name spec.path: message`` plus an indented fix line."""
    where = f"{finding.file}:{finding.line}: " if finding.file and finding.line else (
        f"{finding.file}: " if finding.file else "")
    return (f"{where}{finding.severity.value} {finding.rule} {finding.object} {finding.path}: "
            f"{finding.message}\n    fix: {finding.fix}")


def to_text(result: AuditResult) -> str:
    """Findings, then suppressed findings with their reasons, then a one-line summary."""
    lines = [format_finding(f) for f in result.findings]
    for item in result.suppressed:
        f = item.finding
        lines.append(f"suppressed {f.rule} {f.object} {f.path}: {item.reason}")
    lines.append(
        f"{result.objects_scanned} objects scanned: {len(result.errors)} errors, "
        f"{len(result.warnings)} warnings, {len(result.suppressed)} suppressed"
    )
    return "\n".join(lines) + "\n"


def to_json(result: AuditResult) -> str:
    """The JSON document: ``{"objects_scanned", "findings": [...], "suppressed": [...]}``."""
    return json.dumps(result.to_dict(), indent=2) + "\n"
