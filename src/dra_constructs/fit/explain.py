"""Why a search found no solution: the request that fails even alone, or where the search got furthest."""

from __future__ import annotations

from dra_constructs.cel.matching import explain_no_match
from dra_constructs.fit.bounds import _Bounds
from dra_constructs.fit.constraints import _tolerated
from dra_constructs.fit.model import Claim
from dra_constructs.fit.search_state import _Alt


class _Explain(_Bounds):
    """The reason of a failed search."""

    def _explain(self) -> str:
        for claim_index, claim in enumerate(self.claims):
            for request_index, request in enumerate(claim.requests):
                alts = self.alts[(claim_index, request_index)]
                problems = [self._alone(claim, alt) for alt in alts]
                if all(p is not None for p in problems):
                    joined = "; ".join(p for p in problems if p)
                    self.failed = (claim.name, request.name)
                    self.no_match = all(not alt.candidates for alt in alts)
                    return f"claim {claim.name}, request {request.name}: {joined}"
        if self.deepest_reason is not None:
            claim_index, name, why, summary = self.deepest_reason
            self.failed = (self.claims[claim_index].name, name.partition("/")[0])
            common = why.most_common(3)
            detail = ", ".join(f"{reason} ({count})" for reason, count in common) or "no device left"
            if len(why) > len(common):
                detail += f" and {len(why) - len(common)} more"
            return (f"the claims do not fit together: with {max(self.deepest, 0)} device(s) allocated, claim "
                    f"{self.claims[claim_index].name}, request {name} gets no device"
                    + (f" ({summary})" if summary else "") + f": {detail}")
        return "no solution"

    def _alone(self, claim: Claim, alt: _Alt) -> str | None:
        """Why ``alt`` cannot be satisfied even alone on this node (``None``: it can)."""
        key = (alt.spec, alt.class_selectors)
        if key not in self._alone_cache:
            self._alone_cache[key] = self._alone_uncached(claim, alt)
        return self._alone_cache[key]

    def _alone_uncached(self, claim: Claim, alt: _Alt) -> str | None:
        usable = [p for p in alt.candidates if self.pool_ok[p]]
        if not alt.candidates:
            pool_devices = [d.device for d in self.devices]
            if not pool_devices:
                return "no devices on this node"
            clause = explain_no_match(list(alt.class_selectors), list(alt.spec.selectors), pool_devices,
                                      self.a.target, max(alt.need, 1), alt.spec.device_class)
            return f"no device of class {alt.spec.device_class} matches: {clause}"
        if alt.all_devices is not None:
            return None
        if usable and not self.a.gate("DRAPartitionableDevices") and all(self.devices[p].consumes for p in usable):
            return (f"all {len(usable)} matching devices consume counters (partitionable devices), but the "
                    "DRAPartitionableDevices feature gate is off")
        free = [p for p in usable if alt.admin or self.devices[p].id not in self.a.allocated.devices]
        tolerated = [p for p in free if not any(
            t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(t, alt.spec)
            for t in self.devices[p].taints) or not self.a.gate("DRADeviceTaints")]
        saved = self.consumed
        self.consumed = {}
        try:
            capacity, limiting = self._capacity_of(tolerated) if not alt.admin else (len(tolerated), None)
        finally:
            self.consumed = saved
        if capacity >= alt.need:
            return None
        parts = [f"needs {alt.need} device(s); {len(alt.candidates)} match"]
        if len(usable) < len(alt.candidates):
            parts.append(f"{len(alt.candidates) - len(usable)} in incomplete or invalid pools")
        if len(free) < len(usable):
            parts.append(f"{len(usable) - len(free)} already allocated")
        if len(tolerated) < len(free):
            keys = sorted({str(t.get("key")) for p in free for t in self.devices[p].taints})
            parts.append(f"{len(free) - len(tolerated)} tainted ({', '.join(keys)}) and not tolerated")
        parts.append(f"at most {capacity} can be allocated together" + (f" ({limiting} exhausted)" if limiting else ""))
        return ", ".join(parts)
