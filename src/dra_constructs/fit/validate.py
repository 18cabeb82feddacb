"""Check an allocation independently of the search that produced it.

Every returned allocation must hold: each request (or the chosen ``firstAvailable`` alternative)
has its count of distinct devices that match its class and selectors on that node, no device
goes to two claims (admin access and shared devices excepted) or is already allocated, no
counter set is overdrawn (counting devices already allocated), ``matchAttribute`` values are
equal and ``distinctAttribute`` values differ, no untolerated NoSchedule/NoExecute taint, and a
shared device's ``consumedCapacity`` is each request's amount rounded up to the smallest amount
its ``requestPolicy`` allows, all of them together within the device's capacity (with
DRAConsumableCapacity on, an unshared device must allow the request too).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from fractions import Fraction

from dra_constructs.cel.matching import match_devices
from dra_constructs.fit.allocator import AllocatedState, DeviceResult
from dra_constructs.fit.capacity import RequestPolicy
from dra_constructs.fit.constraints import _attribute
from dra_constructs.fit.model import Claim, DeviceClass, FitDevice, Inventory, Node, SubRequest
from dra_constructs.fit.pools import invalid_reason
from dra_constructs.target import Target

__all__ = ["validate_allocation"]


def validate_allocation(
    claims: Sequence[Claim],
    inventory: Inventory,
    node: Node,
    results: Sequence[DeviceResult],
    *,
    classes: Mapping[str, DeviceClass],
    target: Target,
    allocated: AllocatedState | None = None,
    gates: Mapping[str, bool] | None = None,
) -> list[str]:
    """Every broken rule of ``results`` (empty: valid)."""
    gates = gates if gates is not None else target.default_feature_gates
    allocated = (allocated or AllocatedState()).resolved(bool(gates.get("DRAConsumableCapacity", False)))
    problems: list[str] = []
    by_id: dict[str, FitDevice] = {d.id: d for d in inventory.devices}
    users: Counter[str] = Counter()
    for result in results:
        device = by_id.get(result.id)
        if device is None:
            problems.append(f"{result.id}: no such device")
            continue
        reachable = any(device in s.devices and (s.targets(node) if not s.per_device else
                        (device.node_selection is not None and device.node_selection.matches(node)))
                        for s in device.pool.slices)
        if not reachable:
            problems.append(f"{result.id}: not available on node {node.name}")
        problems += _pool_problems(device, node, gates, target)
        shared = gates.get("DRAConsumableCapacity", False) and device.allow_multiple
        if not result.admin_access and not shared:
            users[result.id] += 1
            if result.id in allocated.devices:
                problems.append(f"{result.id}: already allocated")
    problems += [f"{device}: allocated {n} times" for device, n in users.items() if n > 1]
    for claim in claims:
        mine = [r for r in results if r.claim == claim.name]
        for request in claim.requests:
            got = [r for r in mine if r.request == request.name or r.request.startswith(request.name + "/")]
            chosen = {r.request for r in got}
            if len(chosen) != 1:
                problems.append(f"claim {claim.name}, request {request.name}: results name {sorted(chosen)}")
                continue
            (name,) = chosen
            sub_name = name.partition("/")[2]
            spec = next((s for s in request.alternatives if not request.first_available or s.name == sub_name), None)
            if spec is None:
                problems.append(f"claim {claim.name}: {name} is not an alternative of request {request.name}")
                continue
            ids = [r.id for r in got]
            if len(set(ids)) != len(ids):
                problems.append(f"claim {claim.name}, request {name}: a device twice")
            if spec.mode == "ExactCount" and len(ids) != spec.count:
                problems.append(f"claim {claim.name}, request {name}: {len(ids)} devices, wants {spec.count}")
            if spec.mode == "All" and not ids:
                problems.append(f"claim {claim.name}, request {name}: All got no device")
            device_class = classes.get(spec.device_class)
            devices = [by_id[i] for i in ids if i in by_id]
            if device_class is None:
                problems.append(f"claim {claim.name}, request {name}: unknown class {spec.device_class}")
            else:
                matched = match_devices(list(device_class.selectors), list(spec.selectors),
                                        [d.device for d in devices], target)
                problems += [f"claim {claim.name}, request {name}: {i} does not match ({v})"
                             for i, v in matched.items() if v is not True]
            if gates.get("DRAConsumableCapacity", False):
                problems += [p for r in got if r.id in by_id and by_id[r.id].allow_multiple
                             for p in _consumption_problems(by_id[r.id], spec, r)]
                problems += [p for r in got if r.id in by_id and not by_id[r.id].allow_multiple
                             for p in _exclusive_policy_problems(by_id[r.id], spec, r)]
            if gates.get("DRADeviceTaints", False):
                for device in devices:
                    for taint in device.taints:
                        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
                                t.tolerates(taint) for t in spec.tolerations):
                            problems.append(f"{device.id}: taint {taint.get('key')} not tolerated by {name}")
        for constraint in claim.constraints:
            picked = [r for r in mine if not constraint.requests or r.request in constraint.requests
                      or r.request.partition("/")[0] in constraint.requests]
            values = [_attribute(by_id[r.id], constraint.attribute) for r in picked if r.id in by_id]
            if any(v is None for v in values):
                problems.append(f"claim {claim.name}: a device lacks {constraint.attribute}")
            elif constraint.distinct and len(set(values)) != len(values) and target.distinct_attribute_compares_values:
                problems.append(f"claim {claim.name}: {constraint.attribute} values repeat: {values}")
            elif not constraint.distinct and len(set(values)) > 1:
                problems.append(f"claim {claim.name}: {constraint.attribute} values differ: {values}")
    problems += _counter_problems(inventory, results, allocated, target.allocator_charges_committed_share_counters)
    if gates.get("DRAConsumableCapacity", False):
        problems += _capacity_totals(by_id, results, allocated)
    return problems


def _pool_problems(device: FitDevice, node: Node, gates: Mapping[str, bool], target: Target) -> list[str]:
    """A device of an invalid pool, or of a 1.35+ counter-set slice, is never allocated."""
    partitionable = gates.get("DRAPartitionableDevices", False)
    split = target.counter_sets_in_own_slice
    home = next((s for s in device.pool.slices if device in s.devices), None)
    if home is not None and split and home.counter_set_names:
        return [f"{device.id}: in slice {home.name}, which has sharedCounters: its devices are not offered"]
    node_slices = [s for s in device.pool.slices if s.targets(node)]
    reason = invalid_reason(device.pool, node_slices, partitionable, split)
    return [f"{device.id}: pool {device.pool.key} is invalid ({reason})"] if reason else []


def _smallest_allowed(asked: Fraction, policy: RequestPolicy) -> Fraction | None:
    """The least amount >= ``asked`` the policy accepts (``validRange`` on the integer views the
    scheduler's ``Quantity.Value()`` arithmetic uses), ``None`` if none is."""
    if policy.has_range and policy.min is not None:
        if asked < policy.min:
            least = policy.min
        elif policy.step is None:
            least = asked
        else:
            base, step = math.ceil(policy.min), math.ceil(policy.step)
            least = Fraction(base + step * max(0, math.ceil(Fraction(math.ceil(asked) - base, step))))
        return None if policy.max is not None and least > policy.max else least
    if policy.valid_values:
        return min((v for v in policy.valid_values if v >= asked), default=None)
    return asked


def _asked_capacities(device: FitDevice, spec: SubRequest, *, twice_is_wrong: bool
                      ) -> tuple[dict[str, Fraction], dict[str, Fraction], str | None]:
    """The device's capacities and the amounts ``spec`` asks of each, by the device's name for them.

    A capacity published both as x and <driver>/x counts once, as <driver>/x; a request's x and
    <driver>/x name the same capacity. The third value names a requested capacity the device
    lacks (or, with ``twice_is_wrong``, one asked for twice).
    """
    domain = device.device.driver + "/"
    counted = {n: v for n, v in device.capacity.items() if domain + n not in device.capacity}
    asked: dict[str, Fraction] = {}
    for name, amount in spec.capacity:
        spellings = [name, domain + name] if "/" not in name else [name, name.removeprefix(domain)]
        key = next((s for s in spellings if s in counted), None)
        if key is None or (twice_is_wrong and key in asked):
            return counted, asked, name
        asked[key] = amount
    return counted, asked, None


def _consumption_problems(device: FitDevice, spec: SubRequest, result: DeviceResult) -> list[str]:
    """A shared device's recorded consumption against what ``spec`` asks and the device's policies."""
    where = f"{result.claim}/{result.request} on {result.id}"
    counted, asked, problem = _asked_capacities(device, spec, twice_is_wrong=True)
    if problem is not None:
        return [f"{where}: asks for capacity {problem} the device lacks, or twice"]
    got = dict(result.consumed)
    if set(got) != set(counted):
        return [f"{where}: consumes {sorted(got)}, the device has {sorted(counted)}"]
    problems = []
    for name, total in counted.items():
        policy = device.request_policies.get(name)
        if name not in asked:
            want: Fraction | None = policy.default if policy and policy.default is not None else total
        else:
            want = asked[name] if policy is None else _smallest_allowed(asked[name], policy)
        if want is None:
            problems.append(f"{where}: no amount of {name} >= {asked[name]} is allowed, yet it was allocated")
        elif got[name] != want:
            problems.append(f"{where}: consumes {got[name]} of {name}, the rule gives {want}")
    return problems


def _exclusive_policy_problems(device: FitDevice, spec: SubRequest, result: DeviceResult) -> list[str]:
    """An unshared device must still serve the request within each capacity's ``requestPolicy``
    (the scheduler checks the policy on every device while DRAConsumableCapacity is on)."""
    where = f"{result.claim}/{result.request} on {result.id}"
    counted, asked, problem = _asked_capacities(device, spec, twice_is_wrong=False)
    if problem is not None:
        return [f"{where}: asks for capacity {problem} the device lacks"]
    problems = []
    for name, total in counted.items():
        policy = device.request_policies.get(name)
        if name in asked:
            least = asked[name] if policy is None else _smallest_allowed(asked[name], policy)
            if least is None or least > total:
                problems.append(f"{where}: {asked[name]} of {name} is not allowed by the device "
                                f"(capacity {total}, requestPolicy {policy})")
        elif policy is not None:
            amount = policy.default if policy.default is not None else total
            if amount != policy.default and _smallest_allowed(amount, policy) != amount:
                problems.append(f"{where}: the whole {name} ({total}) is outside its requestPolicy")
    return problems


def _capacity_totals(by_id: Mapping[str, FitDevice], results: Sequence[DeviceResult],
                     allocated: AllocatedState) -> list[str]:
    totals: dict[str, dict[str, Fraction]] = {}
    for result in results:
        device = by_id.get(result.id)
        if device is None or not device.allow_multiple:
            continue
        bucket = totals.setdefault(result.id, dict(allocated.capacity.get(result.id, {})))
        for name, amount in result.consumed:
            bucket[name] = bucket.get(name, Fraction(0)) + amount
    return [f"{device}: capacity {name} overdrawn ({value} > {by_id[device].capacity[name]})"
            for device, bucket in totals.items() for name, value in bucket.items()
            if name in by_id[device].capacity and value > by_id[device].capacity[name]]


def _counter_problems(inventory: Inventory, results: Sequence[DeviceResult], allocated: AllocatedState,
                      charges_shares: bool) -> list[str]:
    taken = {r.id for r in results} | allocated.devices
    if charges_shares:  # committed shares charge their device's counters once (Target)
        taken |= set(allocated.shares) | set(allocated.capacity)
    used: dict[tuple[str, str], dict[str, Fraction]] = defaultdict(dict)
    for device in inventory.devices:
        if device.id not in taken:
            continue
        for counter_set, consumption in device.consumes:
            bucket = used[(device.pool.key, counter_set)]
            for name, value in consumption:
                bucket[name] = bucket.get(name, Fraction(0)) + value
    problems = []
    pools = {p.key: p for p in inventory.pools}
    for (pool_key, counter_set), totals in used.items():
        limits = pools[pool_key].counter_sets.get(counter_set, {})
        for name, value in totals.items():
            if name in limits and value > limits[name]:
                problems.append(f"{pool_key}: counter {name} of {counter_set} overdrawn ({value} > {limits[name]})")
    return problems
