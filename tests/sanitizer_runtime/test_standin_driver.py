"""The stand-in driver itself behaves like the parts of the real one the backends rely on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .standin import CI, GI, GPU, MiB, Node, Tenant

_LIST = r"""
import pynvml as n
n.nvmlInit()
gpu = n.nvmlDeviceGetHandleByIndex(0)
for j in range(n.nvmlDeviceGetMaxMigDeviceCount(gpu)):
    try:
        mig = n.nvmlDeviceGetMigDeviceHandleByIndex(gpu, j)
    except n.NVMLError_NotFound:
        continue
    print(n.nvmlDeviceGetUUID(mig), [p.pid for p in n.nvmlDeviceGetComputeRunningProcesses(mig)])
"""


def test_mig_handle_lists_only_its_compute_instance_and_memory_outlives_the_tenant(
        tmp_path: Path, standin_lib: Path) -> None:
    node = Node(tmp_path, standin_lib, [GPU("GPU-0", mig=True, total=80 << 30, gis=[
        GI(1, [CI("MIG-ci0", 0), CI("MIG-ci1", 1)])])]).write()
    tenant = Tenant(node, "MIG-ci1", nbytes=4 * MiB, pattern=0x11223344)
    try:
        out = subprocess.run([sys.executable, "-c", _LIST], env={**os.environ, **node.env()}, check=True,
                             capture_output=True, text=True).stdout.splitlines()
        assert out == ["MIG-ci0 []", f"MIG-ci1 [{tenant.pid}]"]
    finally:
        tenant.stop()
    assert node.memory(0, 0).count(bytes.fromhex("44332211")) == MiB  # no scrub-on-free: residue stays
