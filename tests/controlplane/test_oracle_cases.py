"""The oracle's cases without a cluster: enough of them, both verdicts, isolated by name.

These run on every machine; the cluster half is ``test_fit_oracle.py`` (marker ``controlplane``).
They share the 1.37 oracle's worker (``xdist_group("kcp-1.37")``): the cases and ``fit``'s verdicts
are built once for both (``all_cases``, ``all_verdicts``), not once per worker.
"""

from __future__ import annotations

from collections import Counter

import pytest

from dra_constructs.target import Target

from .oracle_cases import all_cases, all_verdicts, fit_verdicts, prune

TARGET = Target.parse("1.37")
GATES = {name: True for name in TARGET.default_feature_gates}

pytestmark = pytest.mark.xdist_group("kcp-1.37")


@pytest.mark.slow  # all cases and fit's verdicts: ~15 s of CPU, shared with the 1.37 oracle (docs/testing.md)
def test_cases_are_many_mixed_and_isolated() -> None:
    cases = all_cases(TARGET)
    verdicts_of = all_verdicts(TARGET, GATES)
    assert len([c for c in cases if not c.templates]) >= 200 and any(c.templates for c in cases)
    verdicts: Counter[tuple[str, bool]] = Counter()
    nodes: Counter[str] = Counter()
    slices: Counter[str] = Counter()
    pools: Counter[tuple[str, str]] = Counter()
    for case in cases:
        expected = verdicts_of[case.id]
        assert set(expected) == set(case.node_names), case.id  # no node outside the case's own
        case = prune(case, expected, 4)
        kind = case.title.split(",")[0].split(":")[0]
        verdicts[(kind, any(v.allocatable for v in expected.values()))] += 1
        nodes.update(case.node_names)
        slices.update(s["metadata"]["name"] for s in case.slices)
        pools.update({(s["spec"]["driver"], s["spec"]["pool"]["name"]) for s in case.slices})
        for body in case.slices:  # every slice names a node of its own case (no allNodes leaking across)
            spec = body["spec"]
            assert spec.get("nodeName", "").startswith(case.id) or spec.get("nodeSelector"), body["metadata"]
            assert not spec.get("allNodes")
    for kind in ("static MIG", "DynamicMIG", "GPU + NIC", "synthetic"):
        assert verdicts[(kind, True)] >= 5 and verdicts[(kind, False)] >= 5, (kind, verdicts)
    assert max(nodes.values()) == 1 and max(slices.values()) == 1 and max(pools.values()) == 1


def test_prune_keeps_allocatable_nodes_and_their_slices_only() -> None:
    case = next(c for c in all_cases(TARGET) if c.title.startswith("example mig_inference_pod"))
    expected = fit_verdicts(case, TARGET, GATES)
    small = prune(case, expected, 4)
    assert len(small.nodes) == 4
    assert sum(expected[n].allocatable for n in small.node_names) == sum(v.allocatable for v in expected.values())
    assert {s["spec"]["nodeName"] for s in small.slices} == set(small.node_names)
    assert fit_verdicts(small, TARGET, GATES) == {n: expected[n] for n in small.node_names}


def test_only_a_timeout_fit_warned_of_is_accepted() -> None:
    """``test_fit_oracle.warned``: the p00 shape warns (fit places it, the scheduler may time out);
    a timeout on a case without the warning, or another difference on the warned case, is not accepted."""
    from .test_fit_oracle import warned

    (p00,) = [c for c in all_cases(TARGET) if c.id == "p00"]
    expected = {"p00": fit_verdicts(p00, TARGET, GATES)}
    assert all(v.allocatable and v.warning for v in expected["p00"].values())
    line = "p00 (packing) on n0: fit places 1 of 1 Pod(s), the scheduler bound 0; scheduler: {}"
    assert warned(line.format("0/1 nodes are available: 1 timed out trying to allocate devices."), expected)
    assert not warned(line.format("0/1 nodes are available: 1 cannot allocate all claims."), expected)
    assert not warned("o001 (x) on n0: ...; scheduler: timed out trying to allocate devices", expected)
