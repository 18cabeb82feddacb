"""Claim/inventory cases for the scheduler-as-oracle test, and ``fit``'s answer to each.

A :class:`Case` is one Pod's claims and an inventory (Nodes and ResourceSlices) of its own: every
name carries the case id, so hundreds of cases share one cluster without seeing each other (slices
name their node, or select it by the case's node label; nothing uses ``allNodes``). The runner
(``oracle_cluster.py``) creates one Pod per node of the case, pinned to that node, with its own
copies of the claims: the scheduler's verdict per node against ``fit``'s per node. ``pods`` > 1
makes a count case: that many identical Pods on each node, of which ``fit --count`` says how many fit.

Pure data: nothing here talks to a cluster, so ``tests/fit/test_oracle_cases.py`` checks the
generator (enough cases, both verdicts) on every machine.
"""

from __future__ import annotations

import copy
import functools
import json
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dra_constructs.catalog import GPU_SPECS
from dra_constructs.catalog import catalog_resource_slices as _catalog_resource_slices
from dra_constructs.fit import DeviceClass, collect, default_device_classes, fit
from dra_constructs.fit.model import Inventory
from dra_constructs.target import Target

__all__ = [
    "CASE_LABEL",
    "EXTRA_CLASSES",
    "Case",
    "NodeVerdict",
    "all_cases",
    "all_verdicts",
    "example_cases",
    "fit_verdicts",
    "fixed_cases",
    "generated_cases",
    "packing_cases",
    "prune",
    "server_classes",
]

#: Node label naming the case a fake Node belongs to (Pods and slice node selectors use it).
CASE_LABEL = "oracle.dra-constructs.io/case"
#: Driver and DeviceClass of the synthetic (non-catalog) inventories.
TEST_DRIVER = "oracle.example.com"
EXTRA_CLASSES = {TEST_DRIVER: DeviceClass(TEST_DRIVER, (f"device.driver == '{TEST_DRIVER}'",))}
PROFILE = "device.attributes['gpu.nvidia.com'].profile == '{}'"
MEMORY_AT_LEAST = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('{}')) >= 0"
REPO = Path(__file__).resolve().parents[2]
#: libyaml's loader where PyYAML has it (the examples hold the sanitizer's 300 KB zipapp text).
_YAML_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _catalog(models: tuple[str, ...] | None, **options: Any) -> str:
    """``catalog_resource_slices`` once per argument set, as JSON (every case relocates a copy of it)."""
    return json.dumps(_catalog_resource_slices(None if models is None else list(models), **options))


def catalog_resource_slices(models: Iterable[str] | None = None, **options: Any) -> list[dict[str, Any]]:
    """A fresh copy of the catalog's slices (the same as :func:`dra_constructs.catalog.catalog_resource_slices`)."""
    loaded: list[dict[str, Any]] = json.loads(_catalog(None if models is None else tuple(models), **options))
    return loaded


@dataclass
class Case:
    """One Pod's claims against an inventory of its own (names already carry the case id)."""

    id: str
    title: str
    nodes: list[dict[str, Any]]
    slices: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    taint_rules: list[dict[str, Any]] = field(default_factory=list)
    pods: int = 1
    admin: bool = False
    templates: bool = False
    pod_spec: dict[str, Any] | None = None
    classes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]


@dataclass(frozen=True)
class NodeVerdict:
    """``fit``'s answer for one node: allocatable, the devices per claim, how many Pods fit."""

    allocatable: bool
    devices: tuple[tuple[str, str, str], ...]  # (claim, request, driver/pool/device)
    count: int
    reason: str | None
    #: That the scheduler may time out before reaching this solution (``fit/scheduler_time.py``).
    warning: str | None = None


def server_classes() -> dict[str, DeviceClass]:
    """The DeviceClasses the cluster gets and ``fit`` uses: the driver defaults plus the test driver's."""
    return {**default_device_classes(), **EXTRA_CLASSES}


