"""Typed workload-level options (Deployment strategy, Job failure policy, StatefulSet claim templates).

Pure Python (no cdk8s): each option renders its API shape and checks what the API server checks.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from dra_constructs.errors import DraConstructsError
from dra_constructs.requests import _Model
from dra_constructs.validation import Where, _where, check_dns_label, check_quantity

__all__ = ["PodFailurePolicy", "RollingUpdate", "VolumeClaimTemplate", "render_strategy"]

_PERCENT = re.compile(r"^\d{1,3}%$")


class RollingUpdate(_Model):
    """A Deployment's rolling update. The GPU default replaces one pod at a time and never surges.

    Kubernetes' own default (25% surge) starts new pods before old ones stop, so every rollout
    needs spare GPUs the cluster usually does not have: the new pods stay Pending and the rollout
    stalls. ``max_surge=0, max_unavailable=1`` frees a pod's devices before its successor asks.
    """

    max_surge: int | str = Field(default=0, description="Extra pods during a rollout (number or 'N%').")
    max_unavailable: int | str = Field(default=1, description="Pods that may be down during a rollout.")

    def render(self, where: Where) -> dict[str, Any]:
        """``spec.strategy``."""
        values = {}
        for field, value in (("max_surge", self.max_surge), ("max_unavailable", self.max_unavailable)):
            if isinstance(value, bool) or (isinstance(value, int) and value < 0) or (
                    isinstance(value, str) and not _PERCENT.match(value)):
                raise DraConstructsError(_where(where), f"strategy.{field}", value,
                                         "must be a number >= 0 or a percentage like '25%'", "use e.g. 0, 1 or '25%'")
            values[field] = value
        if all(v in (0, "0%") for v in values.values()):
            raise DraConstructsError(_where(where), "strategy", self, "max_surge and max_unavailable are both 0: "
                                     "the rollout could never progress", "allow max_unavailable=1 (GPU default)")
        return {"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": self.max_surge, "maxUnavailable": self.max_unavailable}}


def render_strategy(where: Where, strategy: Any) -> dict[str, Any]:
    """``RollingUpdate(...)`` or ``"Recreate"`` (all pods stop before new ones start)."""
    if strategy == "Recreate":
        return {"type": "Recreate"}
    if isinstance(strategy, RollingUpdate):
        return strategy.render(where)
    raise DraConstructsError(_where(where), "strategy", strategy, "not a Deployment strategy",
                             "use RollingUpdate(max_surge=0, max_unavailable=1) (the default) or 'Recreate'")


class PodFailurePolicy(_Model):
    """A Job's ``podFailurePolicy``: preemption is not an application failure.

    ``ignore_disruptions`` (default): a pod that failed because it was preempted, evicted or drained
    (pod condition ``DisruptionTarget``) is replaced without counting against ``backoffLimit``, so a
    preempted GPU job resumes instead of failing. ``fail_job_on_exit_codes``: exit codes that mean
    the application cannot succeed (a bad config), failing the Job at once instead of retrying.
    Requires ``restartPolicy: Never``.
    """

    ignore_disruptions: bool = True
    fail_job_on_exit_codes: tuple[int, ...] = ()
    container_name: str | None = Field(default=None, description="Only exit codes of this container.")

    def render(self, where: Where) -> dict[str, Any] | None:
        """``spec.podFailurePolicy`` (``None`` when it has no rules)."""
        rules: list[dict[str, Any]] = []
        if self.ignore_disruptions:
            rules.append({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]})
        if self.fail_job_on_exit_codes:
            codes = sorted(set(self.fail_job_on_exit_codes))
            if any(c == 0 or not -2**31 <= c < 2**31 for c in codes) or len(codes) > 255:
                raise DraConstructsError(_where(where), "pod_failure_policy.fail_job_on_exit_codes", codes,
                                         "exit codes must be non-zero 32-bit integers, at most 255 of them",
                                         "list the non-zero exit codes that mean the job cannot succeed")
            on_exit: dict[str, Any] = {"operator": "In", "values": codes}
            if self.container_name is not None:
                on_exit["containerName"] = check_dns_label(where, "pod_failure_policy.container_name",
                                                           self.container_name)
            rules.append({"action": "FailJob", "onExitCodes": on_exit})
        return {"rules": rules} if rules else None


class VolumeClaimTemplate(_Model):
    """One PVC per StatefulSet replica (``spec.volumeClaimTemplates[]``); mount it by ``name``."""

    name: str
    storage: str = Field(description="Requested size, e.g. '200Gi'.")
    access_modes: tuple[str, ...] = ("ReadWriteOnce",)
    storage_class_name: str | None = None

    def render(self, where: Where) -> dict[str, Any]:
        """The PVC template."""
        check_dns_label(where, "volume_claim_templates[].name", self.name)
        check_quantity(where, f"volume_claim_templates[{self.name!r}].storage", self.storage)
        modes = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
        for mode in self.access_modes:
            if mode not in modes:
                raise DraConstructsError(_where(where), f"volume_claim_templates[{self.name!r}].access_modes", mode,
                                         "not an access mode", f"use one of {list(modes)}")
        spec: dict[str, Any] = {"accessModes": list(self.access_modes),
                                "resources": {"requests": {"storage": self.storage}}}
        if self.storage_class_name is not None:
            spec["storageClassName"] = self.storage_class_name
        return {"metadata": {"name": self.name}, "spec": spec}
