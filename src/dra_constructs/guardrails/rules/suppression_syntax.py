"""DRA000: a suppression annotation that is malformed, names no known rule, or gives no reason."""

from __future__ import annotations

from collections.abc import Iterator

from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.facets import POD, SUPPRESSIONS
from dra_constructs.guardrails.manifest import Manifest, as_dict, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity
from dra_constructs.guardrails.suppressions import SUPPRESSIONS_ANNOTATION, parse_suppressions

__all__ = ["RULE"]


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    from dra_constructs.guardrails.rules import RULES_BY_ID  # the pack defines which ids can be suppressed

    places = [("metadata", m.metadata)]
    places += [(pod.metadata_path, pod.metadata) for pod in m.pods
               if pod.metadata_path and pod.metadata is not m.metadata]
    for base, metadata in places:
        annotations = as_dict(metadata.get("annotations"))
        if SUPPRESSIONS_ANNOTATION not in annotations:
            continue
        _, problems = parse_suppressions(annotations[SUPPRESSIONS_ANNOTATION], RULES_BY_ID)
        for problem in problems:
            yield Hit(field_path(base, "annotations", SUPPRESSIONS_ANNOTATION), f"invalid suppression: {problem}")


RULE = Rule(
    id="DRA000",
    name="valid-suppressions",
    severity=Severity.ERROR,
    why="a suppression is a reviewed exception: it must name a rule and give a written reason",
    fix=f'write {SUPPRESSIONS_ANNOTATION}: \'[{{"rule": "DRA006", "reason": "why this is acceptable"}}]\'',
    object_check=_check,
    # facets: reads the suppressions annotation of metadata and of its pods' metadata (only where there are pods)
    fires_on=SUPPRESSIONS | POD,
)
