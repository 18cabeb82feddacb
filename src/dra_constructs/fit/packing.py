"""An exact packing check that prunes the allocator's search without changing its answer.

The scheduler's search (``allocateOne``) backtracks device by device. On a node of identical
partitionable GPUs (DynamicMIG: every placement a device consuming memory slices and engines of
its GPU's counter set) an exact packing can take it tens of thousands of steps, most of them in
branches that cannot be completed. This module decides, for the requests still to allocate,
whether the devices still free can hold them *at all*, in a relaxation of the real problem:

- each device counts against one counter set (the first its pool defines), and only the counters
  of that set bound it;
- every request still to allocate needs ``count`` devices among its candidates (a
  ``firstAvailable`` request: the fewest of any alternative, among the union of their candidates);
  constraints, taints, tolerations and the order of claims are ignored.

Every allocation the real rules allow is allowed by the relaxation, so "no packing" proves that
the branch has no solution: cutting it leaves the first solution the scheduler finds (and so the
devices it picks) unchanged. The check is exact for what it models: per counter set, the count
vectors its free devices can serve together are enumerated once per state of that set (identical
GPUs in identical states share one entry: the symmetry of identical devices), then a dynamic
program over the counter sets asks whether their sum covers what the requests need.
Sizes are bounded (:data:`MAX_ENUMERATION`, :data:`MAX_FRONTIER`); past them the check answers
"unknown" and the search goes on unpruned.

No library does this: it is a bound specific to counter sets and the allocator's order; the
dynamic program is a few lines over small integer vectors.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from operator import add, ge, le, sub

__all__ = ["MAX_ENUMERATION", "MAX_FRONTIER", "MAX_WORK", "Packing", "PackingGroup"]

#: Nodes of one counter set's enumeration before the check gives up on a state (answers "unknown").
MAX_ENUMERATION = 20_000
#: Sums kept between counter sets before the check answers "unknown".
MAX_FRONTIER = 2_000
#: Cached sums before the cache starts over.
MAX_CACHE = 200_000
#: Vector comparisons and sums one search may spend on keeping the maximal vectors and on adding
#: counter sets together, before the check answers "unknown" for the rest of it. Keeping the
#: maximal ones of n vectors takes up to n**2/2 comparisons (2,000 vectors no one dominates: 2
#: million, seconds), so the sizes above alone do not bound the time the check adds to a search.
MAX_WORK = 5_000_000

Vector = tuple[int, ...]


class _TooBig(Exception):
    """The relaxation is too large to decide cheaply: do not prune."""


@dataclass(frozen=True)
class PackingGroup:
    """The devices that count against one counter set (or one device without counters).

    ``amounts[i]`` is what ``positions[i]`` consumes of each of ``names`` (0 where it does not), in
    integer units of each counter (the caller scales exact amounts).
    """

    key: Hashable
    positions: tuple[int, ...]
    names: tuple[str, ...]
    amounts: tuple[tuple[int, ...], ...]


def _pareto_max(vectors: set[Vector]) -> frozenset[Vector]:
    """The vectors no other one dominates (>= in every component)."""
    kept: list[Vector] = []
    for vector in sorted(vectors, key=sum, reverse=True):  # (map over the operators: the hot loop of the check)
        if not any(all(map(ge, other, vector)) for other in kept):
            kept.append(vector)
    return frozenset(kept)


class Packing:
    """Whether the free devices of a node can still hold a demand (see the module docstring).

    ``remaining(group)`` gives the counters left in a group's counter set (in ``group.names``
    order), ``free(position)`` whether a device may still be allocated.
    """

    def __init__(self, groups: Sequence[PackingGroup], remaining: Callable[[PackingGroup], tuple[int, ...]],
                 free: Callable[[int], bool]) -> None:
        self.groups = list(groups)
        self.remaining = remaining
        self.free = free
        self._vectors: dict[Hashable, frozenset[Vector]] = {}
        self._ids: dict[frozenset[Vector], int] = {}
        self._sums: dict[Hashable, frozenset[Vector]] = {}
        self._sets: list[frozenset[Vector]] = []
        self._caps: dict[tuple[frozenset[int], ...], Vector] = {}
        self._members: dict[tuple[frozenset[int], ...], list[list[tuple[int, tuple[int, ...]]]]] = {}
        self.disabled = False
        #: Comparisons and sums spent so far (:data:`MAX_WORK`).
        self.work = 0

    def fits(self, types: tuple[frozenset[int], ...], demand: Vector) -> bool | None:
        """``False``: no packing holds ``demand[t]`` devices of each candidate set ``types[t]``;
        ``True``: one does (of the relaxation); ``None``: too large to tell."""
        if self.disabled:
            return None
        if not any(demand):
            return True
        members = self._members.get(types)
        if members is None:
            members = self._members[types] = [
                [(i, tuple(t for t, candidates in enumerate(types) if position in candidates))
                 for i, position in enumerate(group.positions)] for group in self.groups]
        cap = self._caps.get(types)
        if cap is None or any(d > c for d, c in zip(demand, cap, strict=True)):
            cap = self._caps[types] = demand if cap is None else tuple(map(max, demand, cap))
        try:
            ids = []
            for group, relevant in zip(self.groups, members, strict=True):
                free = tuple(i for i, member in relevant if member and self.free(group.positions[i]))
                if not free:
                    continue
                # keyed by what the free devices consume and serve, not by their names: identical
                # GPUs in identical states share one enumeration
                left = self.remaining(group) if group.names else ()
                state = (len(types), tuple((group.amounts[i], relevant[i][1]) for i in free), left)
                vectors = self._vectors.get(state)
                if vectors is None:
                    vectors = self._vectors[state] = self._maximal(
                        self._enumerate(group, relevant, free, left, len(types)))
                ids.append(self._ids.setdefault(vectors, len(self._ids)))
            # What the counter sets hold together, capped at the demand, set by set in the order of
            # their vector sets: counter sets in the same state (identical GPUs) give the same
            # prefix, and a step of the search changes one set, so most prefixes are known.
            ids.sort()
            sums: frozenset[Vector] = frozenset({(0,) * len(types)})
            for k in range(len(ids)):
                key = (types, cap, tuple(ids[:k + 1]))
                found = self._sums.get(key)
                if found is None:
                    if len(self._sums) > MAX_CACHE:
                        self._sums.clear()
                    vectors = self._by_id(ids[k])
                    self.work += len(sums) * len(vectors)
                    found = self._sums[key] = self._maximal(self._add(sums, vectors, cap))
                sums = found
            return any(all(s >= d for s, d in zip(total, demand, strict=True)) for total in sums)
        except _TooBig:
            self.disabled = True  # one blow-up predicts more: leave the rest of this search unpruned
            return None

    def _maximal(self, vectors: set[Vector]) -> frozenset[Vector]:
        """:func:`_pareto_max`, charged to the search's :data:`MAX_WORK` (at most n**2/2 comparisons)."""
        self.work += len(vectors) * (len(vectors) + 1) // 2
        if self.work > MAX_WORK:
            raise _TooBig
        return _pareto_max(vectors)

    def _by_id(self, ident: int) -> frozenset[Vector]:
        if len(self._sets) < len(self._ids):
            self._sets = [v for v, _ in sorted(self._ids.items(), key=lambda item: item[1])]
        return self._sets[ident]

    @staticmethod
    def _enumerate(group: PackingGroup, relevant: list[tuple[int, tuple[int, ...]]], free: tuple[int, ...],
                   left: tuple[int, ...], size: int) -> set[Vector]:
        """Count vectors (devices per type) the free devices of one group serve together: every one
        they can serve is below one of these."""
        # counters the free devices cannot exhaust even all together bind nothing: leave them out
        binding = [n for n in range(len(left)) if sum(group.amounts[i][n] for i in free) > left[n]]
        items = [(tuple(group.amounts[i][n] for n in binding), relevant[i][1]) for i in free]
        room0 = tuple(left[n] for n in binding)
        found: set[Vector] = set()
        counts = [0] * size
        skipped: list[tuple[int, ...]] = []
        budget = [MAX_ENUMERATION]

        def walk(index: int, room: tuple[int, ...]) -> None:
            budget[0] -= 1
            if budget[0] < 0:
                raise _TooBig
            if index == len(items):
                # a device skipped that still fits would serve one more: this one is not maximal
                if not any(all(map(le, amounts, room)) for amounts in skipped):
                    found.add(tuple(counts))
                return
            amounts, types = items[index]
            after = tuple(map(sub, room, amounts))
            if not after or min(after) >= 0:
                for t in types:
                    counts[t] += 1
                    walk(index + 1, after)
                    counts[t] -= 1
            skipped.append(amounts)
            walk(index + 1, room)
            skipped.pop()

        walk(0, room0)
        return found

    @staticmethod
    def _add(sums: frozenset[Vector], vectors: frozenset[Vector], cap: Vector) -> set[Vector]:
        """Every sum of one of ``sums`` and one of ``vectors``, capped at ``cap``."""
        combined = {tuple(map(min, map(add, total, vector), cap)) for total in sums for vector in vectors}
        if len(combined) > MAX_FRONTIER:
            raise _TooBig
        return combined
