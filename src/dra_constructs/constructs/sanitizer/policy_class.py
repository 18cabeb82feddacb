"""``PreemptionPolicyDeviceClass``: a claim preemption policy at the DeviceClass level.

Kueue admits only plain ResourceClaimTemplates (no per-claim ``config``), so a policy there
goes into a DeviceClass: ``spec.config[].opaque`` addressed to the sanitizer, with the
selectors of NVIDIA's ``gpu.nvidia.com`` or ``mig.nvidia.com`` class. Claims that use the class
get the policy in ``status.allocation.devices.config[]`` (source ``FromClass``); the agent
reads it from there. Map the class in Kueue's ``deviceClassMappings`` like NVIDIA's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import cdk8s
import constructs

from dra_constructs.agent.policy import PreemptionPolicy
from dra_constructs.catalog import DEVICE_CLASS_GPU, DEVICE_CLASS_MIG, DEVICE_CLASS_SELECTORS
from dra_constructs.constructs.guardrails import guard
from dra_constructs.constructs.scope import lazy_path, resolve_target
from dra_constructs.errors import DraConstructsError
from dra_constructs.target import Target
from dra_constructs.validation import object_metadata

__all__ = ["PreemptionPolicyDeviceClass"]

_BASES = {"gpu": DEVICE_CLASS_GPU, "mig": DEVICE_CLASS_MIG}


class PreemptionPolicyDeviceClass(cdk8s.ApiObject):
    """A DeviceClass selecting NVIDIA GPUs or MIG devices that carries a ``PreemptionPolicy``.

    :param name: ``metadata.name`` (a DNS subdomain), the class claims name in ``deviceClassName``.
    :param policy: the preemption policy every claim of this class gets.
    :param devices: ``gpu`` (whole GPUs, like ``gpu.nvidia.com``) or ``mig`` (like ``mig.nvidia.com``).
    :param selectors: more CEL selectors (ANDed). Default: none.
    :param labels: ``metadata.labels``. Default: none.
    :param kubernetes_version: target. Default: the app's context, else 1.32.
    """

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        *,
        name: str,
        policy: PreemptionPolicy,
        devices: Literal["gpu", "mig"] = "gpu",
        selectors: Sequence[str] = (),
        labels: Mapping[str, str] | None = None,
        kubernetes_version: str | Target | None = None,
    ) -> None:
        where = lazy_path(scope, id)
        if not isinstance(policy, PreemptionPolicy):
            raise DraConstructsError(_name(where), "policy", policy, "not a PreemptionPolicy",
                                     "pass dra_constructs.PreemptionPolicy(...)")
        if devices not in _BASES:
            raise DraConstructsError(_name(where), "devices", devices, "not a device kind", "use 'gpu' or 'mig'")
        target = resolve_target(scope, kubernetes_version, id)
        metadata = object_metadata(where, name, None, labels, None)
        super().__init__(scope, id, api_version=target.resource_api_version, kind="DeviceClass", metadata=metadata)
        cel = [DEVICE_CLASS_SELECTORS[_BASES[devices]], *selectors]
        self.add_json_patch(cdk8s.JsonPatch.add("/spec", {
            "selectors": [{"cel": {"expression": expression}} for expression in cel],
            "config": [{"opaque": policy.opaque()}],
        }))
        self.policy = policy
        guard(scope)


def _name(where: Any) -> str:
    """The object path for an error (``where`` may be a lazy path)."""
    return str(where()) if callable(where) else str(where)