def fit_verdicts(case: Case, target: Target, gates: Mapping[str, bool]) -> dict[str, NodeVerdict]:
    """``fit``'s answer for every node of ``case`` (the same path as ``dra-constructs fit``)."""
    inputs = collect([*case.classes, *case.claims], [*case.slices, *case.nodes, *case.taint_rules])
    inventory = Inventory.from_slices(inputs.slices, inputs.nodes, inputs.taint_rules)
    classes = {**server_classes(), **inputs.classes}
    report = fit(inputs.claims, inventory, target=target, classes=classes, gates=dict(gates),
                 count=case.pods > 1)
    verdicts = {}
    for name, result in report.nodes.items():
        devices = tuple((d.claim, d.request, f"{d.driver}/{d.pool}/{d.device}") for d in result.devices)
        count = (report.counts or {}).get(name, int(result.allocatable))
        verdicts[name] = NodeVerdict(result.allocatable, devices, count, result.reason, result.warning)
    return verdicts


def all_verdicts(target: Target, gates: Mapping[str, bool]) -> dict[str, dict[str, NodeVerdict]]:
    """:func:`fit_verdicts` of every case of :func:`all_cases`, by case id.

    Computed once per process, target and gates (~12 s of CPU at 1.37): ``test_oracle_cases.py``
    shares its worker with the 1.37 oracle (``xdist_group("kcp-1.37")``), which asks the same.
    """
    key = tuple(sorted((name, bool(on)) for name, on in gates.items()))
    return {case_id: dict(verdicts) for case_id, verdicts in _all_verdicts(str(target), key).items()}


@functools.cache
def _all_verdicts(version: str, gates: tuple[tuple[str, bool], ...]) -> dict[str, dict[str, NodeVerdict]]:
    target = Target.parse(version)
    return {case.id: fit_verdicts(case, target, dict(gates)) for case in all_cases(target)}


# --- building blocks -------------------------------------------------------------------------


