"""Synthetic ResourceSlices shaped exactly like the NVIDIA DRA driver's, built from the catalog.

They are the default inventory for "is this request satisfiable?" checks at synth time. Two shapes:

- ``static`` (pre-created MIG devices, driver < v25.12 or DynamicMIG off): one node per GPU model
  with whole GPUs, and one node per (model, MIG profile) whose GPUs are each partitioned into the
  most instances of that profile (like mig-parted's ``all-<profile>``);
- ``dynamic`` (DynamicMIG, ``cmd/gpu-kubelet-plugin/partitions.go``): one node per model whose
  GPUs each advertise a counter set ``gpu-<minor>-counter-set`` (the GPU's capacities in
  hyphenated form plus ``memory-slice-N``), the full GPU consuming all of it, and every possible
  MIG placement as a device consuming its engines and memory slices. From 1.35 the counter sets
  live in a slice of their own (``driver.go`` ``generateSplitResourceSlices``).

Device names follow the driver at HEAD: ``gpu-<minor>`` and
``gpu-<parentMinor>-mig-<profile>-<profileId>-<placementStart>``; devices are sorted by name.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Iterable
from typing import Any, Literal

from dra_constructs.catalog.data import GPU_SPECS
from dra_constructs.catalog.driver import ATTRIBUTE_DOMAIN, DRIVER, STANDARD_ATTRIBUTE_DOMAIN
from dra_constructs.catalog.driver_versions import NvidiaDriverRelease, nvidia_driver_release
from dra_constructs.catalog.models import GpuSpec, MigProfile
from dra_constructs.catalog.network import NIC_DRIVER, gpu_topology, nic_devices

__all__ = ["MigMode", "catalog_resource_slices"]

#: ``static``: pre-created MIG devices; ``dynamic``: DynamicMIG placements consuming counters.
MigMode = Literal["static", "dynamic"]

_DRIVER_VERSION = "570.158.1"
_CUDA_DRIVER_VERSION = "12.8.0"
_NAMESPACE = uuid.UUID("6f1c2f5e-1f0a-4c3e-9a51-0d2a6c1b7e42")


def _uuid(prefix: str, *parts: str) -> str:
    return f"{prefix}-{uuid.uuid5(_NAMESPACE, '/'.join(parts))}"


def _gpu_attributes(spec: GpuSpec, minor: int, node: str, gpus: int = 8) -> dict[str, dict[str, Any]]:
    root, numa = gpu_topology(minor, gpus)
    return {
        "type": {"string": "gpu"},
        "uuid": {"string": _uuid("GPU", node, str(minor))},
        "productName": {"string": spec.product_names[0]},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": spec.architecture},
        "cudaComputeCapability": {"version": spec.compute_capability},
        "driverVersion": {"version": _DRIVER_VERSION},
        "cudaDriverVersion": {"version": _CUDA_DRIVER_VERSION},
        f"{STANDARD_ATTRIBUTE_DOMAIN}/pcieRoot": {"string": root},
        f"{STANDARD_ATTRIBUTE_DOMAIN}/numaNode": {"int": numa},
    }


def _mig_device(spec: GpuSpec, profile: MigProfile, minor: int, index: int, node: str,
                gpus: int = 8) -> dict[str, Any]:
    parent = _gpu_attributes(spec, minor, node, gpus)
    attributes = {
        **parent,
        "type": {"string": "mig"},
        "uuid": {"string": _uuid("MIG", node, str(minor), profile.name, str(index))},
        "parentUUID": parent["uuid"],
        "profile": {"string": profile.name},
    }
    placement = profile.placements[index]
    capacity = {
        **_mig_capacity(profile),
        **{f"memorySlice{placement + s}": {"value": "1"} for s in range(profile.memory_slices)},
    }
    return {"name": _mig_name(profile, minor, placement), "attributes": attributes, "capacity": capacity}


def _mig_capacity(profile: MigProfile) -> dict[str, dict[str, str]]:
    """``CommonCapacitiesMig``: the instance's engines and memory (no memory slices)."""
    return {
        "multiprocessors": {"value": str(profile.multiprocessors)},
        "copyEngines": {"value": str(profile.copy_engines)},
        "decoders": {"value": str(profile.decoders)},
        "encoders": {"value": str(profile.encoders)},
        "jpegEngines": {"value": str(profile.jpeg_engines)},
        "ofaEngines": {"value": str(profile.ofa_engines)},
        "memory": {"value": f"{profile.memory_mib}Mi"},
    }


