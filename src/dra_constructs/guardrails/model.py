"""Data types of the guardrails: severities, rules, hits and findings (pure Python)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dra_constructs.guardrails.context import AuditContext
    from dra_constructs.guardrails.manifest import Manifest

__all__ = ["SAMPLE_SIZE", "Finding", "Hit", "Rule", "Severity", "SuppressedFinding"]

#: Object ids a finding about the manifest set lists (the rest is counted).
SAMPLE_SIZE = 10


class Severity(StrEnum):
    """How bad a finding is. Only ``error`` fails a synth or an audit (exit code 1)."""

    ERROR = "error"
    WARNING = "warning"

    @property
    def rank(self) -> int:
        """Sort key: errors first."""
        return 0 if self is Severity.ERROR else 1


@dataclass(frozen=True)
class Hit:
    """One violation a rule found in one object; the engine turns it into a :class:`Finding`.

    ``severity`` overrides the rule's default (a rule may report a softer variant, for
    example an implicit default that should be made explicit). ``fix`` overrides the rule's.
    ``details`` are lines too long for the message (who contributes what): JSON and text list them.
    """

    path: str
    message: str
    severity: Severity | None = None
    fix: str | None = None
    details: tuple[str, ...] = ()
    #: Hits of one rule with the same ``group`` (and message) are one finding about the manifest
    #: set, with the count and a sample of the objects (DRA009: one per set, not one per workload).
    group: str | None = None


#: A per-object check: the object, the whole audit context -> violations.
ObjectCheck = Callable[["Manifest", "AuditContext"], Iterable[Hit]]
#: A check over the whole manifest set: context -> (object, violation) pairs; the object may be a sequence of
#: objects that all have the violation (a shape's members: ``AuditContext.groups``).
SetCheck = Callable[["AuditContext"], Iterable[tuple["Manifest | Sequence[Manifest]", Hit]]]


@dataclass(frozen=True)
class Rule:
    """A named compliance rule (cdk-nag style): id, default severity, one-line why and fix."""

    id: str
    name: str
    severity: Severity
    why: str
    fix: str
    object_check: ObjectCheck | None = None
    set_check: SetCheck | None = None
    #: The object facets (:mod:`~dra_constructs.guardrails.facets`, a bit set) without which ``object_check``
    #: yields nothing: the engine skips it for objects that have none of them. ``None``: any object.
    fires_on: int | None = None


@dataclass(frozen=True, order=True)
class Finding:
    """One violation of one rule by one object, ready for reporting.

    ``object`` is ``Kind/namespace/name`` (an empty namespace for cluster-scoped kinds);
    ``file`` and ``line`` locate the object's document when it came from a file;
    ``path`` is the field path inside the object (``spec.containers[0].env[1]``).
    A finding about the manifest set (a grouped :class:`Hit`) names its first object and carries
    ``count`` (the objects it concerns) and ``sample`` (the first :data:`SAMPLE_SIZE` of their ids).
    """

    sort_key: tuple[str, int, int, int, str, str] = field(repr=False, compare=True)
    rule: str = field(compare=False)
    severity: Severity = field(compare=False)
    object: str = field(compare=False)
    kind: str = field(compare=False)
    namespace: str = field(compare=False)
    name: str = field(compare=False)
    file: str | None = field(compare=False)
    line: int | None = field(compare=False)
    path: str = field(compare=False)
    message: str = field(compare=False)
    fix: str = field(compare=False)
    details: tuple[str, ...] = field(compare=False, default=())
    count: int = field(default=1, compare=False)
    sample: tuple[str, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of the audit output (``sort_key`` left out; ``details`` only when there are
        some; ``count``/``sample`` when grouped)."""
        grouped = {"count": self.count, "sample": list(self.sample)} if self.sample else {}
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "object": self.object,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "file": self.file,
            "line": self.line,
            "path": self.path,
            "message": self.message,
            "fix": self.fix,
            **({"details": list(self.details)} if self.details else {}),
            **grouped,
        }


@dataclass(frozen=True)
class SuppressedFinding:
    """A finding an explicit, reasoned suppression on its object silenced."""

    finding: Finding
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """The finding's JSON shape plus ``reason``."""
        return {**self.finding.to_dict(), "reason": self.reason}
