"""Robustness: arbitrary (even nonsensical) manifest content never crashes the audit."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_constructs.guardrails import audit, load_paths

from .helpers import FIXTURES, field_paths

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=6),
                     st.sampled_from(["All", "ExactCount", "MPS", "nvidia.com/gpu", "CUDA_VISIBLE_DEVICES"]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                       max_leaves=8)
_SEEDS = [m.obj for m in load_paths([str(FIXTURES / "noncompliant"), str(FIXTURES / "compliant")])]



@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(range(len(_SEEDS))), choice=st.integers(0, 10_000), value=_VALUES)
def test_mutated_fixtures_never_crash(seed: int, choice: int, value: Any) -> None:
    obj = copy.deepcopy(_SEEDS[seed])
    paths = [p for p in field_paths(obj) if p and p[0] not in ("apiVersion", "kind")]
    path = paths[choice % len(paths)]
    node = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    result = audit([obj])
    assert result.objects_scanned == 1
    for finding in result.findings:
        assert finding.rule.startswith("DRA") and finding.message


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _VALUES, max_size=5))
def test_any_object_shape_is_audited(extra: dict[str, Any]) -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", **extra}
    obj["apiVersion"], obj["kind"] = "v1", "Pod"
    assert audit([obj]).objects_scanned == 1
