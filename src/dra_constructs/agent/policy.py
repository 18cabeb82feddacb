"""A claim's preemption policy: opaque device configuration addressed to the sanitizer.

Guideline rule 4 (claims declare their preemption policy). A claim (``spec.devices.config[]``)
or a DeviceClass (``spec.config[]``) carries::

    opaque:
      driver: sanitizer.dra-constructs.io
      parameters:
        apiVersion: sanitizer.dra-constructs.io/v1alpha1
        kind: PreemptionPolicy
        gracePeriodSeconds: 30
        onContextsRemaining: Kill        # or Quarantine: never SIGKILL, hold until 0 contexts
        coldResetOnRelease: false

The scheduler copies it into ``status.allocation.devices.config[]`` (source ``FromClaim`` or
``FromClass``); the NVIDIA kubelet plugin only decodes configs addressed to ``gpu.nvidia.com``,
so it ignores this one. The agent reads it from the allocated claim (:func:`policy_for`),
stores it with the device's state, and honours it at the release. Unreadable parameters are
not ignored silently: the agent falls back to its strictest reading (no change of grace,
Quarantine instead of Kill, cold reset on) and logs why.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "POLICY_API_VERSION",
    "POLICY_KIND",
    "SANITIZER_DRIVER",
    "ContextsRemaining",
    "PreemptionPolicy",
    "policy_for",
]

#: The "driver" name opaque configs for the sanitizer are addressed to (not a DRA driver).
SANITIZER_DRIVER = "sanitizer.dra-constructs.io"
POLICY_API_VERSION = "sanitizer.dra-constructs.io/v1alpha1"
POLICY_KIND = "PreemptionPolicy"


class ContextsRemaining(StrEnum):
    """What the barrier does with contexts still alive after the grace period."""

    KILL = "Kill"              # SIGKILL, then quarantine if they survive the drain timeout
    QUARANTINE = "Quarantine"  # never SIGKILL: quarantine until NVML reports 0 contexts, then sanitize


class PreemptionPolicy(BaseModel):
    """The parameters of the opaque config (camelCase on the wire, as Kubernetes objects are).

    Python callers pass the snake_case names; the camelCase ones are validation/serialization aliases
    only (not ``alias=``), so type checkers without the pydantic plugin see the snake_case signature.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    api_version: Literal["sanitizer.dra-constructs.io/v1alpha1"] = Field(
        default="sanitizer.dra-constructs.io/v1alpha1", validation_alias="apiVersion",
        serialization_alias="apiVersion")
    kind: Literal["PreemptionPolicy"] = "PreemptionPolicy"
    grace_period_seconds: float | None = Field(
        default=None, ge=0, le=3600, validation_alias="gracePeriodSeconds",
        serialization_alias="gracePeriodSeconds",
        description="SIGTERM to SIGKILL for this claim's processes (default: the agent's grace_period_s).")
    on_contexts_remaining: ContextsRemaining = Field(
        default=ContextsRemaining.KILL, validation_alias="onContextsRemaining",
        serialization_alias="onContextsRemaining",
        description="Kill, or quarantine the slice until the driver reports zero contexts.")
    cold_reset_on_release: bool = Field(
        default=False, validation_alias="coldResetOnRelease",
        serialization_alias="coldResetOnRelease",
        description="Recreate the partition (or reset the GPU) at release even if the node's partition_reset "
                    "is off.")

    def parameters(self) -> dict[str, Any]:
        """The ``opaque.parameters`` object (only fields that differ from the defaults, plus the type)."""
        body = self.model_dump(by_alias=True, mode="json", exclude_defaults=True)
        return {"apiVersion": POLICY_API_VERSION, "kind": POLICY_KIND, **body}

    def opaque(self) -> dict[str, Any]:
        """``{driver, parameters}`` for a claim's or a DeviceClass's ``config[].opaque``."""
        return {"driver": SANITIZER_DRIVER, "parameters": self.parameters()}


#: What an unreadable policy becomes: the strictest reading of every field.
STRICTEST = PreemptionPolicy(on_contexts_remaining=ContextsRemaining.QUARANTINE, cold_reset_on_release=True)


def policy_for(claim: dict[str, Any], request: str | None) -> tuple[PreemptionPolicy | None, str | None]:
    """The sanitizer policy that applies to ``request`` of an allocated claim, and a problem if any.

    Claim configs win over class configs (the allocation lists class configs first, and a later
    entry wins, as for the DRA driver's own configs), except that no config switches off a cold
    reset another one asks for: the claim is the tenant's, the DeviceClass the administrator's,
    and the reset protects the next tenant. ``None`` if the claim has none.
    """
    configs: Any = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
    configs = configs.get("config") or []
    found: PreemptionPolicy | None = None
    problem: str | None = None
    reset = False  # any applicable config asked for a cold reset
    ordered = sorted(configs, key=lambda c: 0 if c.get("source") == "FromClass" else 1)
    for config in ordered:
        opaque = config.get("opaque") or {}
        if opaque.get("driver") != SANITIZER_DRIVER:
            continue
        requests = config.get("requests") or []
        if requests and request is not None and request not in requests and not any(
                request.startswith(f"{r}/") for r in requests):  # firstAvailable: "<request>/<sub>"
            continue
        try:
            found = PreemptionPolicy.model_validate(opaque.get("parameters") or {})
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "parameters"
            problem = f"unreadable {POLICY_KIND} ({where}: {first['msg']}); applying the strictest policy"
            found = STRICTEST
        reset = reset or found.cold_reset_on_release
    if found is not None and reset and not found.cold_reset_on_release:
        found = found.model_copy(update={"cold_reset_on_release": True})
    return found, problem
