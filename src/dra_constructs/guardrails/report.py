"""Human-readable and JSON renderings of an audit (pure Python)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from dra_constructs.guardrails.engine import AuditResult
from dra_constructs.guardrails.model import Finding
from dra_constructs.guardrails.skipped import SkippedInput
from dra_constructs.guardrails.target_inference import TargetChoice

__all__ = ["format_finding", "rule_summary", "to_json", "to_text"]


def format_finding(finding: Finding) -> str:
    """``file:line: error DRA001 Kind/ns/name spec.path: message`` plus an indented fix line.

    A finding about the manifest set adds an ``objects:`` line (count and sample); a finding's
    details follow as ``- `` lines.
    """
    where = f"{finding.file}:{finding.line}: " if finding.file and finding.line else (
        f"{finding.file}: " if finding.file else "")
    objects = ""
    if finding.sample:
        more = finding.count - len(finding.sample)
        objects = (f"\n    objects: {finding.count:,}: {', '.join(finding.sample)}"
                   + (f" and {more:,} more" if more > 0 else ""))
    details = "".join(f"\n    - {line}" for line in finding.details)
    return (f"{where}{finding.severity.value} {finding.rule} {finding.object} {finding.path}: "
            f"{finding.message}{objects}\n    fix: {finding.fix}{details}")


def rule_summary(findings: Sequence[Finding]) -> list[str]:
    """One line per rule with findings, errors first: ``DRA001 error: 12 findings (12 objects)``."""
    by_rule: dict[tuple[int, str, str], list[int]] = {}
    for f in findings:
        counts = by_rule.setdefault((f.severity.rank, f.rule, f.severity.value), [0, 0])
        counts[0] += 1
        counts[1] += f.count
    return [f"{rule} {severity}: {n:,} finding{'s' if n != 1 else ''} ({objects:,} object"
            f"{'s' if objects != 1 else ''})" for (_, rule, severity), (n, objects) in sorted(by_rule.items())]


def to_text(result: AuditResult, skipped: Sequence[SkippedInput] = (), target: TargetChoice | None = None, *,
            max_findings: int | None = None) -> str:
    """The target (when given), a summary line per rule, the findings (at most ``max_findings``, the
    rest counted), suppressed findings with their reasons, skipped files, then a one-line summary."""
    shown = result.findings if max_findings is None else result.findings[:max_findings]
    lines = [target.header()] if target is not None else []
    lines += rule_summary(result.findings)
    lines += [format_finding(f) for f in shown]
    if len(shown) < len(result.findings):
        lines.append(f"... {len(result.findings) - len(shown):,} more findings not shown (--max-findings "
                     f"{max_findings}; --format json lists all)")
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
