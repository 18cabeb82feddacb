"""Claim constraints (``matchAttribute`` / ``distinctAttribute``), attribute lookup and taint tolerance."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from dra_constructs.fit.model import Constraint, FitDevice, SubRequest


class _ConstraintState:
    def __init__(self, constraint: Constraint, compare_distinct: bool = True) -> None:
        self.constraint = constraint
        self.compare_distinct = compare_distinct  # False: the 1.34 allocator (see Target)
        self.names = set(constraint.requests)
        self.value: Any = None
        self.count = 0
        self.seen: Counter[Any] = Counter()

    def applies(self, base: str, sub: str) -> bool:
        return not self.names or base in self.names or (bool(sub) and f"{base}/{sub}" in self.names)

    def add(self, base: str, sub: str, device: FitDevice) -> bool:
        if not self.applies(base, sub):
            return True
        value = _attribute(device, self.constraint.attribute)
        if value is None:
            return False
        if self.constraint.distinct:
            if self.seen[value] and self.compare_distinct:
                return False
            self.seen[value] += 1
            return True
        if self.count and value != self.value:
            return False
        if not self.count:
            self.value = value
        self.count += 1
        return True

    def remove(self, base: str, sub: str, device: FitDevice) -> None:
        if not self.applies(base, sub):
            return
        if self.constraint.distinct:
            value = _attribute(device, self.constraint.attribute)
            self.seen[value] -= 1
        else:
            self.count -= 1


def _attribute(device: FitDevice, name: str) -> tuple[str, Any] | None:
    """``lookupAttribute``: the fully qualified name, or the plain name under the driver's domain."""
    attributes = device.device.attributes
    value = attributes.get(name)
    if value is None:
        domain, _, plain = name.partition("/")
        if not plain or domain != device.device.driver:
            return None
        value = attributes.get(plain)
    if not value:
        return None
    kind, raw = next(iter(value.items()))
    return (kind, raw) if kind in ("int", "bool", "string", "version") else None


def _tolerated(taint: Mapping[str, Any], spec: SubRequest) -> bool:
    return any(t.tolerates(taint) for t in spec.tolerations)