def node(name: str, case_id: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A fake Node: Ready, room for Pods, no kubelet behind it."""
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, CASE_LABEL: case_id,
                                                  **(labels or {})}},
            "status": {"capacity": dict(resources), "allocatable": dict(resources),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "fake node of the fit oracle"}]}}


def relocate(case_id: str, slices: Iterable[Mapping[str, Any]], tag: str = "n"
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Catalog slices moved onto nodes of this case: node, pool and slice names get the case id.

    ``tag`` tells apart two inventories of one case (the static and the DynamicMIG catalog name
    their nodes alike).
    """
    moved, names = [], {}
    for original in slices:
        body = json.loads(json.dumps(original))  # a deep copy of plain JSON data (several times copy.deepcopy's speed)
        spec = body["spec"]
        old = spec["nodeName"]
        new = names.setdefault(old, f"{case_id}-{tag}{len(names)}")
        spec["nodeName"] = new
        spec["pool"]["name"] = spec["pool"]["name"].replace(old, new)
        body["metadata"]["name"] = body["metadata"]["name"].replace(old, new)
        moved.append(body)
    return moved, [node(n, case_id) for n in names.values()]


def claim(name: str, requests: Sequence[dict[str, Any]], constraints: Sequence[dict[str, Any]] = ()
          ) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = list(constraints)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": devices}}


def exactly(name: str, device_class: str, selectors: Sequence[str] = (), count: int = 1,
            **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": device_class, **extra}
    if extra.get("allocationMode") != "All":
        body["count"] = count
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": body}


def first_available(name: str, alternatives: Sequence[dict[str, Any]]) -> dict[str, Any]:
    subs = []
    for index, alternative in enumerate(alternatives):
        sub = dict(alternative["exactly"])
        sub["name"] = f"alt{index}"
        subs.append(sub)
    return {"name": name, "firstAvailable": subs}


def _mig_models() -> list[Any]:
    return [s for s in GPU_SPECS if s.mig_profiles]


def _mig_request(rng: random.Random, name: str, spec: Any, gpus: int) -> dict[str, Any]:
    profiles = list(spec.mig_profiles)
    other = rng.choice(_mig_models())
    profile = rng.choice(profiles) if rng.random() < 0.85 else rng.choice(list(other.mig_profiles))
    top = max(1, profile.max_count * gpus if profile in profiles else 2)
    return exactly(name, "mig.nvidia.com", [PROFILE.format(profile.name)], _count(rng, top))


def _count(rng: random.Random, top: int) -> int:
    """Mostly 1 or 2; sometimes up to one more than the node can have."""
    roll = rng.random()
    return 1 if roll < 0.5 else 2 if roll < 0.75 else rng.randint(1, min(top + 1, 8))


def _gpu_request(rng: random.Random, name: str, spec: Any, gpus: int) -> dict[str, Any]:
    selectors = []
    if rng.random() < 0.4:
        mib = rng.choice([spec.memory_mib // 2, spec.memory_mib, spec.memory_mib + 1024])
        selectors.append(MEMORY_AT_LEAST.format(f"{mib}Mi"))
    return exactly(name, "gpu.nvidia.com", selectors, _count(rng, gpus))


def _catalog_claims(rng: random.Random, case_id: str, spec: Any, gpus: int, dynamic: bool) -> list[dict[str, Any]]:
    claims = []
    for index in range(rng.randint(1, 3 if dynamic else 2)):
        requests: list[dict[str, Any]] = []
        constraints: list[dict[str, Any]] = []
        for r in range(2 if rng.random() < (0.35 if dynamic else 0.15) else 1):
            roll = rng.random()
            if roll < 0.6:
                requests.append(_mig_request(rng, f"r{r}", spec, gpus))
            elif roll < 0.8:
                requests.append(_gpu_request(rng, f"r{r}", spec, gpus))
            else:
                requests.append(first_available(f"r{r}", [_mig_request(rng, "a", spec, gpus),
                                                          _mig_request(rng, "b", spec, gpus)]))
        if len(requests) == 2 and rng.random() < 0.4 and all("exactly" in r for r in requests):
            constraints.append({"matchAttribute": "gpu.nvidia.com/parentUUID"})
        claims.append(claim(f"{case_id}-c{index}", requests, constraints))
    return claims


# --- generated cases ---------------------------------------------------------------------------


def _static_case(rng: random.Random, case_id: str, target: Target) -> Case:
    spec = rng.choice(_mig_models())
    gpus = rng.randint(1, 2)
    slices, nodes = relocate(case_id, catalog_resource_slices([spec.key], gpus_per_node=gpus, mig_mode="static"))
    return Case(case_id, f"static MIG, {spec.key} x{gpus}", nodes, slices,
                _catalog_claims(rng, case_id, spec, gpus, dynamic=False))


def _dynamic_case(rng: random.Random, case_id: str, target: Target, count: bool = False) -> Case:
    spec = rng.choice(_mig_models())
    gpus = rng.randint(1, 2)
    slices, nodes = relocate(case_id, catalog_resource_slices([spec.key], gpus_per_node=gpus, mig_mode="dynamic",
                                                              split_counter_sets=target.counter_sets_in_own_slice))
    claims = _catalog_claims(rng, case_id, spec, gpus, dynamic=True)
    if count:
        claims = claims[:1]
    return Case(case_id, f"DynamicMIG, {spec.key} x{gpus}" + (" (count)" if count else ""), nodes, slices, claims,
                pods=rng.randint(3, 6) if count else 1)


def _network_case(rng: random.Random, case_id: str, target: Target) -> Case:
    spec = rng.choice([s for s in GPU_SPECS if s.memory_mib >= 40000])
    gpus = rng.choice([2, 4])
    slices, nodes = relocate(case_id, catalog_resource_slices([spec.key], gpus_per_node=gpus, network=True))
    slices = [s for s in slices if s["spec"]["nodeName"] == f"{case_id}-n0"]  # whole GPUs + NICs
    nodes = nodes[:1]
    k = rng.randint(1, gpus)
    requests = [exactly("gpu", "gpu.nvidia.com", count=k), exactly("nic", "dranet", count=rng.randint(1, k + 1))]
    constraints: list[dict[str, Any]] = []
    roll = rng.random()
    if roll < 0.5:
        constraints.append({"matchAttribute": "resource.kubernetes.io/pcieRoot"})
    elif roll < 0.75:
        constraints.append({"matchAttribute": "resource.kubernetes.io/numaNode"})
    else:
        constraints.append({"distinctAttribute": "resource.kubernetes.io/pcieRoot", "requests": ["gpu"]})
    return Case(case_id, f"GPU + NIC, {spec.key} x{gpus}", nodes, slices, [claim(f"{case_id}-c0", requests,
                                                                                  constraints)])


def _device(name: str, rng: random.Random, **extra: Any) -> dict[str, Any]:
    return {"name": name, "attributes": {"model": {"string": rng.choice("ab")}, "group": {"int": rng.randint(0, 1)}},
            **extra}


def _synthetic_slice(case_id: str, node_name: str, devices: list[dict[str, Any]], *, suffix: str = "",
                     count: int = 1, generation: int = 1, counters: list[dict[str, Any]] | None = None,
                     by_label: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": TEST_DRIVER,
                            "pool": {"name": f"{node_name}-pool", "generation": generation,
                                     "resourceSliceCount": count}}
    if by_label:
        spec["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}]}]}
    else:
        spec["nodeName"] = node_name
    if counters:
        spec["sharedCounters"] = counters
    if devices or not counters:
        spec["devices"] = devices
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-s{suffix}"}, "spec": spec}


MODEL = "device.attributes['oracle.example.com'].model == '{}'"
POLICIES: list[dict[str, Any] | None] = [
    None, {"default": "2Gi"}, {"default": "4Gi", "validValues": ["4Gi", "8Gi", "16Gi"]},
    {"default": "2Gi", "validRange": {"min": "2Gi", "max": "12Gi", "step": "2Gi"}},
    {"default": "3Gi", "validRange": {"min": "3Gi"}}]


def _synthetic_case(rng: random.Random, case_id: str, target: Target) -> Case:
    """Taints, shared devices with capacity policies, counters, All, admin access, node selection."""
    node_name = f"{case_id}-n0"
    feature = rng.choice(["taints", "shared", "counters", "all", "admin", "incomplete", "generations",
                          "selector", "rule", "distinct"])
    if feature == "shared" and target.minor < 35:
        # 1.34.4's alpha allocator panics on a count above the shared devices (CmpRequestOverCapacity,
        # index out of range) and the scheduler dies: docs/fit.md. Consumable capacity is checked on 1.37.
        feature = "counters"
    devices = [_device(f"d{i}", rng) for i in range(rng.randint(1, 4))]
    slices: list[dict[str, Any]] = []
    rules: list[dict[str, Any]] = []
    admin = False
    request_extra: dict[str, Any] = {}
    count = rng.randint(1, 3)
    claims_n = 1
    constraints: list[dict[str, Any]] = []
    if feature in ("taints", "rule", "all"):
        for device in devices:
            if rng.random() < 0.5:
                taint: dict[str, Any] = {"key": rng.choice(["bad", "maint"]),
                                         "effect": rng.choice(target.device_taint_effects)}
                if rng.random() < 0.5:
                    taint["value"] = "x"
                device["taints"] = [taint]
        if rng.random() < 0.5:
            toleration: dict[str, Any] = {"key": "bad", "operator": rng.choice(["Exists", "Equal"])}
            if toleration["operator"] == "Equal":
                toleration["value"] = "x"
            if rng.random() < 0.5:
                toleration["effect"] = rng.choice(["NoSchedule", "NoExecute"])
            request_extra["tolerations"] = [toleration]
        if feature == "rule":
            rules.append({"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule",
                          "metadata": {"name": f"{case_id}-rule"},
                          "spec": {"deviceSelector": {"driver": TEST_DRIVER, "pool": f"{node_name}-pool",
                                                      "device": rng.choice(devices)["name"]},
                                   "taint": {"key": "bad", "value": "x", "effect": "NoSchedule"}}})
        if feature == "all":
            request_extra["allocationMode"] = "All"
    if feature == "shared":
        for device in devices:
            device["allowMultipleAllocations"] = True
            size = rng.choice([8, 16])
            device["capacity"] = {"memory": {"value": f"{size}Gi"}}
            policy = rng.choice(POLICIES)
            if policy is not None:  # options above the capacity are invalid (the API server says so)
                policy = copy.deepcopy(policy)
                if "validValues" in policy:
                    policy["validValues"] = [v for v in policy["validValues"] if int(v[:-2]) <= size]
                if "max" in policy.get("validRange", {}):
                    policy["validRange"]["max"] = f"{min(12, size)}Gi"
                device["capacity"]["memory"]["requestPolicy"] = policy
        claims_n = rng.randint(1, 3)
    counter_sets: list[dict[str, Any]] | None = None
    if feature == "counters":
        counter_sets = [{"name": "cs", "counters": {"slots": {"value": str(rng.randint(1, 4))}}}]
        for device in devices:
            slots = {"slots": {"value": str(rng.randint(1, 2))}}
            device["consumesCounters"] = [{"counterSet": "cs", "counters": slots}]
        if target.counter_sets_in_own_slice:
            slices.append(_synthetic_slice(case_id, node_name, [], suffix="c", count=2, counters=counter_sets))
            counter_sets = None
        count = rng.randint(1, 2)
        claims_n = rng.randint(1, 2)
    if feature == "admin":
        admin = True
        request_extra["adminAccess"] = True
        request_extra["allocationMode"] = rng.choice(["All", "ExactCount"])
    if feature == "distinct":
        constraints.append(rng.choice([{"distinctAttribute": "oracle.example.com/model"},
                                       {"matchAttribute": "oracle.example.com/group"}]))
        count = rng.randint(2, 3)
    total = 2 if feature == "counters" and counter_sets is None else 1
    if feature == "incomplete":
        total = 2  # one slice of two published: the pool is incomplete
    if feature == "generations":
        stale = [_device(f"old{i}", rng) for i in range(3)]
        slices.append(_synthetic_slice(case_id, node_name, stale, suffix="old", generation=1))
        slices.append(_synthetic_slice(case_id, node_name, devices, generation=2))
    else:
        slices.append(_synthetic_slice(case_id, node_name, devices, count=total, by_label=feature == "selector",
                                       counters=counter_sets))
    claims = []
    for index in range(claims_n):
        extra = dict(request_extra)
        selectors = [MODEL.format(rng.choice("ab"))] if rng.random() < 0.4 else []
        if feature == "shared" and rng.random() < 0.8:
            extra["capacity"] = {"requests": {"memory": f"{rng.randint(1, 12)}Gi"}}
        claims.append(claim(f"{case_id}-c{index}", [exactly("r", TEST_DRIVER, selectors, count, **extra)],
                            constraints))
    if admin and rng.random() < 0.5:  # the tenant claim beside the admin one: both get the device
        claims.append(claim(f"{case_id}-t", [exactly("r", TEST_DRIVER)]))
    return Case(case_id, f"synthetic: {feature}", [node(node_name, case_id)], slices, claims, rules, admin=admin)


def fixed_cases(target: Target) -> list[Case]:
    """Hand-made cases where scheduler releases differ (docs/fit.md: the counters of a refused device)."""
    def device(name: str, group: int, **extra: Any) -> dict[str, Any]:
        return {"name": name, "attributes": {"group": {"int": group}},
                "consumesCounters": [{"counterSet": "cs", "counters": {"slots": {"value": "1"}}}], **extra}

    def case(case_id: str, title: str, slots: int, devices: list[dict[str, Any]],
             claims: list[dict[str, Any]]) -> Case:
        node_name = f"{case_id}-n0"
        counters = [{"name": "cs", "counters": {"slots": {"value": str(slots)}}}]
        if target.counter_sets_in_own_slice:
            slices = [_synthetic_slice(case_id, node_name, [], suffix="c", count=2, counters=counters),
                      _synthetic_slice(case_id, node_name, devices, count=2)]
        else:
            slices = [_synthetic_slice(case_id, node_name, devices, counters=counters)]
        return Case(case_id, title, [node(node_name, case_id)], slices, claims)

    taint = [{"key": "bad", "effect": "NoSchedule"}]
    return [
        # d0 passes the counter check, then its taint refuses it: through 1.35 its slot stays taken.
        case("f00", "fixed: counters of a tainted device", 1, [device("d0", 0, taints=taint), device("d1", 0)],
             [claim("f00-c0", [exactly("r", TEST_DRIVER)])]),
        # d1 passes the counter check, then matchAttribute refuses it: the same through 1.35.
        case("f01", "fixed: counters of a device a constraint refuses", 2,
             [device("d0", 0), device("d1", 1), device("d2", 0)],
             [claim("f01-c0", [exactly("r", TEST_DRIVER, count=2)], [{"matchAttribute": f"{TEST_DRIVER}/group"}])]),
        # Two shares of one device with counters: 1.34 charges the slot twice, 1.35+ once.
        case("f02", "fixed: counters of a shared device", 1,
             [device("d0", 0, allowMultipleAllocations=True, capacity={"memory": {"value": "8Gi"}})],
             [claim(f"f02-c{i}", [exactly("r", TEST_DRIVER, capacity={"requests": {"memory": "2Gi"}})])
              for i in range(2)]),
    ]


#: Per GPU, MIG devices that use all 7 compute slices (short names; see ``packing_cases``).
FILLS = {"a": ["3g", "2g", "1g", "1g"], "b": ["4g", "3g"], "c": ["2g", "2g", "2g", "1g"]}


def packing_cases(target: Target) -> list[Case]:
    """Exact packings of the densest catalog nodes (8 GPUs, DynamicMIG, every placement; issue 24 item 4).

    One node per case. Claims (of one or two requests: a Pod names at most 32) fill every GPU
    exactly, in orders that make the scheduler backtrack; ``+1g`` cases add one 1g claim that
    cannot fit. ``fit`` answered "gave up" on most of them before its exact packing check. Pods that
    fit only after more steps than the scheduler makes in its filter timeout are left out (the
    scheduler would time out where ``fit`` answers: docs/fit.md).
    """
    def profiles(model: str) -> dict[str, str]:
        names = [p.name for p in next(s for s in GPU_SPECS if s.key == model).mig_profiles]
        return {"1g": names[0], "2g": names[3], "3g": names[4], "4g": names[5]}

    def mig(name: str, profile: str, count: int = 1) -> dict[str, Any]:
        return exactly(name, "mig.nvidia.com", [PROFILE.format(profile)], count)

    cases = []
    plans = [  # model, GPUs, fills, order of the claims, two devices a claim, one more 1g, same GPU per claim
        # the scheduler's search takes more than 500,000 steps (fit with only its symmetry rule and
        # counter bound ~81,000, gave up at 50,000; now 175, and it warns that the scheduler may time out)
        ("A100_80GB", 4, "aaaa", "largest", False, False, False),
        ("A100_80GB", 4, "abca", "shuffled", True, False, False),
        # one 1g too many: the scheduler proves it or times out, unschedulable either way
        ("A100_80GB", 8, "aaaaaaaa", "largest", True, True, False),
        ("H200_141GB", 8, "aabcabca", "shuffled", True, True, False),
        ("B200_180GB", 8, "aaaaaaaa", "filled", True, True, True),
    ]
    for index, (model, gpus, fills, order, two, one_more, same_gpu) in enumerate(plans):
        case_id = f"p{index:02d}"
        names = profiles(model)
        slices, nodes = relocate(case_id, catalog_resource_slices(
            [model], gpus_per_node=gpus, mig_mode="dynamic", split_counter_sets=target.counter_sets_in_own_slice))
        pairs: list[list[str]] = []  # the claims' devices: per GPU one claim each, or two claims of two
        for fill in fills:
            devices = FILLS[fill]
            half = len(devices) // 2
            pairs += [devices[:half], devices[half:]] if two else [[d] for d in devices]
        if order == "largest":
            pairs.sort(key=lambda pair: -int(pair[0][0]))
        elif order == "shuffled":
            random.Random(case_id).shuffle(pairs)
        constraints = [{"matchAttribute": "gpu.nvidia.com/parentUUID"}] if same_gpu else []
        claims = [claim(f"{case_id}-c{i}", [mig(f"r{j}", names[p]) for j, p in enumerate(pair)], constraints)
                  for i, pair in enumerate(pairs)]
        if one_more:
            claims.append(claim(f"{case_id}-x", [mig("r0", names["1g"])]))
        title = f"packing: {model} x{gpus} {fills} {order}" + (" +1g" if one_more else "") + (
            " same GPU" if same_gpu else "")
        cases.append(Case(case_id, title, nodes, slices, claims))
    return cases


def generated_cases(target: Target, n: int = 240, seed: int = 20261201) -> list[Case]:
    """``n`` cases: static MIG, DynamicMIG (some counting Pods), GPU + NIC, synthetic features."""
    rng = random.Random(seed)
    makers = [(_static_case, 0.22), (_dynamic_case, 0.33), (_network_case, 0.12), (_synthetic_case, 0.33)]
    cases = []
    for index in range(n):
        case_id = f"o{index:03d}"
        (maker,) = rng.choices([m for m, _ in makers], [w for _, w in makers])
        if maker is _dynamic_case and rng.random() < 0.2:
            cases.append(_dynamic_case(rng, case_id, target, count=True))
        else:
            cases.append(maker(rng, case_id, target))
    return cases


# --- the examples' workloads -----------------------------------------------------------------


def _pod_templates(objects: Iterable[Mapping[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for obj in objects:
        kind = obj.get("kind")
        spec = obj.get("spec") or {}
        if kind == "Pod":
            yield obj["metadata"]["name"], dict(spec)
        elif kind in ("Deployment", "Job", "StatefulSet", "DaemonSet", "ReplicaSet"):
            yield obj["metadata"]["name"], dict((spec.get("template") or {}).get("spec") or {})


def example_cases(target: Target, dist: Path | None = None, gpus: int = 4) -> list[Case]:
    """Each example workload (``dist/k8s-1.34``: resource.k8s.io/v1) with its claim templates, on the catalog.

    The inventory is the catalog's (static and DynamicMIG, NICs beside the GPUs), one copy per case.
    """
    root = dist or REPO / "dist" / "k8s-1.34"
    cases = []
    static = catalog_resource_slices(gpus_per_node=gpus, mig_mode="static", network=True)
    dynamic = catalog_resource_slices(gpus_per_node=gpus, mig_mode="dynamic",
                                      split_counter_sets=target.counter_sets_in_own_slice, network=True)
    parsed: dict[Path, list[dict[str, Any]]] = {}

    def documents(path: Path) -> list[dict[str, Any]]:  # each file parsed once, not once per sibling
        if path not in parsed:
            parsed[path] = [o for o in yaml.load_all(path.read_text(), Loader=_YAML_LOADER) if isinstance(o, dict)]
        return parsed[path]

    for path in sorted(root.glob("*/*.yaml")):
        objects = documents(path)
        templates = {o["metadata"]["name"]: o for o in objects if o.get("kind") == "ResourceClaimTemplate"}
        classes = [o for other in sorted(path.parent.glob("*.yaml")) for o in documents(other)
                   if o.get("kind") == "DeviceClass"]
        for name, pod_spec in _pod_templates(objects):
            refs = pod_spec.get("resourceClaims") or []
            if not refs:
                continue
            case_id = f"e{len(cases):02d}"
            claims = []
            for ref in refs:
                template = templates.get(ref.get("resourceClaimTemplateName"))
                if template is None:
                    continue
                claims.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                               "metadata": {"name": template["metadata"]["name"]}, "spec": template["spec"]})
            if len(claims) != len(refs):
                continue  # a claim made elsewhere: not this example's to place
            slices, nodes = relocate(case_id, static, "s")
            more_slices, more_nodes = relocate(case_id, dynamic, "d")
            slices, nodes = slices + more_slices, nodes + more_nodes
            admin = any((r.get("exactly") or r).get("adminAccess") for c in claims
                        for r in c["spec"]["spec"]["devices"]["requests"])
            cases.append(Case(case_id, f"example {path.parent.name}: {name}", nodes, slices, claims, admin=admin,
                              templates=True, pod_spec=pod_spec, classes=classes))
    return cases


def all_cases(target: Target) -> list[Case]:
    """The examples' workloads and the generated cases for a server of ``target``.

    Built once per process and target; treat them as read-only.
    """
    return list(_all_cases(str(target)))


@functools.cache
def _all_cases(version: str) -> tuple[Case, ...]:
    target = Target.parse(version)
    return (*example_cases(target), *fixed_cases(target), *packing_cases(target), *generated_cases(target))


def _slice_node(body: Mapping[str, Any]) -> str | None:
    spec = body.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    for term in (spec.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for expression in term.get("matchExpressions") or []:
            if expression.get("key") == "kubernetes.io/hostname":
                return str(expression["values"][0])
    return None


def prune(case: Case, verdicts: Mapping[str, NodeVerdict], keep: int, seed: int = 0) -> Case:
    """The case on at most ``keep`` of its nodes: those ``fit`` allocates on first, then others.

    Slices of dropped nodes go too (they name their node), so what is left is unchanged for the
    Pods pinned to the kept nodes.
    """
    names = case.node_names
    if len(names) <= keep:
        return case
    rng = random.Random(f"{seed}/{case.id}")
    yes = [n for n in names if verdicts[n].allocatable]
    no = [n for n in names if not verdicts[n].allocatable]
    rng.shuffle(yes)
    rng.shuffle(no)
    half = max(1, keep // 2)
    kept = set(yes[:half] + no[:keep - min(half, len(yes))])
    kept |= set(yes[half:half + keep - len(kept)])
    return Case(case.id, case.title, [n for n in case.nodes if n["metadata"]["name"] in kept],
                [s for s in case.slices if _slice_node(s) in kept], case.claims, case.taint_rules, case.pods,
                case.admin, case.templates, case.pod_spec, case.classes)
