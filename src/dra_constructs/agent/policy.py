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
stores it with the device's state, and honours it at the release.

The DeviceClass is the administrator's, the claim the tenant's: a claim may only make the
barrier stricter or faster, never weaker or slower than its class allows (:func:`policy_for`).
An unreadable config is ignored, with the problem reported (an Event and the evidence name
the bad key): the other configs and the agent's own settings apply, never a tenant-chosen
"strictest" reading that would ask for a reset the node may not perform.
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
        description="Recreate the MIG partition at release even if the node's partition_reset is off, where "
                    "the node can (MIG config capability); elsewhere the release runs without it and says so.")

    def parameters(self) -> dict[str, Any]:
        """The ``opaque.parameters`` object (only fields that differ from the defaults, plus the type)."""
        body = self.model_dump(by_alias=True, mode="json", exclude_defaults=True)
        return {"apiVersion": POLICY_API_VERSION, "kind": POLICY_KIND, **body}

    def opaque(self) -> dict[str, Any]:
        """``{driver, parameters}`` for a claim's or a DeviceClass's ``config[].opaque``."""
        return {"driver": SANITIZER_DRIVER, "parameters": self.parameters()}


def _set(policy: PreemptionPolicy, name: str) -> bool:
    return name in policy.model_fields_set


def _merge(admin: list[PreemptionPolicy], tenant: list[PreemptionPolicy]) -> PreemptionPolicy:
    """One policy: the class configs (admin) bound what the claim configs (tenant) may ask.

    - grace: the shortest that any config sets (a claim can shorten it, never lengthen it; the
      barrier also caps it at the agent's ``grace_period_s``);
    - ``onContextsRemaining``: Kill (the default) unless a class asks for Quarantine and no
      claim asks for Kill (a claim cannot trade the SIGKILL for an open-ended quarantine);
    - ``coldResetOnRelease``: on if any config asks (performed only where the node can, see
      the barrier).
    """
    every = admin + tenant
    graces = [p.grace_period_seconds for p in every if p.grace_period_seconds is not None]
    quarantine = any(p.on_contexts_remaining is ContextsRemaining.QUARANTINE for p in admin) and not any(
        p.on_contexts_remaining is ContextsRemaining.KILL and _set(p, "on_contexts_remaining") for p in tenant)
    return PreemptionPolicy(
        grace_period_seconds=min(graces) if graces else None,
        on_contexts_remaining=ContextsRemaining.QUARANTINE if quarantine else ContextsRemaining.KILL,
        cold_reset_on_release=any(p.cold_reset_on_release for p in every),
    )


def policy_for(claim: dict[str, Any], request: str | None) -> tuple[PreemptionPolicy | None, str | None]:
    """The sanitizer policy that applies to ``request`` of an allocated claim, and a problem if any.

    Class configs (``FromClass``, the administrator's) and claim configs (``FromClaim``, the
    tenant's) are merged by :func:`_merge`: the claim can only tighten. An unreadable config
    is skipped and named in the problem. ``None`` if no readable config applies.
    """
    configs: Any = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
    configs = configs.get("config") or []
    admin: list[PreemptionPolicy] = []
    tenant: list[PreemptionPolicy] = []
    problems: list[str] = []
    for config in configs:
        opaque = config.get("opaque") or {}
        if opaque.get("driver") != SANITIZER_DRIVER:
            continue
        requests = config.get("requests") or []
        if requests and request is not None and request not in requests and not any(
                request.startswith(f"{r}/") for r in requests):  # firstAvailable: "<request>/<sub>"
            continue
        source = "class" if config.get("source") == "FromClass" else "claim"
        try:
            policy = PreemptionPolicy.model_validate(opaque.get("parameters") or {})
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "parameters"
            fallback = "the agent settings apply" if source == "class" else "the class policy applies"
            problems.append(f"unreadable {POLICY_KIND} in the {source} config ({where}: {first['msg']}); "
                            f"ignored, {fallback}")
            continue
        (admin if source == "class" else tenant).append(policy)
    problem = "; ".join(problems) or None
    if not admin and not tenant:
        return None, problem
    return _merge(admin, tenant), problem
