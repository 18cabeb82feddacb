"""A small builder for DRA CEL selectors: only forms the Kubernetes API server accepts.

- attributes and capacities are always domain-qualified (``device.attributes['gpu.nvidia.com']``);
- quantities and versions are compared with ``compareTo`` (no ``<``/``>=`` on them in Kubernetes CEL);
- versions are compared for equality against ``semver(...)``, never a plain string;
- optional attributes are guarded with ``in`` (a missing attribute is a run-time error, not a no-match).

Pure Python, no CEL engine needed: the output is checked by :mod:`dra_constructs.cel` like any
user-written expression.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from dra_constructs.catalog.driver import ATTRIBUTE_DOMAIN

if TYPE_CHECKING:
    from dra_constructs.catalog.models import GpuSpec, MigProfile

__all__ = [
    "all_of",
    "any_of",
    "attribute",
    "capacity",
    "gpu_model_clause",
    "gpu_model_selectors",
    "has_attribute",
    "memory_band",
    "mig_profile_selectors",
    "quantity_at_least",
    "quantity_at_most",
    "string_equals",
    "string_literal",
    "version_at_least",
    "version_equals",
]

#: Whole-GPU memory selectors accept NVML totals within this fraction of the catalog value, so a
#: model pin stays true across board variants, ECC settings and driver releases.
MEMORY_TOLERANCE = 0.03

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def string_literal(value: str) -> str:
    """A single-quoted CEL string literal with backslashes and quotes escaped."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _member(base: str, name: str) -> str:
    # CEL field selection needs an identifier; anything else uses index syntax.
    return f"{base}.{name}" if _IDENT.match(name) else f"{base}[{string_literal(name)}]"


def attribute(name: str, domain: str = ATTRIBUTE_DOMAIN) -> str:
    """``device.attributes['<domain>'].<name>``."""
    return _member(f"device.attributes[{string_literal(domain)}]", name)


def capacity(name: str, domain: str = ATTRIBUTE_DOMAIN) -> str:
    """``device.capacity['<domain>'].<name>`` (a Quantity)."""
    return _member(f"device.capacity[{string_literal(domain)}]", name)


def has_attribute(name: str, domain: str = ATTRIBUTE_DOMAIN) -> str:
    """``'<name>' in device.attributes['<domain>']``: guard for optional attributes."""
    return f"{string_literal(name)} in device.attributes[{string_literal(domain)}]"


def string_equals(expression: str, value: str) -> str:
    """``<expression> == '<value>'``."""
    return f"{expression} == {string_literal(value)}"


def quantity_at_least(expression: str, quantity: str) -> str:
    """``<expression>.compareTo(quantity('<q>')) >= 0``."""
    return f"{expression}.compareTo(quantity({string_literal(quantity)})) >= 0"


def quantity_at_most(expression: str, quantity: str) -> str:
    """``<expression>.compareTo(quantity('<q>')) <= 0``."""
    return f"{expression}.compareTo(quantity({string_literal(quantity)})) <= 0"


def version_at_least(expression: str, version: str) -> str:
    """``<expression>.compareTo(semver('<v>')) >= 0``."""
    return f"{expression}.compareTo(semver({string_literal(version)})) >= 0"


def version_equals(expression: str, version: str) -> str:
    """``<expression> == semver('<v>')`` (a version never equals a plain string)."""
    return f"{expression} == semver({string_literal(version)})"


def _group(clause: str) -> str:
    return f"({clause})" if ("||" in clause or "&&" in clause or "?" in clause) else clause


def all_of(clauses: Iterable[str]) -> str:
    """Clauses joined with ``&&`` (each parenthesized where needed)."""
    parts = [_group(c) for c in clauses]
    return " && ".join(parts) if parts else "true"


def any_of(clauses: Iterable[str]) -> str:
    """Clauses joined with ``||`` (each parenthesized where needed)."""
    parts = [_group(c) for c in clauses]
    return " || ".join(parts) if parts else "false"


def memory_band(spec: GpuSpec) -> tuple[str, str]:
    """(lower, upper) bounds in MiB around a model's NVML memory total, as Quantity strings."""
    low = int(spec.memory_mib * (1 - MEMORY_TOLERANCE))
    high = int(spec.memory_mib * (1 + MEMORY_TOLERANCE)) + 1
    return f"{low}Mi", f"{high}Mi"


def gpu_model_clause(spec: GpuSpec) -> str:
    """One expression that is true exactly for whole GPUs of this model (architecture + memory band)."""
    low, high = memory_band(spec)
    memory = capacity("memory")
    return all_of([
        string_equals(attribute("architecture"), spec.architecture),
        quantity_at_least(memory, low),
        quantity_at_most(memory, high),
    ])


def gpu_model_selectors(specs: Iterable[GpuSpec]) -> list[str]:
    """Selectors pinning whole GPUs to one of ``specs`` (one selector; ``||`` across models)."""
    specs = list(specs)
    if len(specs) == 1:
        low, high = memory_band(specs[0])
        memory = capacity("memory")
        return [
            string_equals(attribute("architecture"), specs[0].architecture),
            quantity_at_least(memory, low),
            quantity_at_most(memory, high),
        ]
    return [any_of(gpu_model_clause(s) for s in specs)]


def mig_profile_selectors(spec: GpuSpec, profile: MigProfile) -> list[str]:
    """Selectors pinning a MIG slice: the exact profile on a parent of the model's architecture.

    The profile attribute is what the driver reports exactly; memory is not pinned because NVML's
    per-instance memory is slightly below the profile name and differs by driver.
    """
    return [
        string_equals(attribute("profile"), profile.name),
        string_equals(attribute("architecture"), spec.architecture),
    ]
