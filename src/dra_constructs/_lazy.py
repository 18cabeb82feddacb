"""Lazy re-exports (PEP 562): construct-layer names load cdk8s only when first used."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

TYPE_CHECKING = False  # no typing import at start-up (docs/performance.md)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` importing ``names[name]`` (relative to ``package``) on first access."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module, package), name)

    return __getattr__
