"""Typed requests for AMD Instinct GPUs under the AMD GPU DRA driver (DeviceClass ``gpu.amd.com``).

The driver's one DeviceClass holds whole GPUs and partitions alike, so every request pins ``type``
(``amdgpu`` / ``amdgpu-partition``), the product and, for partitions, the ``partitionProfile``
(``dra_constructs.catalog.amd``). Both are :class:`~dra_constructs.requests.CustomRequest` s with
generated selectors, so rendering, ``firstAvailable`` and the checks treat them like any request.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from dra_constructs.catalog.amd import (
    AMD_DEVICE_CLASS,
    AMD_DRIVER,
    AMD_TYPE_GPU,
    AMD_TYPE_PARTITION,
    amd_gpu_spec,
    amd_partition_profile,
)
from dra_constructs.cel import builder
from dra_constructs.errors import DraConstructsError
from dra_constructs.requests import CustomRequest, Items
from dra_constructs.validation import Where, _where

__all__ = ["AMD_PARENT_ATTRIBUTE", "AmdGpuRequest", "AmdPartitionRequest"]

#: What partitions of one GPU share (``deviceinfo.go``: ``parentDeviceID``; not ``deviceID``).
AMD_PARENT_ATTRIBUTE = f"{AMD_DRIVER}/parentDeviceID"


def _attr(name: str) -> str:
    return builder.attribute(name, AMD_DRIVER)


class AmdPartitionRequest(CustomRequest):
    """``count`` partitions of one profile (``cpx_nps4``...) of one AMD model, e.g. MI300X CPX.

    ``Alignment(on='parentGPU')`` keeps them on one GPU (``matchAttribute gpu.amd.com/parentDeviceID``).
    """

    name: str = "partition"
    gpu: str = Field(description="AMD model key: MI300X, MI325X, MI350X, MI355X, MI300A.")
    profile: str = Field(description="Partition profile, e.g. 'cpx_nps4' (compute mode _ NPS mode).")
    device_class_name: str = Field(default=AMD_DEVICE_CLASS, description="gpu.amd.com or a class narrowing it.")

    parent_attribute: ClassVar[str] = AMD_PARENT_ATTRIBUTE

    def catalog_class(self) -> str:
        return AMD_DEVICE_CLASS

    def validate_for(self, where: Where) -> None:
        super().validate_for(where)
        self._profile(where)

    def _profile(self, where: Where) -> str:
        field = f"requests[{self.name!r}]"
        try:
            profile = amd_partition_profile(self.gpu, self.profile)
        except DraConstructsError as error:
            raise DraConstructsError(_where(where), f"{field}.{error.field}", error.value, error.problem,
                                     error.fix) from None
        if profile.whole_gpu:
            raise DraConstructsError(
                _where(where), f"{field}.profile", self.profile,
                f"in {profile.name} the driver publishes the GPU whole (type amdgpu), not as a partition",
                f"use AmdGpuRequest(models=[{self.gpu!r}]) for whole GPUs, or a partitioned profile",
            )
        return profile.name

    def generated_selectors(self, where: Where) -> list[str]:
        spec = amd_gpu_spec(self.gpu, _where(where), f"requests[{self.name!r}].gpu")
        return [
            builder.string_equals(_attr("type"), AMD_TYPE_PARTITION),
            builder.string_equals(_attr("productName"), spec.product_name),
            builder.string_equals(_attr("partitionProfile"), self._profile(where)),
        ]


class AmdGpuRequest(CustomRequest):
    """``count`` whole AMD GPUs (in SPX: the driver publishes partitioned GPUs only as partitions)."""

    name: str = "gpu"
    models: Items[str] = Field(description="Any of these AMD model keys, e.g. ['MI300X', 'MI325X'].")
    device_class_name: str = Field(default=AMD_DEVICE_CLASS, description="gpu.amd.com or a class narrowing it.")

    def catalog_class(self) -> str:
        return AMD_DEVICE_CLASS

    def validate_for(self, where: Where) -> None:
        super().validate_for(where)
        if not self.models:
            raise DraConstructsError(_where(where), f"requests[{self.name!r}].models", [],
                                     "a workload GPU request must pin the hardware",
                                     "pass models=['MI300X', ...]")
        for model in self.models:
            amd_gpu_spec(model, _where(where), f"requests[{self.name!r}].models")

    def generated_selectors(self, where: Where) -> list[str]:
        names = [amd_gpu_spec(m, _where(where), f"requests[{self.name!r}].models").product_name
                 for m in self.models]
        product = builder.any_of(builder.string_equals(_attr("productName"), n) for n in dict.fromkeys(names))
        return [builder.string_equals(_attr("type"), AMD_TYPE_GPU), product]
