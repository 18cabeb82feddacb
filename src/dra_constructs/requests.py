"""Typed device requests and their rendering into a ``ResourceClaimSpec`` for a target version.

Pure Python (no cdk8s): the claim-template construct, tests and tools all render through here.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from dra_constructs.catalog import DEVICE_CLASS_GPU, DEVICE_CLASS_MIG, GpuModel, GpuSpec, mig_profile
from dra_constructs.catalog.network import DEVICE_CLASS_NIC, NIC_DRIVER
from dra_constructs.cel import builder
from dra_constructs.errors import DraConstructsError
from dra_constructs.target import Target
from dra_constructs.validation import (
    Where,
    _where,
    check_dns_label,
    check_dns_subdomain,
    check_max_items,
    check_quantity,
    check_unique,
)

__all__ = [
    "MAX_CONSTRAINTS",
    "MAX_EXPRESSION_LENGTH",
    "MAX_REQUESTS",
    "MAX_SELECTORS",
    "Alignment",
    "CustomRequest",
    "DeviceRequest",
    "DeviceToleration",
    "FirstAvailable",
    "GpuRequest",
    "MatchAttribute",
    "MigRequest",
    "NicRequest",
    "alignment_constraints",
    "render_claim_spec",
]

_T = TypeVar("_T")
#: A field that takes any sequence (a list, as users write it; type checkers without the pydantic
#: plugin see this type) and stores a tuple, so the frozen models stay hashable. A str is refused.
Items = Annotated[Sequence[_T], AfterValidator(tuple)]

MAX_REQUESTS = 32  # DeviceRequestsMaxSize
MAX_SELECTORS = 32  # DeviceSelectorsMaxSize
MAX_CONSTRAINTS = 32  # DeviceConstraintsMaxSize
MAX_EXPRESSION_LENGTH = 10 * 1024  # CELSelectorExpressionMaxLength


class _Model(BaseModel):
    """Frozen, strict models whose validation errors become :class:`DraConstructsError`."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=False)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            errors = error.errors()
            # A misspelt keyword also makes the real one "missing": report the misspelling.
            first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
            field = ".".join(str(p) for p in first["loc"]) or "(model)"
            inner = (first.get("ctx") or {}).get("error")
            if isinstance(inner, DraConstructsError):  # a nested model's own error: keep it, add where
                raise DraConstructsError(f"{type(self).__name__}.{field}", inner.field, inner.value,
                                         inner.problem, inner.fix) from None
            raise DraConstructsError(
                type(self).__name__, field, first.get("input"), first["msg"] + _suggestion(type(self), first),
                f"see help({type(self).__name__}) for the accepted values",
            ) from None


