"""A rule is skipped only on objects it can never fire on (``Rule.fires_on``, ``guardrails/facets.py``).

The engine calls a per-object rule only on objects that have one of the facets the rule declares.
The declarations are sound if a rule yields nothing on every object without its facets, whatever
else the object holds and whatever the rest of the set is. Checked here on a pool built to break
them - every fixture object (compliant and not: each makes some rule fire) re-labelled as every kind
and API group the facets tell apart, with and without a bad suppression, its spec moved into a
ConfigMap's data and into an unknown field - and on generated objects (hypothesis). Each declared
facet is shown to matter (dropping it from a declaration breaks the property on the pool), so the
test fails if a declaration is too narrow. Audits with the skipping (``memoize=True``) and with
every rule on every object (``memoize=False``) are compared on the pool and on random subsets of it.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterable
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_constructs.guardrails import audit, load_paths
from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.facets import facets
from dra_constructs.guardrails.manifest import Manifest
from dra_constructs.guardrails.model import Hit, Rule, Severity
from dra_constructs.guardrails.rules import RULES
from dra_constructs.guardrails.suppressions import SUPPRESSIONS_ANNOTATION
from dra_constructs.target import Target

from .helpers import FIXTURES

#: The kinds and API groups the facets tell apart (and a custom kind, which is searched for pod specs).
_LABELS = [
    ("v1", "ConfigMap"), ("v1", "Service"), ("v1", "Pod"), ("apps/v1", "Deployment"), ("batch/v1", "CronJob"),
    ("example.com/v1", "Widget"), ("v1", "Secret"), ("v1", "Namespace"),
    ("resource.k8s.io/v1", "ResourceClaim"), ("resource.k8s.io/v1beta1", "ResourceClaimTemplate"),
    ("resource.k8s.io/v1beta2", "DeviceClass"), ("resource.k8s.io/v1alpha3", "ResourceSlice"),
    ("resource.k8s.io/v1alpha3", "DeviceTaintRule"), ("resource.k8s.io/v1alpha2", "ResourceClass"),
    ("gpu.resource.nvidia.com/v1alpha1", "GpuClaimParameters"), ("gpu.resource.nvidia.com/v1", "Other"),
]
_BAD_SUPPRESSION = '[{"rule": "DRA999"}]'
#: A device plugin's sharing config (DRA006), in block YAML and in JSON (no ``sharing:`` in its text).
_SHARING_CONFIG = "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
_SHARING_JSON = json.dumps({"sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}})
#: Rules with a declaration (all of the pack's object rules).
_DECLARED = [rule for rule in RULES if rule.object_check is not None and rule.fires_on is not None]


def _fixture_objects() -> list[dict[str, Any]]:
    return [m.obj for m in load_paths([str(FIXTURES / "noncompliant"), str(FIXTURES / "compliant")],
                                      max_bytes=None) if isinstance(m.obj.get("metadata"), dict)]


def _relabelled(obj: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """``obj`` as every kind of :data:`_LABELS`, with a bad suppression, and moved into data or an unknown field."""
    for api_version, kind in _LABELS:
        out = copy.deepcopy(obj)
        out["apiVersion"], out["kind"] = api_version, kind
        yield out
        annotated = copy.deepcopy(out)
        annotated["metadata"].setdefault("annotations", {})[SUPPRESSIONS_ANNOTATION] = _BAD_SUPPRESSION
        yield annotated
    body = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind", "metadata")}
    yield {"apiVersion": "v1", "kind": "ConfigMap", "metadata": copy.deepcopy(obj["metadata"]),
           "data": {"spec.yaml": yaml.safe_dump(body), "sharing": "sharing", **dict.fromkeys(body, "x")}}
    yield {"apiVersion": "v1", "kind": "Service", "metadata": copy.deepcopy(obj["metadata"]),
           "spec": {"selector": {"app": "x"}, "extra": copy.deepcopy(body)}}


def _crafted() -> list[dict[str, Any]]:
    """Objects a rule fires on through one facet only (the witnesses that each declared facet matters)."""
    template = {"metadata": {"annotations": {SUPPRESSIONS_ANNOTATION: _BAD_SUPPRESSION,
                                             "gpu-fraction": "0.5"}},
                "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                         "resourceClaims": [{"name": "g", "source": {"resourceClaimName": "x"}}]}}
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"},
         "spec": {"template": template}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plugin", "namespace": "n"},
         "data": {"config.yaml": _SHARING_CONFIG}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plugin-json", "namespace": "n"},
         "data": {"a": "x", "config.json": _SHARING_JSON}},
        {"apiVersion": "example.com/v1", "kind": "Model", "metadata": {"name": "m", "namespace": "n"},
         "spec": {"worker": {"image": "i", "env": [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}],
                             "resources": {"limits": {"nvidia.com/gpu": 2, "nvidia.com/gpu.shared": 1}}}}},
        {"apiVersion": "gpu.resource.nvidia.com/v1alpha1", "kind": "GpuClaimParameters",
         "metadata": {"name": "p", "namespace": "n"}, "spec": {"sharing": {"strategy": "TimeSlicing"}}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "n"},
         "spec": {"devices": {"requests": [{"name": "g", "exactly": {
             "deviceClassName": "gpu.nvidia.com", "count": 1,
             "tolerations": [{"key": "sanitizer.dra-constructs.io/barrier", "operator": "Exists"}]}}]}}},
    ]


def _pool() -> list[dict[str, Any]]:
    pool = _crafted()
    for obj in _fixture_objects():
        pool.append(obj)
        pool.extend(_relabelled(obj))
    return pool


def _manifests(objects: list[dict[str, Any]]) -> list[Manifest]:
    return [Manifest(obj, file="pool.yaml", line=i + 1, position=i) for i, obj in enumerate(objects)]


def _contexts(manifests: list[Manifest]) -> list[AuditContext]:
    """The set as context, with and without declared DRA extended resources (DRA010 fires only with)."""
    declared = {"nvidia.com/gpu": "gpu.nvidia.com", "nvidia.com/mig-1g.10gb": "mig.nvidia.com"}
    return [AuditContext(manifests, Target.parse(version, "audit"), "set", mapping)
            for version, mapping in (("1.34", {}), ("1.34", declared), ("1.32", {}))]


def _fires(rule: Rule, m: Manifest, contexts: list[AuditContext]) -> bool:
    assert rule.object_check is not None
    return any(list(rule.object_check(m, ctx)) for ctx in contexts)


@pytest.fixture(scope="module")
def judged() -> tuple[list[Manifest], dict[str, list[bool]]]:
    """The pool, and for each declared rule whether it fires on each object (in any of the contexts)."""
    manifests = _manifests(_pool())
    contexts = _contexts(manifests)
    return manifests, {rule.id: [_fires(rule, m, contexts) for m in manifests] for rule in _DECLARED}


def test_every_object_rule_of_the_pack_declares_its_facets() -> None:
    assert [rule.id for rule in RULES if rule.object_check is not None and rule.fires_on is None] == []
    assert len(_DECLARED) >= 15


def test_no_rule_fires_on_an_object_without_its_facets(judged: tuple[list[Manifest], dict[str, list[bool]]]) -> None:
    manifests, fired = judged
    for rule in _DECLARED:
        assert rule.fires_on is not None
        wrong = [m.object_id for m, hit in zip(manifests, fired[rule.id], strict=True)
                 if hit and not facets(m) & rule.fires_on]
        assert wrong == [], f"{rule.id} fires on objects without its facets: {wrong[:5]}"


def test_every_declared_facet_matters(judged: tuple[list[Manifest], dict[str, list[bool]]]) -> None:
    """Dropping any facet from a declaration leaves an object of the pool the rule fires on but would skip."""
    manifests, fired = judged
    masks = [facets(m) for m in manifests]
    for rule in _DECLARED:
        assert rule.fires_on is not None and any(fired[rule.id]), rule.id
        for bit in (1 << n for n in range(rule.fires_on.bit_length())):
            if rule.fires_on & bit:
                narrower = rule.fires_on & ~bit
                witnesses = [m for m, mask, hit in zip(manifests, masks, fired[rule.id], strict=True)
                             if hit and not mask & narrower]
                assert witnesses, f"{rule.id}: no object of the pool needs facet {bit}"


_KEYS = st.sampled_from([
    "containers", "initContainers", "image", "env", "envFrom", "resources", "limits", "requests", "claims", "name",
    "value", "valueFrom", "nvidia.com/gpu", "nvidia.com/gpu.shared", "CUDA_VISIBLE_DEVICES", "spec", "template",
    "metadata", "annotations", "labels", SUPPRESSIONS_ANNOTATION, "gpu-fraction", "data", "devices", "exactly",
    "deviceClassName", "count", "allocationMode", "tolerations", "key", "operator", "selectors", "cel",
    "expression", "resourceClaims", "resourceClaimName", "resourceClaimTemplateName", "source", "runtimeClassName",
    "config", "opaque", "driver", "parameters", "sharing", "strategy", "terminationGracePeriodSeconds",
    "firstAvailable", "capacity", "constraints", "matchAttribute", "extendedResourceName", "allowMultipleAllocations",
])
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.sampled_from([
    "", "x", "gpu.nvidia.com", "mig.nvidia.com", "gpu.amd.com", "0", "All", "Exists", "TimeSlicing", "runsc",
    "sanitizer.dra-constructs.io/barrier", "sharing", _SHARING_CONFIG, _SHARING_JSON, _BAD_SUPPRESSION,
    "WaitForFirstConsumer",
    "device.attributes['gpu.nvidia.com'].uuid == 'x'", "resource.kubernetes.io/numaNode", "gpu.resource.nvidia.com",
]))
_VALUES = st.recursive(_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                        st.dictionaries(_KEYS, inner, max_size=4)), max_leaves=25)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_LABELS), st.dictionaries(_KEYS, _VALUES, max_size=5),
       st.dictionaries(_KEYS, _VALUES, max_size=3))
def test_generated_objects(label: tuple[str, str], body: dict[str, Any], metadata: dict[str, Any]) -> None:
    obj = {**body, "apiVersion": label[0], "kind": label[1], "metadata": {"name": "g", "namespace": "n", **metadata}}
    m = Manifest(obj, file="g.yaml", line=1)
    contexts = _contexts([m, *_manifests(_crafted())])
    mask = facets(m)
    for rule in _DECLARED:
        assert rule.fires_on is not None
        if not mask & rule.fires_on:
            assert not _fires(rule, m, contexts), f"{rule.id} fires on {json.dumps(obj)[:300]}"


def _same(objects: list[dict[str, Any]], **options: Any) -> None:
    skipping = audit(copy.deepcopy(objects), kubernetes_version="1.34", **options)
    every = audit(copy.deepcopy(objects), kubernetes_version="1.34", memoize=False, **options)
    assert skipping.to_dict() == every.to_dict()


def test_audit_with_and_without_skipping_agree_on_the_pool() -> None:
    pool = _pool()
    _same(pool)
    _same(pool, dra_extended_resources={"nvidia.com/gpu": "gpu.nvidia.com"})


@pytest.mark.parametrize("seed", range(4))
def test_audit_with_and_without_skipping_agree_on_random_sets(seed: int) -> None:
    chosen = random.Random(seed)
    pool = _pool()
    _same(chosen.sample(pool, 150), tenant_scope=chosen.choice(["set", "file"]))


def test_an_undeclared_rule_is_called_on_every_object() -> None:
    """A rule without ``fires_on`` (another pack's) still sees the ConfigMaps and Services the pack skips."""
    def everything(m: Manifest, ctx: AuditContext) -> Iterable[Hit]:
        yield Hit("metadata", f"saw {m.kind}")

    rule = Rule(id="X001", name="sees all", severity=Severity.ERROR, why="-", fix="-", object_check=everything)
    objects = [{"apiVersion": "v1", "kind": kind, "metadata": {"name": f"o{i}", "namespace": "n"}}
               for i, kind in enumerate(["ConfigMap", "Service", "ConfigMap"])]
    result = audit(objects, rules=(*RULES, rule))
    assert sorted(f.object for f in result.findings if f.rule == "X001") == [
        "ConfigMap/n/o0", "ConfigMap/n/o2", "Service/n/o1"]
