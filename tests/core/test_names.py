"""The Python port of cdk8s's generated names equals cdk8s's own, over many ids (issue 14)."""

from __future__ import annotations

import random
import string

import cdk8s
import constructs

from dra_constructs.constructs._names import node_addr, to_dns_label

_ALPHABET = string.ascii_letters + string.digits + "-_.-"


def _ids(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    special = ["Default", "default", "Resource", "resource", "x", "a-b", "a--b", "-lead", "trail-", "_", ".",
               "UPPER", "MixedCase_1.2", "z" * 70, "-" * 3, "1" * 63, "a" * 62]
    ids = list(special)
    while len(ids) < count:
        ids.append("".join(rng.choice(_ALPHABET) for _ in range(rng.choice((1, 3, 8, 20, 40, 64, 90)))))
    return list(dict.fromkeys(ids))


def _scope_ids(obj: constructs.Construct) -> list[str]:
    return ["", *obj.node.path.split("/")]


def test_generated_names_equal_cdk8s_over_many_ids() -> None:
    app = cdk8s.App()
    objects: list[cdk8s.ApiObject] = []
    for chart_id in ("bench", "Default", "a_chart.V2", "resource"):
        chart = cdk8s.Chart(app, chart_id)
        nested = constructs.Construct(chart, "Default")
        deeper = constructs.Construct(nested, "Inner_Group")
        seed = sum(map(ord, chart_id))
        for scope, ids in ((chart, _ids(160, seed)), (nested, _ids(40, 7)), (deeper, _ids(40, 8))):
            for id in ids:
                if scope is chart and id == "Default":  # taken by the nested scope
                    continue
                objects.append(cdk8s.ApiObject(scope, id, api_version="v1", kind="ConfigMap"))
        if chart_id not in ids and chart_id != "Default":  # a path like bench/bench: cdk8s drops the repeated component
            objects.append(cdk8s.ApiObject(chart, chart_id, api_version="v1", kind="ConfigMap"))
    mismatches = [(o.node.path, o.name, to_dns_label(o.node.path, _scope_ids(o)))
                  for o in objects if to_dns_label(o.node.path, _scope_ids(o)) != o.name]
    assert len(objects) > 900
    assert mismatches == []


def test_node_addr_equals_constructs() -> None:
    app = cdk8s.App()
    chart = cdk8s.Chart(app, "c")
    for id in ("x", "Default", "a.b_c"):
        obj = constructs.Construct(chart, id)
        assert node_addr(_scope_ids(obj)) == obj.node.addr


def test_without_hash() -> None:
    app = cdk8s.App()
    chart = cdk8s.Chart(app, "nohash", disable_resource_name_hashes=True)
    for id in ("pod", "My_Pod.1", "x" * 80):
        obj = cdk8s.ApiObject(chart, id, api_version="v1", kind="Pod")
        assert to_dns_label(obj.node.path, _scope_ids(obj), include_hash=False) == obj.name
