"""Cuts of branches that hold no solution: the counter bound and the exact packing check (``fit/packing.py``).

Each cut leaves the answer as the scheduler's search finds it (docs/fit.md); ``_capacity_of`` is the
same bound, read by the explanations.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from dra_constructs.fit.packing import Packing, PackingGroup
from dra_constructs.fit.results import ALLOCATION_RESULTS_MAX_SIZE
from dra_constructs.fit.search_state import _Alt, _SearchState

#: No counters consumed yet (never changed).
_NOTHING: dict[str, Any] = {}


class _Bounds(_SearchState):
    """The bounds of the search (see the module docstring)."""

    def _remaining(self, claim: int, request: int, sub: int, device: int) -> list[tuple[frozenset[int], int]]:
        """(candidates, devices still needed) of every exclusive request from here on."""
        demands: list[tuple[frozenset[int], int]] = []
        for c in range(claim, len(self.claims)):
            for r in range(request if c == claim else 0, len(self.claims[c].requests)):
                alts = self.alts[(c, r)]
                if c == claim and r == request:
                    alts = [alts[sub]]
                if any(alt.admin or alt.all_devices is not None for alt in alts):
                    continue
                need = min(alt.need for alt in alts) - (device if (c, r) == (claim, request) else 0)
                union = frozenset(p for alt in alts for p in alt.candidates)  # errors too: reaching them fails
                demands.append((union, need))
        return demands

    def _capacity_of(self, positions: Iterable[int], why: Counter[str] | None = None) -> tuple[int, str | None]:
        """An upper bound on how many of ``positions`` can still be allocated together."""
        groups: dict[tuple[int, str], list[int]] = {}
        loose = 0
        why = why if why is not None else Counter()
        for position in positions:
            if not self.pool_ok[position]:
                why["in an incomplete or invalid pool"] += 1
                continue
            if self._in_use(position):
                why["already allocated"] += 1
                continue
            fit = self.devices[position]
            if self._is_multi(position):
                return 1 << 30, None
            over = self._over(position)
            if over is not None:
                why[over] += 1
                continue
            available = self.a.available_counters(fit.pool)
            key = next(((id(fit.pool), s) for s, _ in fit.consumes if s in available), None)
            if key is None:
                loose += 1
            else:
                groups.setdefault(key, []).append(position)
        total, limiting = loose, None
        for (pool_id, counter_set), members in groups.items():
            pool = self.devices[members[0]].pool
            limits = self.a.available_counters(pool)[counter_set]
            consumed = self.consumed.get((pool_id, counter_set), {})
            smallest: dict[str, Fraction] | None = None
            for position in members:
                amounts = dict(next(c for s, c in self.devices[position].consumes if s == counter_set))
                if smallest is None:
                    smallest = {k: v for k, v in amounts.items() if v > 0 and k in limits}
                else:
                    smallest = {k: min(v, amounts[k]) for k, v in smallest.items() if amounts.get(k, 0) > 0}
            best = len(members)
            for name, least in (smallest or {}).items():
                fit_count = int((limits[name] - consumed.get(name, 0)) // least)
                if fit_count < best:
                    best, limiting = fit_count, f"counter {name} of {counter_set}"
            total += max(best, 0)
        return total, limiting

    def _groups(self, positions: frozenset[int]) -> tuple[int, list[tuple[tuple[int, str], int, dict[str, Any]]]]:
        """Static facts about a candidate set: devices without counters, and per counter set the number
        of candidates and the smallest amount of each counter every one of them consumes."""
        found = self._group_cache.get(positions)
        if found is not None:
            return found
        loose = 0
        groups: dict[tuple[int, str], list[int]] = {}
        for position in positions:
            if not self.pool_ok[position]:
                continue
            fit = self.devices[position]
            if self._is_multi(position):
                loose += 1 << 30
                continue
            available = self.a.available_counters(fit.pool)
            key = next(((id(fit.pool), s) for s, _ in fit.consumes if s in available), None)
            if key is None:
                loose += 1
            else:
                groups.setdefault(key, []).append(position)
        facts = []
        for (pool_id, counter_set), members in groups.items():
            limits = self.a.available_counters(self.devices[members[0]].pool)[counter_set]
            smallest: dict[str, Any] | None = None
            for position in members:
                amounts = dict(next(c for s, c in self.devices[position].consumes if s == counter_set))
                if smallest is None:
                    smallest = {k: v for k, v in amounts.items() if v > 0 and k in limits}
                else:
                    smallest = {k: min(v, amounts[k]) for k, v in smallest.items() if amounts.get(k, 0) > 0}
            facts.append(((pool_id, counter_set), len(members), {"pool": self.devices[members[0]].pool,
                                                                 "limits": limits, "smallest": smallest or {}}))
        result = (loose, facts)
        self._group_cache[positions] = result
        return result

    def _quick_capacity(self, positions: frozenset[int]) -> tuple[int, list[tuple[str, ...]]]:
        """An upper bound on how many of ``positions`` still fit, from the counters left (cheap), and per
        counter set the counters that lowered it (counted by the caller only when the bound cuts)."""
        loose, facts = self._groups(positions)
        total, limiting = loose, []
        for key, count, fact in facts:
            best = count
            if fact["smallest"]:
                consumed = self.consumed.get(key, _NOTHING)
                # the same counters consumed give the same bound: computed once per state of the counter set
                state = (id(fact), tuple(consumed.items()))  # (the fact is kept by _group_cache: its id holds)
                found = self._fact_bounds.get(state)
                if found is None:
                    if len(self._fact_bounds) > 1 << 16:
                        self._fact_bounds.clear()
                    found = self._fact_bounds[state] = self._fact_bound(key, count, fact, consumed)
                best, names = found
                if names:
                    limiting.append(names)
            total += max(best, 0)
        return total, limiting

    @staticmethod
    def _fact_bound(key: tuple[int, str], count: int, fact: dict[str, Any],
                    consumed: dict[str, Any]) -> tuple[int, tuple[str, ...]]:
        """How many of ``count`` candidates of one counter set the counters left hold, and the counters
        that lowered the bound, in the order they did (:meth:`_quick_capacity`)."""
        best, limiting = count, []
        limits = fact["limits"]
        for name, least in fact["smallest"].items():
            fit_count = int((limits[name] - consumed.get(name, 0)) // least)
            if fit_count < best:
                best = fit_count
                limiting.append(f"{name} of {key[1]}")
        return best, tuple(limiting)

    def _bound_ok(self, claim: int, request: int, sub: int, device: int) -> bool:
        """Whether the counters left can still hold every device the remaining requests need."""
        key = (claim, request, sub)
        checks = self._suffix_cache.get(key)
        if checks is None:
            demands = self._remaining(claim, request, sub, 0)
            union: set[int] = set()
            per_set: dict[frozenset[int], int] = {}
            for candidates, need in demands:
                union |= candidates
                per_set[candidates] = per_set.get(candidates, 0) + need
            checks = [(frozenset(union), sum(n for _, n in demands)), *per_set.items()] if demands else []
            self._suffix_cache[key] = checks
        for positions, need in checks:
            capacity, lowered = self._quick_capacity(positions)
            if capacity < need - device:
                limiting = Counter(name for names in lowered for name in names)
                alt = self.alts[(claim, request)][sub]
                names = ", ".join(name for name, _ in limiting.most_common(3))
                if len(limiting) > 3:
                    names += f" and {len(limiting) - 3} more"
                why = Counter({f"the counters left (counter {names}) hold at most {capacity}" if names else
                               f"only {capacity} candidate devices": 1})
                self._record_failure(claim, alt, why, f"{need - device} more device(s) needed")
                return False
        return True

    def _make_packing(self) -> Packing | None:
        """The exact packing check (``fit/packing.py``), where cutting a branch cannot change the answer.

        Off where a branch the check cuts could end the scheduler's search another way than by
        failing: a CEL runtime error on a candidate, a capacity request (an unrepresentable amount
        aborts), a claim that may pass the 32-device limit (``errAllocationResultMaxSizeExceeded``
        backtracks past the request), an ``All`` request beside constraints (a refused device aborts),
        and a search whose failed branches change the state (:meth:`_failures_leave_traces`).
        """
        if self._traces:
            return None
        for claim_index, claim in enumerate(self.claims):
            most = 0
            for request_index in range(len(claim.requests)):
                alts = self.alts[(claim_index, request_index)]
                if any(alt.errors or alt.spec.capacity or (alt.all_devices is not None and claim.constraints)
                       for alt in alts):
                    return None
                most += max(alt.need for alt in alts)
            if most > ALLOCATION_RESULTS_MAX_SIZE:
                return None
        groups: list[PackingGroup] = []
        limits: dict[Any, dict[str, Fraction]] = {}
        members: dict[tuple[int, str], list[int]] = {}
        for position, fit in enumerate(self.devices):
            if not self.pool_ok[position] or self._is_multi(position):
                continue
            available = self.a.available_counters(fit.pool)
            counter_set = next((s for s, _ in fit.consumes if s in available), None)
            if counter_set is None:
                groups.append(PackingGroup(("device", position), (position,), (), ((),)))
                continue
            key = (id(fit.pool), counter_set)
            limits[key] = available[counter_set]
            members.setdefault(key, []).append(position)
        scales: dict[Any, tuple[int, ...]] = {}
        for key, positions in members.items():
            names = tuple(limits[key])
            consumed = [next(c for s, c in self.devices[p].consumes if s == key[1]) for p in positions]
            # a fleet's devices share each consumption tuple (``fit/model.py``): convert each one once
            rows: dict[int, tuple[int | Fraction, ...]] = {}
            for c in consumed:
                if id(c) not in rows:
                    counters = dict(c)
                    rows[id(c)] = tuple(counters.get(name, 0) for name in names)
            # integers: each counter in units of the finest amount a device consumes of it (exact,
            # and Fraction arithmetic is what the enumeration would otherwise spend its time on);
            # amounts are int or Fraction, both with numerator and denominator
            scale = tuple(math.lcm(1, *(row[i].denominator for row in rows.values())) for i in range(len(names)))
            scales[key] = scale
            whole = {ident: tuple(v.numerator * (k // v.denominator) for v, k in zip(row, scale, strict=True))
                     for ident, row in rows.items()}
            amounts = tuple(whole[id(c)] for c in consumed)
            groups.append(PackingGroup(key, tuple(positions), names, amounts))

        known: dict[tuple[Any, tuple[tuple[str, Fraction], ...]], tuple[int, ...]] = {}

        def remaining(group: PackingGroup) -> tuple[int, ...]:
            key: tuple[int, str] = group.key  # type: ignore[assignment]  # counter-set groups only
            left, used = limits[key], self.consumed.get(key, {})
            state = (key, tuple(used.items()))  # the same counters consumed leave the same: computed once
            found = known.get(state)
            if found is None:
                if len(known) > 1 << 16:
                    known.clear()
                # at least 0: devices already allocated can overdraw a counter (shares committed before
                # 1.36.2 charged none), and the scheduler checks only the counters a device lists, so an
                # overdrawn counter must not bind the devices that consume none of it (amount 0 here)
                found = known[state] = tuple(max(0, math.floor((left[name] - used.get(name, 0)) * k))
                                             for name, k in zip(group.names, scales[group.key], strict=True))
            return found

        return Packing(groups, remaining, lambda position: not self._in_use(position))

    def _failures_leave_traces(self) -> bool:
        """Whether a branch that fails can change what later branches see: through 1.35 upstream keeps
        the counters of a device refused after its counter check (a taint, a constraint) consumed
        for the rest of the allocation (``allocator_keeps_refused_counters``). Cutting such a branch,
        even one with no solution, skips that consumption, and a later branch may then succeed where
        the scheduler's fails."""
        if not (self.a.upstream_quirks and self.a.target.allocator_keeps_refused_counters):
            return False
        if any(claim.constraints for claim in self.claims):
            return True
        return self.a.gate("DRADeviceTaints") and any(
            fit.consumes and any(t.get("effect") in ("NoSchedule", "NoExecute") for t in fit.taints)
            for fit in self.devices)

    def _packs(self, claim: int, request: int, sub: int, device: int, alt: _Alt) -> bool:
        """Whether the free devices can still hold every exclusive request from here on (``fit/packing.py``)."""
        assert self._packing is not None
        key = (claim, request, sub)
        found = self._demands.get(key)
        if found is None:
            types: list[frozenset[int]] = []
            need: list[int] = []
            current: int | None = None
            for index, (candidates, count) in enumerate(self._remaining(claim, request, sub, 0)):
                if any(self._is_multi(p) for p in candidates):
                    continue  # a shared device serves any number: no bound
                if candidates not in types:
                    types.append(candidates)
                    need.append(0)
                t = types.index(candidates)
                need[t] += count
                if index == 0 and not alt.admin:
                    current = t
            found = self._demands[key] = (tuple(types), need, current)
        types_, base, current_ = found
        demand = list(base)
        if current_ is not None:
            demand[current_] -= device
        if self._packing.fits(types_, tuple(demand)) is not False:
            return True
        self._record_failure(claim, alt, Counter({
            "no packing of the devices still free holds the requests left (counters left per counter set)": 1}),
            f"{sum(demand)} more device(s) needed")
        return False
