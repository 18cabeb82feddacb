"""DRA017: no claim tolerates the sanitizer's own device taint (it would get quarantined devices).

The sanitizer's guard and quarantine are a DeviceTaintRule with key ``sanitizer.dra-constructs.io/barrier``
(``agent.config.DEFAULT_TAINT_KEY``; kept equal by a test, the audit path does not import the agent).
A request (or ``firstAvailable`` subrequest) that tolerates it is allocated devices that failed their
barrier or are mid-barrier. A toleration matches it when its key is that key, or when it has no key
and operator ``Exists`` (a toleration of every taint). ``adminAccess`` requests are exempt: the API
server admits them only in namespaces labelled for admin access (node agents), and they
never take a device away from a tenant.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.facets import RESOURCE_API
from dra_constructs.guardrails.manifest import Manifest, as_dict, as_list, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity

__all__ = ["RULE", "SANITIZER_TAINT_KEY", "tolerates_barrier"]

#: The key of the sanitizer agent's DeviceTaintRules (guard and quarantine).
SANITIZER_TAINT_KEY = "sanitizer.dra-constructs.io/barrier"


def tolerates_barrier(toleration: Mapping[str, Any], key: str = SANITIZER_TAINT_KEY) -> bool:
    """Whether a device toleration tolerates the taint ``key`` (of any value and effect)."""
    tkey = toleration.get("key")
    if tkey == key:
        return True
    return tkey in (None, "") and toleration.get("operator") == "Exists"


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    for request in m.requests():
        if request.admin_access:
            continue
        for i, raw in enumerate(as_list(request.fields.get("tolerations"))):
            toleration = as_dict(raw)
            if tolerates_barrier(toleration):
                what = f"key {SANITIZER_TAINT_KEY!r}" if toleration.get("key") else "every key (operator Exists)"
                yield Hit(field_path(request.path, "tolerations", i),
                          f"request {request.name!r} tolerates the sanitizer's device taint ({what}): it can be "
                          "allocated devices that are quarantined or still mid-barrier",
                          fix=f"drop this toleration, or give it another key than {SANITIZER_TAINT_KEY}")


RULE = Rule(
    id="DRA017",
    name="no-sanitizer-taint-toleration",
    severity=Severity.ERROR,
    why="the sanitizer keeps dirty and mid-barrier devices out of service with a device taint; a claim that "
        "tolerates it gets them, with the previous tenant's data or processes",
    fix=f"remove device tolerations of {SANITIZER_TAINT_KEY} (and key-less operator Exists tolerations) from "
        "tenant claims and templates",
    object_check=_check,
    # facets: reads requests(): empty unless is_resource_api
    fires_on=RESOURCE_API,
)
