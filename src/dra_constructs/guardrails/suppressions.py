"""Suppressions: explicit, per object and rule, each with a written reason (pure Python).

They live in one annotation on the object, so they appear in synthesized YAML for reviewers
and the audit command honours the same annotation on any manifest::

    metadata:
      annotations:
        guardrails.dra-constructs.io/suppressions: '[{"rule": "DRA006", "reason": "..."}]'
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dra_constructs.errors import DraConstructsError

__all__ = [
    "SUPPRESSIONS_ANNOTATION",
    "Suppression",
    "parse_suppressions",
    "render_suppressions",
    "require_valid",
]

#: The annotation holding a JSON list of ``{"rule": "DRA00N", "reason": "..."}``.
SUPPRESSIONS_ANNOTATION = "guardrails.dra-constructs.io/suppressions"
#: Rule ids that can never be suppressed (a broken suppression must stay visible).
UNSUPPRESSIBLE = frozenset({"DRA000"})


@dataclass(frozen=True)
class Suppression:
    """Silence ``rule`` on one object because of ``reason``."""

    rule: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "reason": self.reason}


def require_valid(rule: str, reason: str, known_rules: Iterable[str], where: str) -> Suppression:
    """A checked suppression, or :class:`DraConstructsError` naming what is wrong."""
    known = sorted(set(known_rules) - UNSUPPRESSIBLE)
    if not isinstance(rule, str) or rule not in known:
        raise DraConstructsError(where, "rule", rule, "not a suppressible guardrail rule id",
                                 f"use one of {', '.join(known)}")
    if not isinstance(reason, str) or not reason.strip():
        raise DraConstructsError(where, "reason", reason, f"a suppression of {rule} needs a written reason",
                                 "say why the finding does not apply here, e.g. reason=\"single-tenant "
                                 "inference cluster, MPS approved in ticket OPS-123\"")
    return Suppression(rule, reason.strip())


def parse_suppressions(value: Any, known_rules: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """``({rule: reason}, [problems])`` from an annotation value; broken entries are problems."""
    known = set(known_rules)
    try:
        entries = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError as error:
        return {}, [f"the annotation is not JSON ({error.msg} at column {error.colno})"]
    except (ValueError, RecursionError):  # nested past Python's limit, a 5,000-digit number
        return {}, ["the annotation is not a JSON list this audit can read (nested too deeply or a huge number)"]
    if not isinstance(entries, list):
        return {}, ["the annotation must be a JSON list of {\"rule\": ..., \"reason\": ...} objects"]
    suppressions: dict[str, str] = {}
    problems: list[str] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            problems.append(f"entry {i} is not an object with rule and reason")
            continue
        try:
            checked = require_valid(entry.get("rule"), entry.get("reason"), known, f"entry {i}")  # type: ignore[arg-type]
        except DraConstructsError as error:
            problems.append(f"entry {i}: {error.problem} ({error.field}={error.value!r})")
            continue
        suppressions[checked.rule] = checked.reason
    return suppressions, problems


def render_suppressions(suppressions: Iterable[Suppression]) -> str:
    """The annotation value: a JSON list sorted by rule (deterministic output)."""
    unique = {s.rule: s for s in suppressions}
    return json.dumps([unique[rule].to_dict() for rule in sorted(unique)], separators=(", ", ": "))
