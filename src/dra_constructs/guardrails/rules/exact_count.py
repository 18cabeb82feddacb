"""DRA003: workload device requests use ``allocationMode: ExactCount`` with an explicit count."""

from __future__ import annotations

from collections.abc import Iterator

from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.facets import RESOURCE_API
from dra_constructs.guardrails.manifest import Manifest, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity

__all__ = ["RULE"]

#: Modes of the removed v1alpha2 claim API; DRA007 reports those with the shape to use.
_REMOVED_MODES = frozenset({"WaitForFirstConsumer", "Immediate"})


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    for request in m.requests():
        mode = request.fields.get("allocationMode")
        count = request.fields.get("count")
        label = f"request {request.name!r}"
        if isinstance(mode, str) and mode in _REMOVED_MODES:
            continue
        if mode == "All":
            if request.admin_access:
                continue  # a node agent watching every device: the documented exception
            yield Hit(
                field_path(request.path, "allocationMode"),
                f"{label} asks for All matching devices: a workload then takes every device of the "
                "pool (and on 1.32 may even land on a node with none)",
            )
            continue
        if mode is not None and mode != "ExactCount":
            yield Hit(field_path(request.path, "allocationMode"),
                      f"{label} has allocationMode {mode!r}, which is neither ExactCount nor All")
            continue
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
            yield Hit(field_path(request.path, "count"),
                      f"{label} has count {count!r}; ExactCount needs a whole number of at least 1")
            continue
        missing = [f for f, v in (("allocationMode: ExactCount", mode), ("count", count)) if v is None]
        if missing:
            yield Hit(
                request.path,
                f"{label} leaves {' and '.join(missing)} to the API defaults; state the number of "
                "devices the workload needs",
                severity=Severity.WARNING,
            )


RULE = Rule(
    id="DRA003",
    name="exact-count-requests",
    severity=Severity.ERROR,
    why="a workload must ask for an exact number of devices; All grabs every matching device "
        "(adminAccess requests of node agents are the exception)",
    fix="set allocationMode: ExactCount and count: N (N >= 1) on the request",
    object_check=_check,
    # facets: reads requests(): empty unless claim_spec, which needs is_resource_api
    fires_on=RESOURCE_API,
)
