"""The library's objects keep their manifests as JSON text; the fast plain-JSON check agrees with the walk.

``_plain_json_text`` (encode, parse back, compare: all in C) decides which manifests Python keeps
and renders; ``_not_plain_json`` (the Python walk) names the bad value for the error or the
hand-over to cdk8s. They must agree on every input, or a manifest would be rendered in Python
that cdk8s would render differently (or refused where the walk finds nothing).
"""

from __future__ import annotations

import datetime
import enum
import gc
import json
import math
from collections import OrderedDict
from typing import Any

import cdk8s
import pytest

from dra_constructs import Container, GpuClaimTemplate, GpuPod
from dra_constructs.constructs._rendered import _not_plain_json, _plain_json_text


class _Color(enum.StrEnum):
    RED = "red"


class _Level(enum.IntEnum):
    ONE = 1


PLAIN: list[Any] = [
    {"a": [1, 2.5, -0.0, True, None, "x"]},
    {"big": 2**70, "small": -(2**63), "exp": 1e300},
    {"value": "__proto__", "text": 'a"__proto__":b', "nested": [{"k": "\u00e9\ud800"}]},
    {"enum": _Color.RED, "int_enum": _Level.ONE},
    OrderedDict([("b", 1), ("a", {"c": []})]),
    {"empty": {}, "list": [[], [{}]]},
]
NOT_PLAIN: list[Any] = [
    {"a": (1, 2)},
    {"a": [{"b": (1,)}]},
    {1: "int key"},
    {"a": {True: "bool key"}},
    {"a": {None: "none key"}},
    {"a": {1.5: "float key"}},
    {"a": math.nan},
    {"a": [math.inf]},
    {"a": -math.inf},
    {"a": datetime.datetime(2024, 1, 2, tzinfo=datetime.UTC)},
    {"a": {1, 2}},
    {"a": b"bytes"},
    {"__proto__": 1},
    {"a": [{"__proto__": {"b": 1}}]},
    {"a": object()},
]


@pytest.mark.parametrize("document", PLAIN)
def test_plain_json_is_kept_as_text_that_parses_back_equal(document: Any) -> None:
    text = _plain_json_text(document)
    assert _not_plain_json(document) is None
    assert text is not None and json.loads(text) == document


@pytest.mark.parametrize("document", NOT_PLAIN)
def test_what_the_walk_refuses_the_fast_check_refuses(document: Any) -> None:
    assert _not_plain_json(document) is not None
    assert _plain_json_text(document) is None


def test_a_workload_leaves_no_manifest_dicts_for_the_collector() -> None:
    """Built objects hold their manifests as strings: the dicts and lists of the specs are garbage at once."""
    chart = cdk8s.Chart(cdk8s.App(), "c")
    tmpl = GpuClaimTemplate.mig(chart, "slice", gpu="A100_80GB", profile="3g.40gb")
    pod = GpuPod(chart, "pod", containers=[Container(name="app", image="registry.example/a:1",
                                                     claims=(tmpl.use(),))])
    for obj in (tmpl, pod):
        assert isinstance(obj._dra_manifest, str)
        assert not [r for r in gc.get_referents(obj.__dict__) if isinstance(r, (dict, list)) and gc.is_tracked(r)]
    first, second = pod.to_json(), pod.to_json()
    assert first == second and first is not second  # a fresh document each call, as cdk8s returns
    assert first["spec"]["containers"][0]["image"] == "registry.example/a:1"


@pytest.mark.parametrize(("scope_is_chart", "id"), [(False, "p"), (True, 7)])
def test_the_create_still_refuses_what_the_generated_checks_refused(scope_is_chart: bool, id: Any) -> None:
    """Without cdk8s's typeguard checks, a scope that is no Construct or an id that is no str is still a TypeError."""
    from dra_constructs.constructs._rendered import OwnManifest

    chart = cdk8s.Chart(cdk8s.App(), "c")

    class _Object(OwnManifest, cdk8s.ApiObject):
        def __init__(self, scope: Any, id: Any) -> None:
            self._dra_create(scope, id, "v1", "ConfigMap", None)

    with pytest.raises(TypeError, match="scope must be" if not scope_is_chart else "id must be"):
        _Object(chart if scope_is_chart else object(), id)