def _mig_name(profile: MigProfile, minor: int, placement: int) -> str:
    """``MigSpecTuple.ToCanonicalName``: dots dropped, then RFC 1123 (``+`` becomes ``-``)."""
    part = re.sub(r"[^a-z0-9-]", "-", profile.name.replace(".", "").lower()).strip("-")
    return f"gpu-{minor}-mig-{part}-{profile.profile_id}-{placement}"


def _hyphenated(name: str) -> str:
    """``camelToDNSName``: ``copyEngines`` -> ``copy-engines``."""
    return re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", name).lower()


def _counters(capacity: dict[str, dict[str, str]], start: int, size: int) -> dict[str, dict[str, str]]:
    counters = {_hyphenated(k): dict(v) for k, v in capacity.items()}
    counters.update({f"memory-slice-{i}": {"value": "1"} for i in range(start, start + size)})
    return counters


def _full_capacity(spec: GpuSpec) -> dict[str, dict[str, str]]:
    """``maxCapacities``: the largest value of each capacity over all profiles and placements."""
    best: dict[str, dict[str, str]] = {}
    for profile in spec.mig_profiles:
        for key, value in _mig_capacity(profile).items():
            if key not in best or _amount(value["value"]) > _amount(best[key]["value"]):
                best[key] = value
    return best


def _amount(text: str) -> int:
    return int(text[:-2]) * 1024 * 1024 if text.endswith("Mi") else int(text)


def _dynamic_gpu(spec: GpuSpec, minor: int, node: str,
                 gpus: int = 8) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One GPU in DynamicMIG: its counter set and its devices (full GPU + every placement)."""
    counter_set = f"gpu-{minor}-counter-set"
    slices = max(p.memory_slices for p in spec.mig_profiles)
    full = _full_capacity(spec)
    parent = _gpu_attributes(spec, minor, node, gpus)
    devices = [{
        "name": f"gpu-{minor}",
        "attributes": copy.deepcopy(parent),
        "capacity": copy.deepcopy(full),
        "consumesCounters": [{"counterSet": counter_set, "counters": _counters(full, 0, slices)}],
    }]
    for profile in spec.mig_profiles:
        attributes = {k: v for k, v in parent.items() if k != "uuid"}
        attributes.update({"type": {"string": "mig"}, "parentUUID": parent["uuid"],
                           "profile": {"string": profile.name}})
        capacity = _mig_capacity(profile)
        for start in profile.placements:
            devices.append({
                "name": _mig_name(profile, minor, start),
                "attributes": copy.deepcopy(attributes),
                "capacity": copy.deepcopy(capacity),
                "consumesCounters": [{"counterSet": counter_set,
                                      "counters": _counters(capacity, start, profile.memory_slices)}],
            })
    devices.sort(key=lambda d: str(d["name"]))
    return {"name": counter_set, "counters": _counters(full, 0, slices)}, devices


def _slice(node: str, devices: list[dict[str, Any]], resource_version: str, *, suffix: str = "",
           count: int = 1, counter_sets: list[dict[str, Any]] | None = None,
           driver: str = DRIVER) -> dict[str, Any]:
    if resource_version == "v1beta1":
        devices = [{"name": d["name"], "basic": {k: v for k, v in d.items() if k != "name"}} for d in devices]
    spec: dict[str, Any] = {
        "driver": driver,
        "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": count},
    }
    if counter_sets:
        spec["sharedCounters"] = counter_sets
    if devices or not counter_sets:
        spec["devices"] = devices
    return {
        "apiVersion": f"resource.k8s.io/{resource_version}",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}{suffix}"},
        "spec": spec,
    }


def _dynamic_slices(spec: GpuSpec, node: str, gpus: int, resource_version: str,
                    split: bool) -> list[dict[str, Any]]:
    """The pool of one DynamicMIG node: per-GPU slices, counter sets apart from 1.35 on."""
    gpus_data = [_dynamic_gpu(spec, minor, node, gpus) for minor in range(gpus)]
    if split:
        count = gpus + 1
        slices = [_slice(node, [], resource_version, suffix="-counters", count=count,
                         counter_sets=[c for c, _ in gpus_data])]
        slices += [_slice(node, d, resource_version, suffix=f"-gpu-{i}", count=count)
                   for i, (_, d) in enumerate(gpus_data)]
        return slices
    return [_slice(node, d, resource_version, suffix=f"-gpu-{i}", count=gpus, counter_sets=[c])
            for i, (c, d) in enumerate(gpus_data)]


def catalog_resource_slices(
    models: Iterable[str] | None = None,
    gpus_per_node: int = 8,
    resource_version: str = "v1",
    mig_mode: MigMode = "static",
    split_counter_sets: bool = False,
    network: bool = False,
    nvidia_driver: str | None = "main",
) -> list[dict[str, Any]]:
    """ResourceSlices for every catalog model (or those in ``models``, by key).

    ``resource_version`` picks the shape: ``v1beta1`` nests attributes under ``basic``.
    ``mig_mode="dynamic"`` gives DynamicMIG pools (one node per model); ``split_counter_sets``
    puts the counter sets into a slice of their own (1.35+, ``Target.counter_sets_in_own_slice``).
    Every GPU carries the HGX topology (``network.gpu_topology``); ``network`` adds a ``dra.net``
    slice with one RDMA NIC beside each GPU to every node. ``nvidia_driver``: the NVIDIA DRA driver
    release whose topology attributes the GPU and MIG devices carry (``"main"``: all of them;
    ``"0.4"`` and older: no ``numaNode``; see :mod:`dra_constructs.catalog.driver_versions`).
    """
    slices = _catalog_slices(models, gpus_per_node, resource_version, mig_mode, split_counter_sets, network)
    return _as_published_by(slices, nvidia_driver_release(nvidia_driver, "catalog_resource_slices"))


def _as_published_by(slices: list[dict[str, Any]], release: NvidiaDriverRelease) -> list[dict[str, Any]]:
    """``slices`` with the NVIDIA devices' topology attributes that ``release`` does not publish removed."""
    if release.numa_node and release.pcie_root and release.pcie_root_dynamic_mig:
        return slices
    slices = copy.deepcopy(slices)
    for slice_ in slices:
        spec = slice_["spec"]
        if spec.get("driver") != DRIVER:
            continue
        for device in spec.get("devices", []):
            body = device.get("basic", device)  # v1beta1 nests the fields under basic
            attributes = body.get("attributes", {})
            kind = attributes.get("type", {}).get("string", "gpu")
            dynamic = bool(body.get("consumesCounters"))
            for on in ("numaNode", "pcieRoot"):
                if release.missing(on, kind, dynamic_mig=dynamic and kind == "mig") is not None:
                    attributes.pop(f"{STANDARD_ATTRIBUTE_DOMAIN}/{on}", None)
    return slices


