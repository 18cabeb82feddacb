"""Human-readable and JSON renderings of an audit (pure Python)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from dra_constructs.guardrails.engine import AuditResult
from dra_constructs.guardrails.model import Finding
from dra_constructs.guardrails.skipped import SkippedInput
from dra_constructs.guardrails.target_inference import TargetChoice

__all__ = ["format_finding", "to_json", "to_text"]


def format_finding(finding: Finding) -> str:
    """``file:line: error DRA001 Kind/ns/name spec.path: message`` plus an indented fix line (and details)."""
    where = f"{finding.file}:{finding.line}: " if finding.file and finding.line else (
        f"{finding.file}: " if finding.file else "")
    details = "".join(f"\n    - {line}" for line in finding.details)
    return (f"{where}{finding.severity.value} {finding.rule} {finding.object} {finding.path}: "
            f"{finding.message}\n    fix: {finding.fix}{details}")


def to_text(result: AuditResult, skipped: Sequence[SkippedInput] = (), target: TargetChoice | None = None) -> str:
    """The target (when given), findings, suppressed findings with their reasons, skipped files, then a
    one-line summary."""
    lines = [target.header()] if target is not None else []
    lines += [format_finding(f) for f in result.findings]
    for item in result.suppressed:
        f = item.finding
        lines.append(f"suppressed {f.rule} {f.object} {f.path}: {item.reason}")
    lines.extend(str(s) for s in skipped)
    summary = (f"{result.objects_scanned} objects scanned: {len(result.errors)} errors, "
               f"{len(result.warnings)} warnings, {len(result.suppressed)} suppressed")
    lines.append(summary + (f", {len(skipped)} files skipped" if skipped else ""))
    return "\n".join(lines) + "\n"


def to_json(result: AuditResult, skipped: Sequence[SkippedInput] = (), target: TargetChoice | None = None) -> str:
    """The JSON document: ``{"target"?, "objects_scanned", "findings": [...], "suppressed": [...], "skipped": [...]}``
    (``target``: ``{"kubernetesVersion", "source", "reason"}``)."""
    head = {"target": target.to_dict()} if target is not None else {}
    return json.dumps({**head, **result.to_dict(), "skipped": [s.to_dict() for s in skipped]}, indent=2) + "\n"
