"""``cel.block`` and multi-error ordering against the real API server (``dryRun``).

The DRA environment declares ``ext.Bindings(ext.BindingsVersion(0))`` (dynamic-resource-allocation
``cel/compile.go``): ``cel.bind`` only. Version 1 would add cel-go's ``cel.@block`` (an optimizer
internal); the ``cel.block``/``cel.index`` forms are test macros of cel-go, in no Kubernetes
environment. So ``cel.block(...)`` is the member call ``block`` on an undeclared ``cel``, at every
version, shallow or deep, and its errors print sorted by line and column, as cel-go prints them.
"""

from __future__ import annotations

import pytest
from controlplane.cluster import ControlPlane
from test_nesting_real import PLANES, _verdict

from dra_constructs.cel import check

pytestmark = pytest.mark.controlplane

ROWS = [
    "cel.block([1], cel.index(0) > 0)",
    "cel.block([device.driver], cel.index(0) == 'a')",
    "cel.block([1], " + "(" * 40 + "cel.index(0) > 0" + ")" * 40 + ")",
    "cel.block([1], " + "(device.driver == 'a' || " * 40 + "cel.index(0) > 0" + ")" * 40 + ")",
    "cel.bind(x, 1, " + "(x > 0 && " * 40 + "cel.index(0) > 0" + ")" * 40 + ")",
    "cel.index(0) > 0",
    "cel.@block([1], true)",
    "a.b(c.d()) && e.f(1)",
    "x.y(1) == z",
]


@pytest.mark.parametrize("minor", PLANES)
def test_cel_block_is_refused_as_the_api_server_refuses_it(request: pytest.FixtureRequest, minor: str) -> None:
    plane: ControlPlane = request.getfixturevalue(f"control_plane_{minor.replace('.', '')}")
    mismatches = []
    for index, expression in enumerate(ROWS):
        ours = check(expression, minor)
        accepted, message = _verdict(plane, 500 + index, expression)
        if accepted != ours.ok or (not accepted and (ours.error or "") not in message):
            mismatches.append((expression[:80], accepted, message[-400:], ours.verdict, (ours.error or "")[:400]))
    assert not mismatches, mismatches
