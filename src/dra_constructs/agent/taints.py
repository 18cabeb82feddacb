"""DeviceTaintRule objects for the guard and the quarantine, shaped per target version.

What :class:`~dra_constructs.target.Target` says decides the shape:
- ``device_taint_rule_api_version``: ``resource.k8s.io/v1alpha3`` (1.33-1.35),
  ``v1beta2`` (1.36), ``v1`` (1.37+), or ``None`` on 1.32 where the kind does not exist;
- ``device_taint_rule_has_cel_selectors``: 1.33/1.34 also accept ``deviceClassName`` and CEL
  ``selectors``, tombstoned in 1.35. The rule names one device by ``driver``/``pool``/``device``,
  fields every version has, so it never uses them and one shape serves all versions;
- ``device_taint_effects``: the effect must be one the target accepts (``None`` only from 1.35,
  and useless for a guard anyway).

On 1.32 there is no DeviceTaintRule: see :mod:`.guard` for what the agent does instead.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from dra_constructs.agent.devices import DRIVER
from dra_constructs.errors import DraConstructsError
from dra_constructs.target import Target

__all__ = ["ANNOTATION_PREFIX", "MANAGED_BY", "device_labels", "rule_name", "taint_rule", "taint_rule_name"]

MANAGED_BY = "dra-sanitizer"
ANNOTATION_PREFIX = "sanitizer.dra-constructs.io"
_NAME_OK = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_LABEL_VALUE_OK = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def device_labels(node: str, device: str) -> dict[str, str]:
    """Labels that let ``kubectl -l`` select a node's or a device's rules and Events.

    ``.../node`` and ``.../device`` are set only where the name is a valid label value (63
    characters at most); the annotations always carry both.
    """
    labels = {"app.kubernetes.io/managed-by": MANAGED_BY}
    for key, value in (("node", node), ("device", device)):
        if value and len(value) <= 63 and _LABEL_VALUE_OK.match(value):
            labels[f"{ANNOTATION_PREFIX}/{key}"] = value
    return labels


def rule_name(prefix: str, node: str, device: str) -> str:
    """``<prefix>-<node>-<device>``; hashed down when longer than a DNS subdomain allows."""
    name = f"{prefix}-{node}-{device}".lower()
    if len(name) > 253 or not _NAME_OK.match(name):
        digest = hashlib.sha256(f"{node}/{device}".encode()).hexdigest()[:16]
        name = f"{prefix}-{re.sub(r'[^a-z0-9-]', '-', device.lower())[:200]}-{digest}"
    return name


def taint_rule_name(node: str, device: str) -> str:
    """``dra-sanitizer-<node>-<device>`` (:func:`rule_name`)."""
    return rule_name(MANAGED_BY, node, device)


def taint_rule(
    target: Target, node: str, device: str, *, key: str, effect: str, value: str, reason: str | None = None,
    driver: str = DRIVER,
) -> dict[str, Any]:
    """The DeviceTaintRule that taints exactly ``device`` in pool ``node`` of ``driver`` (``gpu.nvidia.com``,
    or ``gpu.amd.com`` for the AMD agent)."""
    api_version = target.device_taint_rule_api_version
    if api_version is None:
        raise DraConstructsError(
            f"DeviceTaintRule/{taint_rule_name(node, device)}", "target", str(target),
            "Kubernetes 1.32 has no DeviceTaintRule", "target 1.33 or newer, or rely on the compute-mode guard",
        )
    if effect not in target.device_taint_effects or effect == "None":
        raise DraConstructsError(
            "AgentConfig", "taint_effect", effect, f"not a guarding device taint effect on {target}",
            f"use one of {', '.join(e for e in target.device_taint_effects if e != 'None')}",
        )
    annotations = {f"{ANNOTATION_PREFIX}/node": node, f"{ANNOTATION_PREFIX}/device": device}
    if reason:
        annotations[f"{ANNOTATION_PREFIX}/reason"] = reason[:1024]
    return {
        "apiVersion": api_version,
        "kind": "DeviceTaintRule",
        "metadata": {
            "name": taint_rule_name(node, device),
            "labels": device_labels(node, device),
            "annotations": annotations,
        },
        "spec": {
            # driver/pool/device exist in every version; no deviceClassName/selectors (see above).
            "deviceSelector": {"driver": driver, "pool": node, "device": device},
            "taint": {"key": key, "value": value, "effect": effect},
        },
    }
