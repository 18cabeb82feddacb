"""Typed tenant quotas: catalog keys -> DeviceClasses, ResourceQuota names, Kueue resource names.

Pure Python (no cdk8s). ResourceQuota counts DRA devices per DeviceClass
(``<class>.deviceclass.resource.k8s.io/devices``, kubernetes ``pkg/quota/v1/evaluator/core/
resource_claims.go``), so a quota per MIG profile needs a DeviceClass per profile: the platform
emits one per (GPU model, MIG profile) and per whole-GPU model, whose selectors pin exactly what
the catalog pins in claims, and tenants' claims name those classes. The driver's own classes
(``gpu.nvidia.com``, ``mig.nvidia.com``, ``vfio.gpu.nvidia.com``) stay usable by name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from dra_constructs.catalog import (
    DEVICE_CLASS_GPU,
    DEVICE_CLASS_MIG,
    DEVICE_CLASS_SELECTORS,
    GpuModel,
    gpu_spec,
    mig_profile,
)
from dra_constructs.catalog.amd_driver import AMD_DEVICE_CLASS, AMD_DEVICE_CLASS_SELECTOR
from dra_constructs.catalog.driver import DRIVER
from dra_constructs.cel import builder
from dra_constructs.errors import DraConstructsError
from dra_constructs.target import Target

__all__ = [
    "CLAIM_COUNT_RESOURCE",
    "DEFAULT_CLASS_DOMAIN",
    "DRIVER_CLASS_EXTENDED_NAMES",
    "IMPLICIT_EXTENDED_PREFIX",
    "KUEUE_RESOURCE_PREFIX",
    "PER_CLASS_SUFFIX",
    "AmdGpu",
    "AmdPartition",
    "CounterQuota",
    "Mig",
    "MigSlices",
    "QuotaKey",
    "TenantDeviceClass",
    "WholeGpu",
    "device_class_for",
    "devices_resource",
    "resolve_quotas",
    "resource_quota_hard",
]

#: ResourceQuota name suffix counting ExactCount devices of one DeviceClass (``ResourceClaimsPerClass``).
PER_CLASS_SUFFIX = ".deviceclass.resource.k8s.io/devices"
#: ResourceQuota name counting ResourceClaim objects.
CLAIM_COUNT_RESOURCE = "count/resourceclaims.resource.k8s.io"
#: KEP-5004: every DeviceClass also answers to the implicit extended resource ``<prefix><class>``.
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"
#: Domain of the DeviceClasses the tenant platform emits.
DEFAULT_CLASS_DOMAIN = "dra-constructs.io"
#: Prefix of the Kueue resource names (``deviceClassMappings[].name``) for those classes.
KUEUE_RESOURCE_PREFIX = "dra-constructs.io"
#: ``extendedResourceName`` the NVIDIA driver's Helm chart puts on its classes (resource.k8s.io/v1 installs).
DRIVER_CLASS_EXTENDED_NAMES: Mapping[str, str] = {DEVICE_CLASS_GPU: "nvidia.com/gpu"}

_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


@dataclass(frozen=True)
class Mig:
    """A quota key: MIG slices of one profile on one GPU model, e.g. ``Mig(GpuModel.H100_80GB, "1g.10gb")``."""

    gpu: GpuModel | str
    profile: str


@dataclass(frozen=True)
class WholeGpu:
    """A quota key: whole GPUs of one model, or of any model (``WholeGpu()``: the driver's ``gpu.nvidia.com``)."""

    gpu: GpuModel | str | None = None


@dataclass(frozen=True)
class MigSlices:
    """A quota key: memory slices of one GPU model's MIG devices, any profile, e.g. ``MigSlices(GpuModel.H100_80GB)``.

    The quota's value is a number of memory slices (8 per H100: ``{MigSlices(H100_80GB): 12}`` is a
    GPU and a half), held in any mix of profiles. Kueue counts it (counter-based quota, DynamicMIG).
    """

    gpu: GpuModel | str


@dataclass(frozen=True)
class AmdPartition:
    """A quota key: partitions of one profile of one AMD model, e.g. ``AmdPartition("MI300X", "cpx_nps4")``."""

    gpu: str
    profile: str


@dataclass(frozen=True)
class AmdGpu:
    """A quota key: whole AMD GPUs (SPX) of one model, e.g. ``AmdGpu("MI300X")``."""

    gpu: str


#: What a quota may name: a typed catalog key, or a DeviceClass of the NVIDIA or AMD driver by name.
QuotaKey = Mig | MigSlices | WholeGpu | AmdPartition | AmdGpu | str

#: The DynamicMIG counter Kueue charges for :class:`MigSlices` (``consumesCounters`` of every placement).
MIG_MEMORY_COUNTER = "memory"


@dataclass(frozen=True)
class CounterQuota:
    """How Kueue counts a :class:`MigSlices` class: the ``memory`` counter its devices consume.

    Kueue (``pkg/dra/counters.go`` ``computeCounterCharges``, v0.18+) charges a request the
    largest value of the counter among the devices its DeviceClass, its selectors and the
    source's ``deviceSelector`` match, times ``count``. A slice is worth ``slice_kib``: the GPU's
    memory divided by its memory slices. Memory slices partition the GPU's memory, so an instance
    of ``s`` slices never has more than ``s`` of them, whatever size NVML reports for a profile
    (the catalog's per-profile sizes are estimates): a quota of ``n`` slices admits every mix of
    profiles holding at most ``n`` slices.

    :param profiles: ``(memory slices, memory MiB)`` of each MIG profile of the model as the
        catalog publishes them (for :meth:`most_slices_within`).
    """

    counter: str
    driver: str
    device_selector: str
    slice_kib: int
    profiles: tuple[tuple[int, int], ...]

    def nominal_kib(self, slices: int) -> int:
        """The counter amount of ``slices`` memory slices (KiB)."""
        return slices * self.slice_kib

    def nominal(self, slices: int) -> str:
        """``nominalQuota`` (a Quantity) for ``slices`` memory slices."""
        return f"{self.nominal_kib(slices)}Ki"

    def most_slices_within(self, kib: int) -> int:
        """The most slices a mix of the catalog's profiles consuming at most ``kib`` of the counter holds.

        Equal to the slice quota while the memory counter separates N slices from N+1: small
        profiles report a little less memory than their share, so a large quota spent on small
        profiles only holds a few slices more (the docs give the numbers).
        """
        sizes = [(s, m * 1024) for s, m in self.profiles]
        bound = int(kib / min(m / s for s, m in sizes)) + 1
        cheapest = [0] + [kib + 1] * bound  # least memory of exactly k slices
        for k in range(1, bound + 1):
            cheapest[k] = min([kib + 1] + [cheapest[k - s] + m for s, m in sizes if s <= k])
        return max(k for k in range(bound + 1) if cheapest[k] <= kib)


@dataclass(frozen=True)
class TenantDeviceClass:
    """One DeviceClass a tenant quota counts, with the names ResourceQuota and Kueue use for it.

    ``selectors`` are the class's CEL selectors when the platform emits the class (``managed``);
    the driver's own classes are installed by its Helm chart and are only referenced.
    """

    name: str
    description: str
    selectors: tuple[str, ...]
    kueue_resource: str
    managed: bool
    catalog_class: str
    counter: CounterQuota | None = None

    def kueue_quota(self, count: int) -> int | str:
        """Kueue's ``nominalQuota`` for a quota of ``count``: devices, or the counter amount of ``count`` slices."""
        return count if self.counter is None else self.counter.nominal(count)

    @property
    def devices_resource(self) -> str:
        """``<class>.deviceclass.resource.k8s.io/devices``."""
        return devices_resource(self.name)

    def extended_resources(self) -> tuple[str, ...]:
        """Extended resource names (KEP-5004) that also allocate this class's devices."""
        names = [IMPLICIT_EXTENDED_PREFIX + self.name]
        explicit = DRIVER_CLASS_EXTENDED_NAMES.get(self.name)
        if explicit is not None:
            names.append(explicit)
        return tuple(names)


def devices_resource(device_class: str) -> str:
    """The ResourceQuota name counting devices of ``device_class``."""
    return device_class + PER_CLASS_SUFFIX


def _model_slug(key: str) -> str:
    return key.lower().replace("_", "-")


def _profile_slug(profile: str) -> str:
    return profile.replace("+", "-")


def _driver_class(name: str) -> TenantDeviceClass:
    return TenantDeviceClass(
        name=name, description=f"DeviceClass {name} (NVIDIA driver)", selectors=(),
        kueue_resource=f"{KUEUE_RESOURCE_PREFIX}/{name}", managed=False,
        catalog_class=name,
    )


def device_class_for(key: QuotaKey, where: str = "GpuTenant", domain: str = DEFAULT_CLASS_DOMAIN) -> TenantDeviceClass:
    """The DeviceClass that counts ``key``; a clear error when the catalog does not know it."""
    field = f"quotas[{key!r}]"
    if isinstance(key, (AmdPartition, AmdGpu)):
        return _amd_class(key, where, field, domain)
    if isinstance(key, str):
        if key in DEVICE_CLASS_SELECTORS or key == AMD_DEVICE_CLASS:
            return _driver_class(key)
        raise DraConstructsError(
            where, field, key, "not a DeviceClass the catalog knows (ResourceQuota would count it, but "
            "nothing pins what its devices are)",
            f"name a catalog key (Mig(GpuModel.H100_80GB, '1g.10gb'), WholeGpu(GpuModel.H100_80GB)) or one "
            f"of the driver's classes {', '.join(sorted(DEVICE_CLASS_SELECTORS))}",
        )
    if isinstance(key, MigSlices):
        return _mig_slices_class(key, where, field, domain)
    if isinstance(key, Mig):
        try:
            spec = gpu_spec(key.gpu, where, f"{field}.gpu")
            profile = mig_profile(spec.key, key.profile, where)
        except DraConstructsError as error:
            raise DraConstructsError(where, f"{field}.{error.field.split('.')[-1]}", error.value,
                                     error.problem, error.fix) from None
        name = f"{_model_slug(spec.key)}-{_profile_slug(profile.name)}.mig.{domain}"
        selectors = (DEVICE_CLASS_SELECTORS[DEVICE_CLASS_MIG], *builder.mig_profile_selectors(spec, profile))
        return TenantDeviceClass(
            name=name, description=f"MIG {profile.name} slices of {spec.key}", selectors=selectors,
            kueue_resource=f"{KUEUE_RESOURCE_PREFIX}/{_model_slug(spec.key)}-mig-{_profile_slug(profile.name)}",
            managed=True, catalog_class=DEVICE_CLASS_MIG,
        )
    if isinstance(key, WholeGpu):
        if key.gpu is None:
            return _driver_class(DEVICE_CLASS_GPU)
        spec = gpu_spec(key.gpu, where, f"{field}.gpu")
        selectors = (DEVICE_CLASS_SELECTORS[DEVICE_CLASS_GPU], *builder.gpu_model_selectors([spec]))
        return TenantDeviceClass(
            name=f"{_model_slug(spec.key)}.gpu.{domain}", description=f"whole {spec.key} GPUs",
            selectors=selectors, kueue_resource=f"{KUEUE_RESOURCE_PREFIX}/{_model_slug(spec.key)}-gpu",
            managed=True, catalog_class=DEVICE_CLASS_GPU,
        )
    raise DraConstructsError(
        where, field, key, "not a quota key",
        "use Mig(GpuModel..., 'profile'), WholeGpu(GpuModel...) or a driver DeviceClass name",
    )


def _mig_slices_class(key: MigSlices, where: str, field: str, domain: str) -> TenantDeviceClass:
    """One class for every MIG device of a model, counted by Kueue on the DynamicMIG ``memory`` counter."""
    spec = gpu_spec(key.gpu, where, f"{field}.gpu")  # every catalog model has MIG profiles
    profiles = [p.name for p in spec.mig_profiles]
    profile_in = f"{builder.attribute('profile')} in [{', '.join(builder.string_literal(p) for p in profiles)}]"
    architecture = builder.string_equals(builder.attribute("architecture"), spec.architecture)
    type_mig = DEVICE_CLASS_SELECTORS[DEVICE_CLASS_MIG]
    # Kueue evaluates deviceSelector on every device of the driver (whole GPUs too, which have no
    # profile attribute): the type test comes first so that && stops before reading it.
    device_selector = builder.all_of([type_mig, architecture, profile_in])
    slug = _model_slug(spec.key)
    return TenantDeviceClass(
        name=f"{slug}.mig.{domain}", description=f"MIG slices of {spec.key}, any profile",
        selectors=(type_mig, architecture, profile_in), kueue_resource=f"{KUEUE_RESOURCE_PREFIX}/{slug}-mig-memory",
        managed=True, catalog_class=DEVICE_CLASS_MIG,
        counter=CounterQuota(MIG_MEMORY_COUNTER, DRIVER, device_selector,
                             spec.memory_mib * 1024 // max(p.memory_slices for p in spec.mig_profiles),
                             tuple(sorted({(p.memory_slices, p.memory_mib) for p in spec.mig_profiles}))),
    )


def _amd_class(key: AmdPartition | AmdGpu, where: str, field: str, domain: str) -> TenantDeviceClass:
    """A platform class narrowing ``gpu.amd.com`` to one (model, partition profile) or one whole model."""
    from dra_constructs.catalog.amd import amd_gpu_spec, amd_partition_profile  # the typed AMD catalog (pydantic)
    from dra_constructs.requests_amd import AmdGpuRequest, AmdPartitionRequest

    try:
        spec = amd_gpu_spec(key.gpu, where, f"{field}.gpu")
        if isinstance(key, AmdPartition):
            profile = amd_partition_profile(spec.key, key.profile, where).name
            request: AmdGpuRequest | AmdPartitionRequest = AmdPartitionRequest(gpu=spec.key, profile=profile)
            request.validate_for(where)
            slug, what = f"{spec.key.lower()}-{profile.replace('_', '-')}", f"AMD {profile} partitions of {spec.key}"
        else:
            request = AmdGpuRequest(models=(spec.key,))
            slug, what = f"{spec.key.lower()}-gpu", f"whole AMD {spec.key} GPUs"
    except DraConstructsError as error:
        raise DraConstructsError(where, f"{field}.{error.field.split('.')[-1]}", error.value,
                                 error.problem, error.fix) from None
    return TenantDeviceClass(
        name=f"{slug}.amd.{domain}", description=what,
        selectors=(AMD_DEVICE_CLASS_SELECTOR, *request.generated_selectors(where)),
        kueue_resource=f"{KUEUE_RESOURCE_PREFIX}/amd-{slug}", managed=True, catalog_class=AMD_DEVICE_CLASS,
    )


def resolve_quotas(
    quotas: Mapping[QuotaKey, int], where: str = "GpuTenant", domain: str = DEFAULT_CLASS_DOMAIN,
) -> list[tuple[TenantDeviceClass, int]]:
    """Each quota entry as (DeviceClass, device count), in a stable order; bad keys or counts raise."""
    if not isinstance(quotas, Mapping):
        raise DraConstructsError(where, "quotas", quotas, "must be a mapping of quota keys to device counts",
                                 "pass e.g. {Mig(GpuModel.H100_80GB, '1g.10gb'): 4}")
    resolved: dict[str, tuple[TenantDeviceClass, int]] = {}
    for key, count in quotas.items():
        device_class = device_class_for(key, where, domain)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise DraConstructsError(where, f"quotas[{key!r}]", count, "must be a whole number of devices >= 0",
                                     "give the most devices of this kind the tenant may hold at once")
        if device_class.name in resolved:
            raise DraConstructsError(where, f"quotas[{key!r}]", count,
                                     f"another key of this quota already names DeviceClass {device_class.name}",
                                     "give each kind of device one entry")
        if len(device_class.name.rpartition("/")[2]) > 63 or not _QUALIFIED_NAME.match(device_class.name):
            raise DraConstructsError(where, f"quotas[{key!r}]", device_class.name,
                                     "the DeviceClass name is too long for an implicit extended resource name",
                                     "use a shorter class domain")
        resolved[device_class.name] = (device_class, count)
    return [resolved[name] for name in sorted(resolved)]


def resource_quota_hard(
    entries: list[tuple[TenantDeviceClass, int]], target: Target, closed: tuple[str, ...] = (),
) -> dict[str, str]:
    """``spec.hard`` of the tenant's ResourceQuota: its classes, and 0 for the driver classes it does not name.

    Where the target has DRA-backed extended resources (1.36+), each class's extended names
    (``requests.deviceclass.resource.kubernetes.io/<class>``, and ``requests.nvidia.com/gpu`` for
    ``gpu.nvidia.com``) get the same limit: KEP-5004 asks for both quotas with the same value.
    """
    limits: dict[str, int] = {}
    named = {device_class.name for device_class, _ in entries}
    everything = list(entries) + [(_driver_class(c), 0) for c in closed if c not in named]
    for device_class, count in everything:
        limits[device_class.devices_resource] = count
        if target.has_dra_extended_resources:
            for name in device_class.extended_resources():
                limits["requests." + name] = count
    return {name: str(limits[name]) for name in sorted(limits)}
