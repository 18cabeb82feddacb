"""DRA006: no software-only GPU sharing across tenants (TimeSlicing / MPS, shared ResourceClaims)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from ..._safe_load import yaml_documents
from ...errors import DraConstructsError
from ..context import AuditContext, tenant_of
from ..manifest import Manifest, as_dict, field_path
from ..model import Hit, Rule, Severity

__all__ = ["RULE", "software_sharing_strategy"]

_SHARING_STRATEGIES = {"timeslicing": "TimeSlicing", "mps": "MPS"}
_SHARING_CONFIG_KEYS = {"timeSlicingConfig": "TimeSlicing", "mpsConfig": "MPS"}


def software_sharing_strategy(opaque: dict[str, Any]) -> str | None:
    """``TimeSlicing`` / ``MPS`` when an NVIDIA opaque device config shares devices in software."""
    parameters = as_dict(opaque.get("parameters"))
    api_version = parameters.get("apiVersion")
    nvidia = opaque.get("driver") == "gpu.nvidia.com" or (
        isinstance(api_version, str) and api_version.startswith("resource.nvidia.com/"))
    if not nvidia:
        return None
    sharing = as_dict(parameters.get("sharing"))
    strategy = sharing.get("strategy")
    if isinstance(strategy, str) and strategy.lower() in _SHARING_STRATEGIES:
        return _SHARING_STRATEGIES[strategy.lower()]
    for key, name in _SHARING_CONFIG_KEYS.items():
        if key in sharing:
            return name
    return None


def _device_plugin_sharing(m: Manifest) -> Iterator[Hit]:
    """The legacy NVIDIA device plugin's time-slicing / MPS config kept in a ConfigMap."""
    for key, value in as_dict(m.obj.get("data")).items():
        if not isinstance(value, str) or "sharing" not in value:
            continue
        try:  # the ConfigMap's text is input too: the same limits (aliases, depth) as a file
            config = next((d.value for d in yaml_documents(value, m.file or m.object_id, "data")), None)
        except DraConstructsError:
            continue
        sharing = as_dict(as_dict(config).get("sharing"))
        for mode, name in (("timeSlicing", "TimeSlicing"), ("mps", "MPS")):
            if as_dict(sharing.get(mode)).get("resources"):
                yield Hit(field_path("data", str(key)),
                          f"device-plugin config {key!r} shares GPUs with {name} replicas: tenants on one "
                          "GPU share memory and faults with no hardware isolation")


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    for path, opaque in m.device_configs():
        strategy = software_sharing_strategy(opaque)
        if strategy is not None:
            yield Hit(field_path(path, "parameters", "sharing"),
                      f"{m.kind} {m.name!r} configures {strategy} sharing: several workloads share one GPU's "
                      "memory and compute with no hardware isolation")
    if m.kind == "ConfigMap" and m.api_version == "v1":
        yield from _device_plugin_sharing(m)


def _shared_claims(ctx: AuditContext) -> Iterator[tuple[Manifest, Hit]]:
    refs: dict[tuple[str, str], list[tuple[Manifest, str]]] = defaultdict(list)
    for m in ctx.manifests:
        for path, entry in m.pod_claims():
            claim = entry.get("resourceClaimName")
            if isinstance(claim, str) and claim:
                refs[(m.namespace, claim)].append((m, field_path(path, "resourceClaimName")))
    for (namespace, claim), users in refs.items():
        tenants = sorted({tenant_of(m)[1] for m, _ in users} - {""})
        if len(tenants) > 1:
            for m, path in users:
                yield m, Hit(path, f"ResourceClaim {claim!r} is shared by workloads of tenants "
                                   f"{', '.join(tenants)}: they use the same devices with no isolation")
        if namespace and ctx.claim(namespace, claim) is None:
            owners = sorted({c.namespace for c in ctx.claims_named(claim) if c.namespace and c.namespace != namespace})
            if owners:
                for m, path in users:
                    yield m, Hit(path, f"ResourceClaim {claim!r} exists in namespace(s) {', '.join(owners)}, not "
                                       f"in {namespace!r}: one claim cannot be shared across tenant namespaces")


RULE = Rule(
    id="DRA006",
    name="no-software-sharing-across-tenants",
    severity=Severity.ERROR,
    why="TimeSlicing and MPS share one GPU's memory between workloads without hardware isolation, and a "
        "ResourceClaim used by several tenants hands them the same device",
    fix="give each tenant its own MIG slice (deviceClassName: mig.nvidia.com, one claim per pod through a "
        "ResourceClaimTemplate); if the sharing is intended, suppress DRA006 on the object with a reason",
    object_check=_check,
    set_check=_shared_claims,
)
