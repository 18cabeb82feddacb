"""MIG isolation levels: whether a tenant's MIG slices may share a physical GPU with another tenant's.

Pure Python, standard library only: the constructs render the tolerations, the guardrails check
them and the node agent (which carries this module in its zipapp) places the taints.

MIG partitions a GPU's memory and SMs, but not everything: cross-instance timing channels through
memory barriers ("Behind Bars", USENIX Security 2026, A100/H100) and NVLink contention (NVBleed,
2025) reach from one MIG instance to the others on the same GPU (docs/threat-model.md). The level
``exclusive-gpu`` keeps a tenant's slices off GPUs another tenant holds. Kubernetes cannot say
"not on a GPU another claim holds" in one claim's CEL, so the sanitizer agent enforces it with a
device taint of key :data:`ISOLATION_TAINT_KEY` on every MIG device of each GPU that holds a slice
(effect ``NoSchedule``; only new allocations are kept away, nothing is evicted):

- value ``<namespace>``: the GPU holds slices of exactly one tenant, an ``exclusive-gpu`` one;
  only its own claims tolerate it (:func:`own_toleration`, operator ``Equal``);
- value :data:`SHARED_VALUE` (``Shared``): the GPU holds slices of ``shared-gpu`` tenants only
  (placed where the agent's ``mig_isolation`` is on); their claims tolerate it
  (:func:`shared_toleration`), an exclusive tenant's never do;
- value :data:`CONFLICT_VALUE` (``Conflict``): the GPU already holds an exclusive tenant beside
  another tenant (two allocations raced the taint); nobody tolerates it, nothing new lands there.

A namespace is a DNS label (lower case), so ``Shared`` and ``Conflict`` can never be a tenant.
A GPU with no slice held carries no taint: the first allocation decides its value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

__all__ = [
    "CONFLICT_VALUE",
    "ISOLATION_LABEL",
    "ISOLATION_TAINT_KEY",
    "LEVELS",
    "SHARED_VALUE",
    "IsolationLevel",
    "gpu_taint_value",
    "isolation_problem",
    "own_toleration",
    "shared_toleration",
    "tolerations_for",
]

IsolationLevel = Literal["shared-gpu", "exclusive-gpu"]
#: The levels, weakest first.
LEVELS: tuple[IsolationLevel, ...] = ("shared-gpu", "exclusive-gpu")
#: Key of the agent's isolation taint (a DeviceTaintRule per MIG device of a held GPU).
ISOLATION_TAINT_KEY = "isolation.dra-constructs.io/gpu"
#: Label ``GpuTenant`` puts on its Namespace: the tenant's level (the guardrails read it).
ISOLATION_LABEL = "isolation.dra-constructs.io/mig"
#: Taint value of a GPU held by shared-gpu tenants only.
SHARED_VALUE = "Shared"
#: Taint value of a GPU whose isolation is already broken (tolerated by nobody).
CONFLICT_VALUE = "Conflict"


def own_toleration(tenant: str) -> dict[str, Any]:
    """The toleration an exclusive tenant's requests carry: its own GPUs, nobody else's."""
    return {"key": ISOLATION_TAINT_KEY, "operator": "Equal", "value": tenant}


def shared_toleration() -> dict[str, Any]:
    """The toleration a shared tenant's requests carry: GPUs held by shared tenants only."""
    return {"key": ISOLATION_TAINT_KEY, "operator": "Equal", "value": SHARED_VALUE}


def tolerations_for(level: IsolationLevel, tenant: str) -> list[dict[str, Any]]:
    """The isolation toleration of a tenant at ``level``."""
    return [own_toleration(tenant)] if level == "exclusive-gpu" else [shared_toleration()]


def _key_matches(toleration: Mapping[str, Any]) -> bool:
    key = toleration.get("key")
    return key == ISOLATION_TAINT_KEY or (key in (None, "") and toleration.get("operator") == "Exists")


def isolation_problem(toleration: Mapping[str, Any], namespace: str | None, exclusive: bool) -> str | None:
    """Why a request's toleration breaks the isolation of another tenant (None: it does not).

    ``namespace``: the claim's; ``exclusive``: whether that namespace's tenant is exclusive-gpu.
    Allowed: ``Equal`` its own namespace (an exclusive tenant) or ``Equal Shared`` (a shared one).
    """
    if not _key_matches(toleration):
        return None
    if toleration.get("operator", "Equal") == "Exists":
        what = "every value of the key" if toleration.get("key") else "every taint (no key, operator Exists)"
        return f"tolerates {what}: it lands on GPUs of exclusive tenants and on GPUs in conflict"
    value = toleration.get("value")
    if value == SHARED_VALUE:
        return "an exclusive-gpu tenant tolerates the GPUs shared tenants hold" if exclusive else None
    if value == CONFLICT_VALUE:
        return "tolerates GPUs whose isolation is already broken (Conflict)"
    if namespace is not None and value == namespace:
        return None
    return f"tolerates the isolation taint of tenant {value!r} (another namespace): it lands on that tenant's GPUs"


def gpu_taint_value(tenants: Mapping[str, bool], shared_taints: bool) -> str | None:
    """The isolation taint value of a GPU held by ``tenants`` (namespace -> exclusive); None: no taint.

    One exclusive tenant alone: its namespace; shared tenants only: ``Shared`` (where
    ``shared_taints``, else none); an exclusive tenant beside any other: ``Conflict``.
    """
    exclusive = sorted(t for t, e in tenants.items() if e)
    if not tenants or (not exclusive and not shared_taints):
        return None
    if not exclusive:
        return SHARED_VALUE
    return exclusive[0] if len(tenants) == 1 else CONFLICT_VALUE