def _catalog_slices(
    models: Iterable[str] | None, gpus_per_node: int, resource_version: str, mig_mode: MigMode,
    split_counter_sets: bool, network: bool,
) -> list[dict[str, Any]]:
    wanted = set(models) if models is not None else None
    slices: list[dict[str, Any]] = []
    for spec in GPU_SPECS:
        if wanted is not None and spec.key not in wanted:
            continue
        node = f"catalog-{spec.key.lower().replace('_', '-')}"
        if mig_mode == "dynamic":
            slices.extend(_dynamic_slices(spec, node, gpus_per_node, resource_version, split_counter_sets))
            if network:
                slices.append(_slice(node, nic_devices(gpus_per_node), resource_version, driver=NIC_DRIVER))
            continue
        whole = [
            {
                "name": f"gpu-{minor}",
                "attributes": _gpu_attributes(spec, minor, node, gpus_per_node),
                "capacity": {"memory": {"value": f"{spec.memory_mib}Mi"}},
            }
            for minor in range(gpus_per_node)
        ]
        slices.append(_slice(node, whole, resource_version))
        if network:
            slices.append(_slice(node, nic_devices(gpus_per_node), resource_version, driver=NIC_DRIVER))
        for profile in spec.mig_profiles:
            mig_node = f"{node}-{profile.device_name_part}"
            devices = [
                _mig_device(spec, profile, minor, index, mig_node, gpus_per_node)
                for minor in range(gpus_per_node)
                for index in range(profile.max_count)
            ]
            slices.append(_slice(mig_node, devices, resource_version))
            if network:
                slices.append(_slice(mig_node, nic_devices(gpus_per_node), resource_version, driver=NIC_DRIVER))
    return slices


_ = ATTRIBUTE_DOMAIN  # the NVIDIA attributes above are unqualified: they live under the driver's domain
