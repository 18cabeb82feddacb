"""A network DRA driver's names and the HGX node topology the catalog's synthetic nodes carry.

The NIC side follows DraNet (``google/dranet``, driver ``dra.net``): RDMA-capable NICs with
``dra.net/rdma`` (bool), ``dra.net/numaNode`` (int), ``dra.net/pciAddress`` (string), plus the
standard ``resource.kubernetes.io/pcieRoot`` (``deviceattribute.GetPCIeRootAttributeByPCIBusID``).
The catalog also publishes the standard ``resource.kubernetes.io/numaNode`` on NICs so that one
``matchAttribute`` can align a GPU and a NIC across drivers (the name must be the same on both).

Topology (an 8-GPU HGX H100/H200/B200 board): two NUMA nodes (GPUs 0-3 on 0, 4-7 on 1), four
PCIe roots with two GPUs each (one PCIe switch per pair), and one RDMA NIC beside every GPU (two
per root), as ``nvidia-smi topo -m`` shows them (GPU-NIC ``PIX`` within a pair).
"""

from __future__ import annotations

from typing import Any, Final

__all__ = [
    "DEVICE_CLASS_NIC",
    "NIC_ATTRIBUTES",
    "NIC_CLASS_SELECTORS",
    "NIC_DRIVER",
    "gpu_topology",
    "nic_devices",
]

#: The network DRA driver name (DraNet).
NIC_DRIVER: Final = "dra.net"
#: The DeviceClass of its NICs (DraNet's documented class).
DEVICE_CLASS_NIC: Final = "dranet"
#: The selector of that DeviceClass.
NIC_CLASS_SELECTORS: Final[dict[str, str]] = {DEVICE_CLASS_NIC: "device.driver == 'dra.net'"}
#: NIC attributes under ``dra.net`` with their DRA value type.
NIC_ATTRIBUTES: Final[dict[str, str]] = {"rdma": "bool", "numaNode": "int", "pciAddress": "string",
                                         "ifName": "string"}

#: PCIe root buses of the four GPU/NIC switches of the board, in GPU order (two GPUs each).
_ROOT_BUSES: Final = (0x15, 0x37, 0x97, 0xB7)


def gpu_topology(minor: int, gpus: int) -> tuple[str, int]:
    """``(pcieRoot, numaNode)`` of GPU ``minor`` on a board of ``gpus`` GPUs (2 per root, 2 NUMA nodes)."""
    root = (minor // 2) % len(_ROOT_BUSES)
    numa = 0 if minor < max(1, gpus // 2) else 1
    return f"pci0000:{_ROOT_BUSES[root]:02x}", numa


def nic_devices(gpus: int) -> list[dict[str, Any]]:
    """One RDMA NIC beside each GPU (same PCIe root and NUMA node), DraNet-style names."""
    devices = []
    for index in range(gpus):
        root, numa = gpu_topology(index, gpus)
        bus = _ROOT_BUSES[(index // 2) % len(_ROOT_BUSES)] + 1 + index % 2
        address = f"0000:{bus:02x}:00.0"
        devices.append({
            "name": f"pci-0000-{bus:02x}-00-0",
            "attributes": {
                "dra.net/rdma": {"bool": True},
                "dra.net/numaNode": {"int": numa},
                "dra.net/pciAddress": {"string": address},
                "dra.net/ifName": {"string": f"ib{index}"},
                "resource.kubernetes.io/pcieRoot": {"string": root},
                "resource.kubernetes.io/numaNode": {"int": numa},
            },
        })
    return devices
