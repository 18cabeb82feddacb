"""DRA002: no device selection through environment variables (``CUDA_VISIBLE_DEVICES``, ``CUDA_MPS_*``...)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from typing import Any

from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.facets import LOOSE, POD
from dra_constructs.guardrails.manifest import Manifest, as_dict, as_list, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity

__all__ = ["DEVICE_ENV_VARS", "HIDING_VALUES", "MPS_PREFIX", "RULE", "selects_devices"]

#: Variables that pick devices behind the scheduler's back. Not here: ``NVIDIA_MIG_CONFIG_DEVICES`` and
#: ``NVIDIA_MIG_MONITOR_DEVICES`` (set to ``all`` by NVIDIA's own DaemonSets): the container toolkit reads
#: them only to grant the MIG config/monitor capability on GPUs that ``NVIDIA_VISIBLE_DEVICES`` (or a
#: DRA/CDI injection) already made visible, so they select no device.
DEVICE_ENV_VARS = frozenset({
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
})
#: Every ``CUDA_MPS_*`` variable configures MPS, i.e. software sharing of one GPU.
MPS_PREFIX = "CUDA_MPS_"
#: Values that hide every device (CPU-only images set ``CUDA_VISIBLE_DEVICES=""`` or ``-1``;
#: ``NVIDIA_VISIBLE_DEVICES=void`` disables the toolkit, ``none`` mounts the driver without GPUs, as
#: NVIDIA's DRA kubelet plugin and controller do): they select nothing, so they are allowed.
HIDING_VALUES = frozenset({"", "-1", "none", "void", "NoDevFiles"})


def selects_devices(name: str, value: Any, has_value_from: bool) -> bool:
    """Whether one env entry selects devices (or configures MPS)."""
    if name.startswith(MPS_PREFIX):
        return True
    if name not in DEVICE_ENV_VARS:
        return False
    if has_value_from:
        return True  # value decided elsewhere: cannot be shown to hide devices
    return not (value is None or str(value).strip() in HIDING_VALUES)


def _source_values(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """Key -> value of a ConfigMap or Secret (Secret ``data`` is base64-decoded)."""
    values: dict[str, Any] = dict(as_dict(obj.get("data")))
    if kind == "Secret":
        for key, raw in list(values.items()):
            try:
                values[key] = base64.b64decode(str(raw), validate=True).decode("utf-8", "replace")
            except (binascii.Error, ValueError):
                values[key] = "<undecodable>"
    values.update(as_dict(obj.get("stringData")))
    return values


def _env_from_hits(m: Manifest, ctx: AuditContext, path: str, container: dict[str, Any]) -> Iterator[Hit]:
    for i, source in enumerate(as_list(container.get("envFrom"))):
        source = as_dict(source)
        prefix = source.get("prefix") if isinstance(source.get("prefix"), str) else ""
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            ref = as_dict(source.get(key))
            name = ref.get("name")
            if not isinstance(name, str):
                continue
            found = ctx.env_source(kind, m.namespace, name)
            if found is None:
                continue
            data = _source_values(found.obj, kind)
            for var, value in data.items():
                full = f"{prefix}{var}"
                if isinstance(var, str) and selects_devices(full, value, False):
                    shown = repr(value) if kind == "ConfigMap" else "<secret value>"
                    yield Hit(
                        field_path(path, "envFrom", i),
                        f"container {container.get('name')!r} imports {full}={shown} from {kind} {name!r}: "
                        "device selection through the environment bypasses the DRA allocation",
                    )


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    for path, container in [*m.containers(), *m.loose_containers()]:
        for i, entry in enumerate(as_list(container.get("env"))):
            entry = as_dict(entry)
            name = entry.get("name")
            if not isinstance(name, str):
                continue
            if selects_devices(name, entry.get("value"), "valueFrom" in entry):
                shown = "from valueFrom" if "valueFrom" in entry else repr(entry.get("value"))
                what = ("configures CUDA MPS (software sharing of one GPU)" if name.startswith(MPS_PREFIX)
                        else "selects devices behind the scheduler's back")
                yield Hit(
                    field_path(path, "env", i),
                    f"container {container.get('name')!r} sets {name} ({shown}): this {what}",
                )
        yield from _env_from_hits(m, ctx, path, container)


RULE = Rule(
    id="DRA002",
    name="no-device-selection-by-env",
    severity=Severity.ERROR,
    why="NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES / CUDA_MPS_* pick or share devices the scheduler "
        "never allocated, so isolation and accounting are lost",
    fix="delete the variable; the DRA driver exposes exactly the allocated devices to containers that "
        "list the claim in resources.claims (use MIG slices instead of MPS for sharing)",
    object_check=_check,
    # facets: reads env/envFrom of its pods' containers and of loose containers (ConfigMaps only through envFrom)
    fires_on=POD | LOOSE,
)