def _suggestion(model: type[BaseModel], error: Any) -> str:
    """`` (did you mean 'x'?)`` for a misspelt field name or enum/literal value."""
    value = error.get("input")
    if error.get("type") == "extra_forbidden":
        name, candidates = str(error["loc"][-1]), list(model.model_fields)
    elif error.get("type") in ("enum", "literal_error") and isinstance(value, str):
        name, candidates = value, re.findall(r"'([^']*)'", str((error.get("ctx") or {}).get("expected", "")))
    else:
        return ""
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    if not close and error.get("type") != "extra_forbidden":
        close = difflib.get_close_matches(name.upper().replace("-", "_").replace(" ", "_"), candidates, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class DeviceToleration(_Model):
    """A request's toleration of device taints (``DeviceTaintRule`` / ResourceSlice taints, 1.33+)."""

    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None

    def render(self) -> dict[str, Any]:
        """The API shape."""
        out: dict[str, Any] = {} if self.key is None else {"key": self.key}
        out["operator"] = self.operator
        if self.value is not None:
            out["value"] = self.value
        if self.effect is not None:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


class _RequestBase(_Model):
    name: str = Field(description="Request name (DNS label); containers may reference it.")
    count: int = Field(default=1, description="Exact number of devices (allocationMode ExactCount).")
    selectors: Items[str] = Field(
        default=(), description="Extra CEL selectors, ANDed with the generated ones; checked at synth."
    )
    tolerations: Items[DeviceToleration] = Field(
        default=(), description="Device taints this request tolerates (Kubernetes 1.33+, at most 16)."
    )

    kind: ClassVar[str] = "request"

    def device_class(self) -> str:
        """The DeviceClass the request names (an override, e.g. a tenant's class, else the catalog's)."""
        override = getattr(self, "device_class_name", None)
        return override if isinstance(override, str) and override else self.catalog_class()

    def catalog_class(self) -> str:  # pragma: no cover - overridden
        """The NVIDIA DeviceClass whose catalog devices the request picks from (satisfiability checks)."""
        raise NotImplementedError

    def generated_selectors(self, where: Where) -> list[str]:
        """Selectors derived from the typed fields (catalog pins)."""
        return []

    def validate_for(self, where: Where) -> None:
        """Checks that need no target; raise DraConstructsError on bad input."""
        check_dns_label(where, f"requests[{self.name!r}].name", self.name)
        override = getattr(self, "device_class_name", None)
        if override is not None and not isinstance(self, CustomRequest):
            check_dns_subdomain(where, f"requests[{self.name!r}].device_class_name", override)
        if self.count < 1:
            raise DraConstructsError(
                _where(where), f"requests[{self.name!r}].count", self.count,
                "must be greater than zero (allocationMode ExactCount)", "request at least 1 device",
            )


class MigRequest(_RequestBase):
    """``count`` MIG slices of one profile on one GPU model, e.g. A100 80GB ``3g.40gb``.

    Emits DeviceClass ``mig.nvidia.com`` with selectors pinning the profile and the parent's
    architecture.
    """

    name: str = "mig"
    gpu: GpuModel = Field(description="GPU model the slices come from.")
    profile: str = Field(description="MIG profile name, e.g. '3g.40gb' (see the catalog).")
    device_class_name: str | None = Field(
        default=None, description="A DeviceClass narrowing mig.nvidia.com (e.g. a tenant's per-profile class)."
    )

    def catalog_class(self) -> str:
        return DEVICE_CLASS_MIG

    def generated_selectors(self, where: Where) -> list[str]:
        spec = self.gpu.spec  # a validated GpuModel: always in the catalog
        try:
            profile = mig_profile(spec.key, self.profile)
        except DraConstructsError as error:
            raise DraConstructsError(
                _where(where), f"requests[{self.name!r}].profile", self.profile, error.problem, error.fix
            ) from None
        return builder.mig_profile_selectors(spec, profile)


class GpuRequest(_RequestBase):
    """``count`` whole GPUs, chosen by model, memory, architecture and/or compute capability.

    At least one of ``models`` or ``min_memory`` is required so the hardware is pinned. Memory is
    compared with ``compareTo`` against NVML totals: an H100 80GB reports 79.65 GiB, so
    ``min_memory='80Gi'`` excludes it (the satisfiability check at synth says so).
    """

    name: str = "gpu"
    models: Items[GpuModel] = Field(default=(), description="Any of these catalog models.")
    min_memory: str | None = Field(default=None, description="Quantity, e.g. '79Gi'.")
    architecture: str | None = Field(default=None, description="e.g. 'Hopper'.")
    min_compute_capability: str | None = Field(default=None, description="e.g. '8.0'.")
    device_class_name: str | None = Field(
        default=None, description="A DeviceClass narrowing gpu.nvidia.com (e.g. a tenant's per-model class)."
    )

    def catalog_class(self) -> str:
        return DEVICE_CLASS_GPU

    def validate_for(self, where: Where) -> None:
        super().validate_for(where)
        if not self.models and self.min_memory is None and self.architecture is not None:
            raise DraConstructsError(
                _where(where), f"requests[{self.name!r}].architecture", self.architecture,
                "architecture alone does not pin the hardware (it spans models with very different memory)",
                f"add min_memory='40Gi' or models=[...] next to architecture={self.architecture!r}",
            )
        if not self.models and self.min_memory is None:
            raise DraConstructsError(
                _where(where), f"requests[{self.name!r}]", "no models and no min_memory",
                "a workload GPU request must pin the hardware",
                "pass models=[GpuModel.H100_80GB, ...] or min_memory='40Gi'",
            )

    def generated_selectors(self, where: Where) -> list[str]:
        specs: list[GpuSpec] = [m.spec for m in self.models]
        selectors = builder.gpu_model_selectors(specs) if specs else []
        if self.architecture is not None:
            selectors.append(builder.string_equals(builder.attribute("architecture"), self.architecture))
        if self.min_memory is not None:
            check_quantity(where, f"requests[{self.name!r}].min_memory", self.min_memory)
            selectors.append(builder.quantity_at_least(builder.capacity("memory"), self.min_memory))
        if self.min_compute_capability is not None:
            version = _semver(where, f"requests[{self.name!r}].min_compute_capability",
                              self.min_compute_capability)
            selectors.append(builder.version_at_least(builder.attribute("cudaComputeCapability"), version))
        return selectors


class CustomRequest(_RequestBase):
    """A request for any DeviceClass with hand-written CEL selectors (checked at synth).

    ``admin_access`` is for node agents only (monitoring, sanitizing); it needs the admin-access
    namespace label and ``allocation_mode='All'`` is allowed only with it.
    """

    device_class_name: str = Field(description="DeviceClass (DNS subdomain).")
    admin_access: bool = False
    allocation_mode: str = Field(default="ExactCount", description="'ExactCount' or 'All' (admin only).")

    def device_class(self) -> str:
        return self.device_class_name

    def catalog_class(self) -> str:
        return self.device_class_name

    def validate_for(self, where: Where) -> None:
        if self.allocation_mode == "All":
            check_dns_label(where, f"requests[{self.name!r}].name", self.name)
            if not self.admin_access:
                raise DraConstructsError(
                    _where(where), f"requests[{self.name!r}].allocation_mode", "All",
                    "workload requests must use ExactCount with an explicit count",
                    "use allocation_mode='ExactCount' and count=N (All is for admin-access node agents)",
                )
        elif self.allocation_mode == "ExactCount":
            super().validate_for(where)
        else:
            raise DraConstructsError(
                _where(where), f"requests[{self.name!r}].allocation_mode", self.allocation_mode,
                "not an allocation mode", "use 'ExactCount' (or 'All' for admin-access node agents)",
            )
        check_dns_subdomain(where, f"requests[{self.name!r}].device_class_name", self.device_class_name)
        if self.device_class_name == DEVICE_CLASS_GPU and any(_mentions_profile(s) for s in self.selectors):
            raise DraConstructsError(
                _where(where), f"requests[{self.name!r}].device_class_name", DEVICE_CLASS_GPU,
                "MIG profiles are selected under DeviceClass gpu.nvidia.com, whose whole GPUs have no "
                "'profile' attribute (a run-time error that blocks scheduling)",
                f"use device_class_name='{DEVICE_CLASS_MIG}' or MigRequest(gpu=..., profile=...)",
            )


class NicRequest(_RequestBase):
    """``count`` NICs of a network DRA driver, to align with GPUs in the same claim (GPUDirect RDMA).

    Default class ``dranet`` (DraNet, driver ``dra.net``); ``rdma=True`` pins
    ``device.attributes['dra.net'].rdma == true``. Another network driver: pass its
    ``device_class_name`` and write its selectors yourself (the catalog then does not fit-check it).
    Its devices must publish ``resource.kubernetes.io/pcieRoot`` (and ``numaNode``) to be aligned.
    """

    name: str = "nic"
    rdma: bool = Field(default=False, description="Only RDMA-capable NICs (DraNet's 'rdma' attribute).")
    device_class_name: str = Field(default=DEVICE_CLASS_NIC, description="The NIC DeviceClass.")

    kind: ClassVar[str] = "nic"

    def catalog_class(self) -> str:
        return self.device_class_name

    def validate_for(self, where: Where) -> None:
        super().validate_for(where)
        if self.rdma and self.device_class_name != DEVICE_CLASS_NIC:
            raise DraConstructsError(
                _where(where), f"requests[{self.name!r}].rdma", True,
                f"rdma=True pins DraNet's attribute {NIC_DRIVER}/rdma, which class {self.device_class_name!r} "
                "need not publish (a missing attribute is a run-time error)",
                "drop rdma=True and write your driver's selector in selectors=[...]",
            )

    def generated_selectors(self, where: Where) -> list[str]:
        if self.rdma:
            return [f"{builder.attribute('rdma', NIC_DRIVER)} == true"]
        return []


DeviceRequest = MigRequest | GpuRequest | CustomRequest | NicRequest


class MatchAttribute(_Model):
    """All devices of the listed requests (or of all requests) share this attribute's value.

    E.g. ``MatchAttribute(attribute='gpu.nvidia.com/parentUUID')``: MIG slices of one physical GPU.
    """

    attribute: str
    requests: Items[str] = ()


class Alignment(_Model):
    """Topology alignment: every device of the listed requests (or of all requests) on one ...

    - ``on='numaNode'``: NUMA node (memory controller), ``resource.kubernetes.io/numaNode``;
    - ``on='pcieRoot'``: PCIe root complex (e.g. a GPU and its NIC for GPUDirect RDMA),
      ``resource.kubernetes.io/pcieRoot``;
    - ``on='parentGPU'``: physical GPU, for MIG slices (``gpu.nvidia.com/parentUUID``).

    Rendered as a ``matchAttribute`` constraint with the name the target and driver use
    (``Target.topology_attribute``). The constraint holds for *all* devices of those requests: to put
    a NIC on the root of one GPU among four, split the GPUs into a request of 1 and one of 3.
    """

    on: Literal["numaNode", "pcieRoot", "parentGPU"]
    requests: Items[str] = ()


MAX_SUBREQUESTS = 8  # FirstAvailableDeviceRequestMaxSize


class FirstAvailable(_Model):
    """Prioritized alternatives (``firstAvailable``, Kubernetes 1.33+): the scheduler allocates the
    first alternative that fits, e.g. a 3g.40gb slice of an H100, else one of an A100.

    Each alternative's ``name`` is its subrequest name; containers may use ``"<name>/<alternative>"``.
    """

    name: str = Field(description="Request name (DNS label).")
    alternatives: Items[MigRequest | GpuRequest | CustomRequest | NicRequest] = Field(
        description="1 to 8 requests, in order of preference (no admin access, ExactCount only)."
    )


def _mentions_profile(expression: str) -> bool:
    return ".profile" in expression or "['profile']" in expression or '["profile"]' in expression


def _semver(where: Where, field: str, value: str) -> str:
    parts = value.strip().split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise DraConstructsError(
            _where(where), field, value, "not a version", "write MAJOR.MINOR, e.g. '8.0' or '9.0'"
        )
    return ".".join(str(int(p)) for p in [*parts, "0", "0"][:3])


MAX_TOLERATIONS = 16  # DeviceTolerationsMaxLength


def _check_tolerations(request: DeviceRequest, target: Target, where: Where) -> None:
    if not request.tolerations:
        return
    field = f"requests[{request.name!r}].tolerations"
    if not target.has_request_tolerations:
        raise DraConstructsError(
            _where(where), field, [t.render() for t in request.tolerations],
            f"device tolerations exist from Kubernetes 1.33 (target is {target})",
            "target 1.33 or later, or drop the tolerations (1.32 has no device taints)",
        )
    check_max_items(where, field, list(request.tolerations), MAX_TOLERATIONS, "tolerations")
    for toleration in request.tolerations:
        if toleration.operator == "Exists" and toleration.value is not None:
            raise DraConstructsError(_where(where), field, toleration.render(),
                                     "operator Exists takes no value", "drop value or use operator='Equal'")
        if toleration.key is None and toleration.operator != "Exists":
            raise DraConstructsError(_where(where), field, toleration.render(),
                                     "an empty key needs operator Exists", "set key= or operator='Exists'")


def _request_body(request: DeviceRequest, selectors: list[str]) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": request.device_class()}
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if isinstance(request, CustomRequest) and request.allocation_mode == "All":
        body["allocationMode"] = "All"
    else:
        body["allocationMode"] = "ExactCount"
        body["count"] = request.count
    if isinstance(request, CustomRequest) and request.admin_access:
        body["adminAccess"] = True
    if request.tolerations:
        body["tolerations"] = [t.render() for t in request.tolerations]
    return body


def _render_request(request: DeviceRequest, selectors: list[str], target: Target) -> dict[str, Any]:
    body = _request_body(request, selectors)
    if target.wraps_requests_in_exactly:
        return {"name": request.name, "exactly": body}
    return {"name": request.name, **body}


def _resolve_first_available(
    request: FirstAvailable, target: Target, where: Where
) -> list[tuple[DeviceRequest, list[str]]]:
    field = f"requests[{request.name!r}]"
    check_dns_label(where, f"{field}.name", request.name)
    if not target.has_first_available:
        raise DraConstructsError(
            _where(where), f"{field}.firstAvailable", [a.name for a in request.alternatives],
            f"prioritized alternatives exist from Kubernetes 1.33 (target is {target})",
            "target 1.33 or later, or pick one request",
        )
    if not 1 <= len(request.alternatives) <= MAX_SUBREQUESTS:
        raise DraConstructsError(
            _where(where), f"{field}.alternatives", len(request.alternatives),
            f"firstAvailable takes 1 to {MAX_SUBREQUESTS} alternatives", "list 1 to 8 alternatives",
        )
    check_unique(where, f"{field}.alternatives[].name", (a.name for a in request.alternatives),
                 "give every alternative its own name")
    resolved = []
    for alternative in request.alternatives:
        if isinstance(alternative, CustomRequest) and (
                alternative.admin_access or alternative.allocation_mode != "ExactCount"):
            raise DraConstructsError(
                _where(where), f"{field}.alternatives[{alternative.name!r}]", alternative.allocation_mode,
                "alternatives of firstAvailable cannot use admin access or allocationMode All",
                "use an ExactCount request without admin_access",
            )
        _check_tolerations(alternative, target, where)
        resolved.append((alternative, request_selectors(alternative, where)))
    return resolved


def request_selectors(request: DeviceRequest, where: Where) -> list[str]:
    """The request's full selector list: generated pins first, then the user's own."""
    request.validate_for(where)
    selectors = [*request.generated_selectors(where), *request.selectors]
    field = f"requests[{request.name!r}].selectors"
    check_max_items(where, field, selectors, MAX_SELECTORS, "selectors per request")
    for expression in selectors:
        if not isinstance(expression, str) or not expression.strip():
            raise DraConstructsError(_where(where), field, expression, "empty CEL expression",
                                     "remove it or write a boolean CEL expression")
        if len(expression) > MAX_EXPRESSION_LENGTH:
            raise DraConstructsError(
                _where(where), field, expression[:60] + "...",
                f"CEL expression is {len(expression)} characters; the API allows {MAX_EXPRESSION_LENGTH}",
                "shorten it, or split it into several selectors (they are ANDed)",
            )
    return selectors


#: One request of a claim for the checks: its name and its alternatives (one unless firstAvailable),
#: each with its full selector list.
ResolvedRequest = tuple[str, list[tuple[DeviceRequest, list[str]]]]


def request_names(requests: Sequence[DeviceRequest | FirstAvailable]) -> set[str]:
    """Names a container or constraint may reference: ``req`` and, for alternatives, ``req/alt``."""
    names = {r.name for r in requests}
    for request in requests:
        if isinstance(request, FirstAvailable):
            names.update(f"{request.name}/{a.name}" for a in request.alternatives)
    return names


def render_claim_spec(
    requests: Sequence[DeviceRequest | FirstAvailable],
    constraints: Sequence[MatchAttribute],
    target: Target,
    where: Where,
) -> tuple[dict[str, Any], list[ResolvedRequest]]:
    """The ``ResourceClaimSpec`` for ``target`` plus each request's alternatives and selectors (for checks)."""
    if not requests:
        raise DraConstructsError(_where(where), "requests", [], "a claim needs at least one request",
                                 "pass requests=[MigRequest(...)] or [GpuRequest(...)]")
    check_max_items(where, "requests", list(requests), MAX_REQUESTS, "requests per claim")
    check_unique(where, "requests[].name", (r.name for r in requests),
                 "give every request in the claim its own name")
    resolved: list[ResolvedRequest] = []
    rendered_requests: list[dict[str, Any]] = []
    for request in requests:
        if isinstance(request, FirstAvailable):
            alternatives = _resolve_first_available(request, target, where)
            rendered_requests.append({"name": request.name, "firstAvailable": [
                {"name": alt.name, **_request_body(alt, selectors)} for alt, selectors in alternatives]})
            resolved.append((request.name, alternatives))
        else:
            _check_tolerations(request, target, where)
            selectors = request_selectors(request, where)
            rendered_requests.append(_render_request(request, selectors, target))
            resolved.append((request.name, [(request, selectors)]))
    devices: dict[str, Any] = {"requests": rendered_requests}
    if constraints:
        check_max_items(where, "constraints", list(constraints), MAX_CONSTRAINTS, "constraints")
        names = request_names(requests)
        rendered = []
        for constraint in constraints:
            domain, _, attr = constraint.attribute.partition("/")
            if not attr or not domain:
                raise DraConstructsError(
                    _where(where), "constraints[].attribute", constraint.attribute,
                    "matchAttribute must be fully qualified (domain/name)",
                    "write e.g. 'gpu.nvidia.com/parentUUID'",
                )
            for name in constraint.requests:
                if name not in names:
                    raise DraConstructsError(
                        _where(where), "constraints[].requests", name, "must be the name of a request in the claim",
                        f"use one of {sorted(names)}",
                    )
            entry: dict[str, Any] = {"matchAttribute": constraint.attribute}
            if constraint.requests:
                entry["requests"] = list(constraint.requests)
            rendered.append(entry)
        devices["constraints"] = rendered
    return {"devices": devices}, resolved


def _is_mig(request: DeviceRequest | FirstAvailable) -> bool:
    if isinstance(request, FirstAvailable):
        return all(_is_mig(a) for a in request.alternatives)
    return isinstance(request, MigRequest) or request.device_class() == DEVICE_CLASS_MIG


def alignment_constraints(
    alignments: Sequence[Alignment],
    requests: Sequence[DeviceRequest | FirstAvailable],
    target: Target,
    where: Where,
) -> list[MatchAttribute]:
    """``matchAttribute`` constraints for ``alignments``; refuses one the devices cannot honour."""
    by_name = {r.name: r for r in requests}
    out = []
    for index, alignment in enumerate(alignments):
        if not isinstance(alignment, Alignment):
            raise DraConstructsError(_where(where), f"align[{index}]", alignment, "not an Alignment",
                                     "pass align=[Alignment(on='numaNode'), ...]")
        attribute = target.topology_attribute(alignment.on)
        field = f"align[{index}]"
        for name in alignment.requests:
            if name.split("/")[0] not in by_name:
                raise DraConstructsError(_where(where), f"{field}.requests", name,
                                         "must be the name of a request in the claim",
                                         f"use one of {sorted(request_names(requests))}")
        covered = [by_name[n.split("/")[0]] for n in alignment.requests] if alignment.requests else list(requests)
        amd = _amd_parent_attribute(covered)
        if alignment.on == "parentGPU" and amd is not None:
            attribute = amd
        elif alignment.on == "numaNode" and any(_amd_parent_attribute([r]) or _amd_class(r) for r in covered):
            raise DraConstructsError(
                _where(where), f"{field}.on", "numaNode",
                "the AMD GPU DRA driver publishes no resource.kubernetes.io/numaNode (ROCm/k8s-gpu-dra-driver "
                "deviceinfo.go): a device without the attribute is never chosen, the claim fits nowhere",
                "align AMD devices on 'pcieRoot', or their partitions on 'parentGPU'",
            )
        elif alignment.on == "parentGPU":
            others = [r.name for r in covered if not _is_mig(r)]
            if others:
                raise DraConstructsError(
                    _where(where), f"{field}.on", "parentGPU",
                    f"requests {others} are not MIG slices: whole GPUs and NICs have no "
                    f"{attribute} (a device without the attribute is never chosen: the claim fits nowhere)",
                    "list only MIG requests in Alignment(on='parentGPU', requests=[...]), or align on "
                    "'pcieRoot' / 'numaNode'",
                )
        devices = sum(_count(r) for r in covered)
        if devices < 2:
            raise DraConstructsError(
                _where(where), f"{field}.requests", list(alignment.requests) or "all",
                f"the alignment covers {devices} device: there is nothing to align",
                "cover at least two devices (e.g. the GPU request and the NIC request)",
            )
        out.append(MatchAttribute(attribute=attribute, requests=alignment.requests))
    return out


def _amd_class(request: DeviceRequest | FirstAvailable) -> bool:
    alternatives = request.alternatives if isinstance(request, FirstAvailable) else (request,)
    return any(a.catalog_class() == "gpu.amd.com" for a in alternatives)


def _amd_parent_attribute(covered: Sequence[DeviceRequest | FirstAvailable]) -> str | None:
    """``gpu.amd.com/parentDeviceID`` when every covered request is an AMD partition request, else None."""
    found = {getattr(a, "parent_attribute", None) for r in covered
             for a in (r.alternatives if isinstance(r, FirstAvailable) else (r,))}
    return found.pop() if len(found) == 1 and None not in found else None


def _count(request: DeviceRequest | FirstAvailable) -> int:
    if isinstance(request, FirstAvailable):
        return min(a.count for a in request.alternatives)
    return 1 if isinstance(request, CustomRequest) and request.allocation_mode == "All" else request.count
