"""SARIF 2.1.0 output of the audit, for code-scanning tools (GitHub, GitLab, VS Code SARIF viewer).

The log is assembled by ``sarif-kit``'s builder (rule metadata, stable partial fingerprints,
repo-relative URIs, GitHub's result cap). Suppressed findings are added as results carrying a
SARIF ``suppressions`` entry with the written reason, so viewers show them as reviewed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from sarif_kit.builder import SarifBuilder
from sarif_kit.models import Location
from sarif_kit.models import Result as SarifResult
from sarif_kit.models import Rule as SarifRule

from dra_constructs import __version__
from dra_constructs.guardrails.engine import AuditResult
from dra_constructs.guardrails.model import Finding, Rule
from dra_constructs.guardrails.rules import RULES
from dra_constructs.guardrails.skipped import SkippedInput
from dra_constructs.guardrails.target_inference import TargetChoice

__all__ = ["to_sarif"]

_TOOL = "dra-constructs"
_INFO_URI = "https://pypi.org/project/dra-constructs/"
_LEVELS = {"error": "error", "warning": "warning"}


def _builder(rules: Sequence[Rule], src_root: str) -> SarifBuilder:
    builder = SarifBuilder(_TOOL, tool_version=__version__, information_uri=_INFO_URI, src_root=src_root)
    for rule in rules:
        builder.add_rule(SarifRule(
            id=rule.id,
            name=rule.name,
            short_description=rule.why,
            full_description=f"{rule.why}. Fix: {rule.fix}",
            default_level=_LEVELS[rule.severity.value],
        ))
    return builder


def _result(finding: Finding) -> SarifResult:
    uri = finding.file or "<synthesized>"
    return SarifResult(
        rule_id=finding.rule,
        message=f"{finding.object}: {finding.path}: {finding.message}. Fix: {finding.fix}",
        location=Location(uri=uri, start_line=finding.line),
        level=_LEVELS[finding.severity.value],
        properties={"object": finding.object, "fieldPath": finding.path},
    )


def _notification(item: SkippedInput, root: str) -> dict[str, Any]:
    """A skipped file as a SARIF tool execution notification (not a result: no rule was broken)."""
    uri = os.path.relpath(item.file, root) if os.path.isabs(item.file) else item.file
    location: dict[str, Any] = {"artifactLocation": {"uri": uri.replace(os.sep, "/")}}
    if item.line:
        location["region"] = {"startLine": item.line}
    return {"level": "warning", "message": {"text": f"skipped: {item.reason}; {item.hint}"},
            "locations": [{"physicalLocation": location}]}


def to_sarif(result: AuditResult, *, src_root: str | None = None,
             skipped: Sequence[SkippedInput] = (), target: TargetChoice | None = None) -> dict[str, Any]:
    """The audit as a SARIF 2.1.0 log (a JSON-ready dict); file URIs relative to ``src_root`` (cwd).

    Skipped files are ``invocations[0].toolExecutionNotifications``; the target Kubernetes release
    (and why it was chosen) is the run's ``properties.target``.
    """
    root = src_root if src_root is not None else os.getcwd()
    builder = _builder(RULES, root)
    builder.add_results(_result(f) for f in result.findings)
    log: dict[str, Any] = builder.build()
    if result.suppressed:
        # Same rule order in both builders, so ruleIndex values agree when the results are merged.
        extra = _builder(RULES, root)
        extra.add_results(_result(s.finding) for s in result.suppressed)
        suppressed = extra.build()["runs"][0]["results"]
        for entry, item in zip(suppressed, result.suppressed, strict=True):
            entry["suppressions"] = [{"kind": "inSource", "justification": item.reason}]
        log["runs"][0]["results"].extend(suppressed)
    run = log["runs"][0]
    run["properties"] = {"objectsScanned": result.objects_scanned,
                         **({"target": target.to_dict()} if target is not None else {})}
    if skipped:
        run["invocations"] = [{"executionSuccessful": True,
                               "toolExecutionNotifications": [_notification(s, root) for s in skipped]}]
    return log
