"""Old import paths of modules that moved in the 0.2 layout, kept working at run time.

0.1 kept the construct layer and the node agent beside the pure core; 0.2 puts them in
``constructs/`` and ``agent/``. A meta-path finder maps every old dotted name to its new module
(the same module object, so ``isinstance`` and monkeypatching keep working). Type checkers see
only the new paths: import from those (or from :mod:`dra_constructs`) in new code.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

__all__ = ["MOVED", "install"]

#: Old dotted prefix -> new dotted prefix (longest match wins).
MOVED: dict[str, str] = {
    "dra_constructs.sanitizer.runtime": "dra_constructs.agent",
    "dra_constructs.sanitizer.construct": "dra_constructs.constructs.sanitizer.construct",
    "dra_constructs.sanitizer.policy_class": "dra_constructs.constructs.sanitizer.policy_class",
    "dra_constructs.sanitizer._pod": "dra_constructs.constructs.sanitizer._pod",
    "dra_constructs.sanitizer._agent_spec": "dra_constructs.constructs.sanitizer._agent_spec",
    "dra_constructs.sanitizer._bundle": "dra_constructs.constructs.sanitizer._bundle",
    "dra_constructs.sanitizer._checkov": "dra_constructs.constructs.sanitizer._checkov",
    "dra_constructs.sanitizer": "dra_constructs.constructs.sanitizer",
    "dra_constructs.guardrails.app_validation": "dra_constructs.constructs.guardrails",
    "dra_constructs.guardrails.admission_policy": "dra_constructs.constructs.admission_policy",
    "dra_constructs.tenants.construct": "dra_constructs.constructs.tenants",
    "dra_constructs.claims": "dra_constructs.constructs.claims",
    "dra_constructs.workloads": "dra_constructs.constructs.workloads",
    "dra_constructs.plus": "dra_constructs.constructs.plus",
    "dra_constructs._rendered": "dra_constructs.constructs._rendered",
    "dra_constructs._names": "dra_constructs.constructs._names",
    "dra_constructs._scope": "dra_constructs.constructs.scope",
}


_LONGEST_FIRST = sorted(MOVED, key=len, reverse=True)


def _new_name(fullname: str) -> str | None:
    for old in _LONGEST_FIRST:
        if fullname == old or fullname.startswith(old + "."):
            return MOVED[old] + fullname[len(old):]
    return None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self._target = target
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self._target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Already executed under its new name: only undo the import system's ``__spec__`` overwrite."""
        module.__spec__ = self._spec


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None,
                  ) -> importlib.machinery.ModuleSpec | None:
        new = _new_name(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new), is_package=True)


def install() -> None:
    """Register the finder once (idempotent)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        # First, so that an old name is never loaded a second time from a moved file's new folder.
        sys.meta_path.insert(0, _MovedFinder())
