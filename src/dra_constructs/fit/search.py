"""One ``Allocate`` call on one node: pools gathered, requests resolved, then ``allocateOne``'s search."""

from __future__ import annotations

from collections import Counter
from typing import Any

from dra_constructs.fit.constraints import _ConstraintState
from dra_constructs.fit.explain import _Explain
from dra_constructs.fit.model import Claim, DeviceClass, SubRequest
from dra_constructs.fit.pools import counter_set_slice, invalid_reason, node_pools
from dra_constructs.fit.results import (
    ALLOCATION_RESULTS_MAX_SIZE,
    SHARED_UNSHAREABLE,
    NodeResult,
)
from dra_constructs.fit.scheduler_time import count_scheduler_steps, gave_up, timeout_warning
from dra_constructs.fit.search_state import _Alt, _OverLimit, _Stop, _Uncounted


class _NodeSearch(_Explain):
    """The search of one ``Allocate`` call (``allocateOne``)."""

    # --- setup -----------------------------------------------------------------------------

    def _gather(self) -> None:
        """``GatherPools`` (``fit/pools.py`` has the invalid-pool and counter-set-slice rules)."""
        partitionable = self.a.gate("DRAPartitionableDevices")
        split = self.a.target.counter_sets_in_own_slice
        for pool, slices in node_pools(self.a.candidate_pools(self.node), self.node, partitionable, split,
                                       self.a.target.allocator_sorts_pools):
            self.pools.append(pool)
            reason = invalid_reason(pool, slices, partitionable, split)
            if reason is not None:
                self.invalid[pool.key] = reason
            skipped = pool.incomplete and self.a.target.allocator_skips_incomplete_pools  # through 1.34: usable
            usable = reason is None and not skipped
            for slice_ in slices:
                if split and slice_.counter_set_names and slice_.devices:
                    self.ignored.append((slice_.name, len(slice_.devices)))
                if counter_set_slice(slice_, partitionable, split):
                    continue
                for device in slice_.devices:
                    if slice_.per_device and not (device.node_selection and device.node_selection.matches(self.node)):
                        continue
                    self.devices.append(device)
                    self.pool_ok.append(usable)

    def _resolve(self) -> None:
        total = 0
        for claim_index, claim in enumerate(self.claims):
            minimum = 0
            for request_index, request in enumerate(claim.requests):
                if request.first_available and not self.a.gate("DRAPrioritizedList"):
                    raise _Stop(f"claim {claim.name}, request {request.name}: has subrequests, but the "
                                "DRAPrioritizedList feature is disabled")
                alts = [self._alt(claim_index, claim, request.name, sub, request.first_available)
                        for sub in request.alternatives]
                self.alts[(claim_index, request_index)] = alts
                minimum += min(alt.need for alt in alts)
            if minimum > ALLOCATION_RESULTS_MAX_SIZE:
                raise _Stop(f"claim {claim.name}: number of requested devices {minimum} exceeds the claim limit "
                            f"of {ALLOCATION_RESULTS_MAX_SIZE}")
            compare = self.a.target.distinct_attribute_compares_values
            self.constraints.append([_ConstraintState(c, compare) for c in claim.constraints])
            for constraint in claim.constraints:
                if constraint.distinct and not self.a.gate("DRAConsumableCapacity"):
                    raise _Stop(f"claim {claim.name}: distinctAttribute needs the DRAConsumableCapacity feature")
            total += minimum

    def _alt(self, claim_index: int, claim: Claim, base: str, spec: SubRequest, sub: bool) -> _Alt:
        name = f"{base}/{spec.name}" if sub else base
        if spec.admin_access is not None and not self.a.gate("DRAAdminAccess"):
            raise _Stop(f"claim {claim.name}, request {name}: admin access is requested, but the feature is disabled")
        if spec.capacity and not self.a.gate("DRAConsumableCapacity"):
            raise _Stop(f"claim {claim.name}, request {name}: has capacity requests, but the DRAConsumableCapacity "
                        "feature is disabled")
        device_class = self.a.classes.get(spec.device_class)
        if device_class is None:
            raise _Stop(f"claim {claim.name}, request {name}: could not retrieve device class {spec.device_class}: "
                        "not found")
        binding = self.a.gate("DRADeviceBindingConditions") and self.a.gate("DRAResourceClaimDeviceStatus")
        key = (spec.device_class, spec.selectors, binding)
        cached = self._candidates.get(key)
        if cached is None:
            cached = self._candidates[key] = self._select(device_class, spec, binding)
        candidates, errors = cached
        alt = _Alt(claim_index, name, base, spec.name if sub else "", spec, device_class.selectors, candidates, errors)
        if spec.mode == "All":
            for pool in self.pools:
                if pool.incomplete:
                    raise _Stop(f"claim {claim.name}, request {name}: asks for all devices, but resource pool "
                                f"{pool.key} is currently being updated")
                if pool.key in self.invalid:
                    raise _Stop(f"claim {claim.name}, request {name}: asks for all devices, but resource pool "
                                f"{pool.key} is currently invalid")
            if errors:
                position = min(errors)
                raise _Stop(f"claim {claim.name}: request {name} on device {self.devices[position].id}: "
                            f"CEL runtime error: {errors[position]}")
            alt.all_devices = [p for p in candidates if self._capacity_fits(p, spec)]
        return alt

    def _select(self, device_class: DeviceClass, spec: SubRequest, binding: bool) -> tuple[list[int], dict[int, str]]:
        """Positions of the devices the request selects (``isSelectable``), and CEL errors by position."""
        results = self.a.matches(device_class, spec.selectors, self.devices)
        candidates: list[int] = []
        errors: dict[int, str] = {}
        for position, result in enumerate(results):
            if self.devices[position].binding_conditions and not binding:
                continue
            if isinstance(result, str):
                errors[position] = result.removeprefix("error: ")
                candidates.append(position)
            elif result:
                candidates.append(position)
        return candidates, errors

    # --- run -------------------------------------------------------------------------------

    def run(self) -> NodeResult:
        try:
            self._prepare()
            done = self._one(0, 0, 0, 0, False, 0)
        except _Stop as stop:
            return NodeResult(self.node.name, False, reason=str(stop), steps=self.steps)
        except _OverLimit:
            done = False
        if done:
            devices = [r for claim in self.results for r in claim]
            result = NodeResult(self.node.name, True, devices, steps=self.steps)
            if not self.cuts:  # the scheduler's search took the same steps
                result.scheduler_steps = self.steps
            elif self.a.scheduler_count_work:
                count_scheduler_steps(result, _NodeSearch(self.a, self.claims, self.node, plain=True))
            result.warning = timeout_warning(result, self.a.target)
            return result
        self.failed = None
        self.no_match = False
        reason = self._explain()
        if self.invalid:  # upstream: "invalid resource pools were encountered" when allocation fails
            reason = ("invalid resource pools were encountered (" + "; ".join(
                f"pool {key}: {why}" for key, why in self.invalid.items()) + "; none of their devices is "
                "allocated): " + reason)
        if self.ignored:
            reason += "; " + "; ".join(
                f"slice {name} has both sharedCounters and {count} device(s): from 1.35 the allocator reads it as a "
                "counter-set slice and offers none of its devices (the API server of 1.35+ rejects such a slice; "
                "publish the devices in a slice of their own)" for name, count in self.ignored)
        return NodeResult(self.node.name, False, reason=reason, steps=self.steps, failed=self.failed,
                          no_match=self.no_match)

    def _prepare(self) -> None:
        """Pools gathered, requests resolved, the cuts that apply chosen (none in the plain search)."""
        self._gather()
        self._resolve()
        self._traces = self._failures_leave_traces()
        self._packing = self._make_packing() if self.a.packing_after is not None and not self.plain else None

    def _step(self) -> None:
        self.steps += 1
        if self.steps > self.limit:
            if self.plain:
                raise _Uncounted
            raise _Stop(gave_up(self.a.step_budget, self.a.target))

    def _one(self, claim: int, request: int, sub: int, device: int, in_sub: bool, start: int) -> bool:
        """``allocateOne``."""
        self._step()
        if claim >= len(self.claims):
            return True
        if request >= len(self.claims[claim].requests):
            try:
                return self._next_claim(claim + 1)
            except _OverLimit:
                return False
        alts = self.alts[(claim, request)]
        if not in_sub and self.claims[claim].requests[request].first_available:
            all_over = True
            for index in range(len(alts)):
                try:
                    if self._one(claim, request, index, 0, True, 0):
                        return True
                    all_over = False
                except _OverLimit:
                    continue
            if all_over:
                raise _OverLimit
            return False
        alt = alts[sub]
        if alt.all_devices is not None and not alt.all_devices:
            self._record_failure(claim, alt, Counter({"no device matches": 1}))
            return False
        if device >= alt.need:
            return self._one(claim, request + 1, 0, 0, False, 0)
        if len(self.results[claim]) + alt.need - device > ALLOCATION_RESULTS_MAX_SIZE:
            raise _OverLimit
        if alt.all_devices is not None:
            position = alt.all_devices[device]
            ok = self._allocate(claim, alt, position, must=True)
            if not ok:
                self._record_failure(claim, alt, Counter({f"{self.devices[position].id} is not available": 1}))
                return False
            if self._one(claim, request, sub, device + 1, in_sub, 0):
                return True
            self._deallocate(claim, alt, position)
            return False
        if device == 0 and not self.plain and not self._traces and not self._bound_ok(claim, request, sub, device):
            self.cuts += 1
            return False
        if self._packing is not None and self.steps > self.packing_after and not self._packs(
                claim, request, sub, device, alt):
            self.cuts += 1
            return False
        low = start
        if request == 0 and device == 0 and claim > 0 and self._same_as_previous(claim):
            previous = self.first_position[claim - 1]
            if previous is not None:
                low = max(low, previous)
        why: Counter[str] = Counter()
        for position in alt.candidates:
            if position < low:
                if position >= start and self.pool_ok[position] and not self._in_use(position):
                    self.cuts += 1  # the plain search tries it (and finds no solution below it)
                continue
            if not self.pool_ok[position]:
                continue
            fit = self.devices[position]
            if alt.admin and claim in self.allocating.get(position, ()):
                why["in use by the same claim"] += 1
                continue
            if not alt.admin and self._in_use(position):
                why["already allocated"] += 1
                continue
            error = alt.errors.get(position)
            if error is not None:
                raise _Stop(f"claim {self.claims[claim].name}: request {alt.request_name} on device {fit.id}: "
                            f"CEL runtime error: {error}")
            if not self._capacity_fits(position, alt.spec):
                if not fit.allow_multiple and self.a.allocated.shared(fit.id):
                    # A share (shareID) of a device that does not allow multiple allocations: the
                    # scheduler does not count it as in use, but its consumedCapacity still counts
                    # against the device's capacity (``CmpRequestOverCapacity`` reads AggregatedCapacity).
                    why[SHARED_UNSHAREABLE] += 1
                else:
                    why["capacity"] += 1
                continue
            blocked = self._try(claim, alt, position)
            if blocked:
                why[blocked] += 1
                continue
            if request == 0 and device == 0:
                self.first_position[claim] = position
            if self._one(claim, request, sub, device + 1, in_sub, position + 1):
                return True
            self._deallocate(claim, alt, position)
        self._record_failure(claim, alt, why)
        return False

    def _next_claim(self, claim: int) -> bool:
        """Start ``claim``, unless the same state (devices taken, counters used, symmetry bound)
        already failed from here: the claims left see exactly the same problem again (the plain
        search counts the steps that failure took instead of taking them again)."""
        if claim >= len(self.claims):
            return self._one(claim, 0, 0, 0, False, 0)
        low = self.first_position[claim - 1] if claim > 0 and self._same_as_previous(claim) else None
        key = (claim, low, frozenset(p for p, users in self.allocating.items() if users),
               frozenset((k, frozenset(v.items())) for k, v in self.capacity_in_use.items()),
               frozenset((k, frozenset(v.items())) for k, v in self.consumed.items()))  # (no sort: sets)
        if self.plain:
            return self._next_claim_counted(claim, key)
        if key in self._failed:
            self.cuts += 1
            return False
        if self._one(claim, 0, 0, 0, False, 0):
            return True
        # sound even where failed branches keep refused counters (``_traces``): a search that kept
        # any leaves more counters consumed, so its state (this key) never comes back
        if len(self._failed) < 1 << 18:
            self._failed.add(key)
        return False

    def _next_claim_counted(self, claim: int, key: Any) -> bool:
        """The plain search's ``_next_claim``: a state that already failed takes the steps it took
        then (the search from a claim boundary depends on that state alone, as ``_failed`` relies
        on), counted without being taken again."""
        known = self._failed_steps.get(key)
        if known is not None:
            self.steps += known
            self.limit = min(self.limit + known, self.count_cap)
            if self.steps > self.limit:
                raise _Uncounted
            return False
        before = self.steps
        if self._one(claim, 0, 0, 0, False, 0):
            return True
        if len(self._failed_steps) < 1 << 18:
            self._failed_steps[key] = self.steps - before
        return False

    def _same_as_previous(self, claim: int) -> bool:
        if self.plain:  # the scheduler has no symmetry rule
            return False
        one, other = self.claims[claim], self.claims[claim - 1]
        if one.requests != other.requests or one.constraints != other.constraints:
            return False
        return all(alt.all_devices is None and not alt.admin for alt in self.alts[(claim, 0)])
