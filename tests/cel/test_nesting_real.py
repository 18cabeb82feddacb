"""The nesting boundary table against the real API server (``dryRun``): one object per row.

Each construct of ``test_nesting.BOUNDARIES`` at cel-go's limit (accepted) and one past it (rejected
with the parser's message), on 1.37 and 1.34, plus the column of an error deep inside parentheses,
the ordered errors of two pieces, literals around cel-cpp's type nesting limit of 13 and macro
bodies around its 32 levels: 63 ResourceClaimTemplates on 1.37, 61 on 1.34. And the rows of
``test_nesting.REACHING`` (indexes, calls and comparisons reaching past 12 levels into deep literals).
"""

from __future__ import annotations

from typing import Any

import pytest
from controlplane.cluster import ControlPlane
from test_nesting import (
    BOUNDARIES,
    REACHING,
    bound_all,
    bound_bind,
    bound_map,
    bound_two,
    bound_wrong,
    nested_lists,
    nested_maps,
)

from dra_constructs.cel import check

pytestmark = pytest.mark.controlplane

PLANES = [pytest.param(minor, marks=pytest.mark.xdist_group(f"kcp-{minor}"), id=minor) for minor in ("1.37", "1.34")]


def _template(index: int, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": f"nesting-{index}", "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.example.com", "selectors": [{"cel": {"expression": expression}}]}}]}}},
    }


def _verdict(plane: ControlPlane, index: int, expression: str) -> tuple[bool, str]:
    resp = plane.create(_template(index, expression))
    if resp.ok:
        return True, ""
    causes = resp.body.get("details", {}).get("causes", [])
    assert resp.status == 422 and causes, resp.body
    return False, "\n".join(c.get("message", "") for c in causes)


@pytest.mark.parametrize("minor", PLANES)
def test_boundary_table_against_the_api_server(request: pytest.FixtureRequest, minor: str) -> None:
    plane: ControlPlane = request.getfixturevalue(f"control_plane_{minor.replace('.', '')}")
    # the 1.34.4 server does not answer a map literal nested 248 deep within the client's 30 s
    # (1.37.2 answers at once): that row is posted to 1.37 only
    rows = [(build.__name__, n, build(n)) for build, limit, _ in BOUNDARIES for n in (limit, limit + 1)
            if not (build is nested_maps and minor == "1.34")]
    rows.append(("deep error", 0, "(device.driver == 'x' || " * 40 + "device.driver == 1" + ")" * 40))
    # past cel-cpp's limits: its type nesting of 13 (literals) and its 32 levels (bound variables)
    rows += [(build.__name__, n, build(n)) for build in (nested_lists, nested_maps) for n in (12, 13, 14, 16, 40)]
    rows += [(build.__name__, n, build(n)) for build in (bound_all, bound_map, bound_bind, bound_two)
             for n in (31, 32, 33, 40)]
    rows.append(("bound_wrong", 40, bound_wrong(40)))
    rows.append(("equal deep lists", 40, "[" * 40 + "1" + "]" * 40 + " == " + "[" * 40 + "1" + "]" * 40))
    rows.append(("unequal deep maps", 30, "{'a': " * 30 + "1" + "}" * 30 + " == " + "{'a': " * 30 + "'b'" + "}" * 30))
    rows.append(("errors in two pieces", 0, "(device.driver == 1 && " * 20 + "(1 + 'a' == 2 && " * 20 + "true"
                 + ")" * 40))
    mismatches = []
    for index, (name, n, expression) in enumerate(rows):
        ours = check(expression, minor)
        accepted, message = _verdict(plane, index, expression)
        if accepted != ours.ok or (not accepted and (ours.error or "") not in message):
            mismatches.append((name, n, accepted, message[-300:], ours.verdict, (ours.error or "")[:300]))
    assert not mismatches, mismatches


@pytest.mark.parametrize("minor", PLANES)
def test_reaching_into_deep_literals_against_the_api_server(request: pytest.FixtureRequest, minor: str) -> None:
    plane: ControlPlane = request.getfixturevalue(f"control_plane_{minor.replace('.', '')}")
    mismatches = []
    for index, (name, expression, verdict, error) in enumerate(REACHING):
        ours = check(expression, minor)
        accepted, message = _verdict(plane, 1000 + index, expression)
        # the server gives the cost error without our estimate: compare its start there
        shown = (ours.error or "") if ours.verdict == "Invalid" else error
        same = (ours.error or "").startswith(error) and shown in message
        if accepted != ours.ok or accepted != (verdict == "OK") or (not accepted and not same):
            mismatches.append((name, accepted, message[-300:], ours.verdict, (ours.error or "")[:300]))
    assert not mismatches, mismatches
