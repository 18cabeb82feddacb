"""amdgpu process isolation through sysfs: ``enforce_isolation`` and ``run_cleaner_shader``.

LeftoverLocals (CVE-2023-4969): on AMD GPUs a kernel can read the Local Data Store (LDS) that an
earlier process left behind; zeroing device memory does not touch it. The kernel's answer is a
"cleaner shader" that clears LDS and the general-purpose registers (Linux
``Documentation/gpu/amdgpu/process-isolation.rst``). Per GPU (the PCI device's sysfs directory):

- ``enforce_isolation``: one value per partition (XCP), space separated ("1 0 1 0"); 1 enables
  process isolation with the cleaner shader between jobs on that partition, 0 disables it. Newer
  kernels also take 2 (isolation without the cleaner shader, "legacy") and 3 (no cleaner shader):
  anything but 1 is set to 1 here. A write gives every partition's value.
- ``run_cleaner_shader``: writing a partition index runs the cleaner shader on that partition;
  "it will run and complete before any new tasks are scheduled on the GPU".

:class:`AmdIsolation` checks and sets ``enforce_isolation`` for one partition (read back: a write
the kernel did not apply is an error), runs the cleaner shader there, and returns what it saw for
the evidence. Every failure is a :class:`BackendError`: the barrier quarantines (fail closed), since
without the cleaner shader the next tenant may read this one's LDS.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from dra_constructs.agent.backends.base import BackendError

__all__ = ["AmdIsolation", "pci_address"]

#: enforce_isolation values (amdgpu ``AMDGPU_ENFORCE_ISOLATION_*``): only ENABLE runs the cleaner shader.
_ENABLE = 1


def _write(path: Path, text: str) -> None:
    """Write a sysfs attribute: never creates the file (a missing attribute is an error, not a new file)."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, text.encode("ascii"))
    finally:
        os.close(fd)


def pci_address(bdf: int) -> str:
    """``amdsmi_bdf_t.as_uint`` (function 3 bits, device 5, bus 8, domain above) as sysfs names it."""
    return f"{(bdf >> 16) & 0xFFFF:04x}:{(bdf >> 8) & 0xFF:02x}:{(bdf >> 3) & 0x1F:02x}.{bdf & 0x7:x}"


class AmdIsolation:
    """The process-isolation files under ``<sysfs_root>/bus/pci/devices/<PCI address>/``."""

    def __init__(self, sysfs_root: str | Path = "/sys", enforce: bool = True) -> None:
        self.root = Path(sysfs_root)
        self.enforce = enforce
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, address: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(address, threading.Lock())

    def _dir(self, bdf: int) -> Path:
        return self.root / "bus" / "pci" / "devices" / pci_address(bdf)

    def _read(self, path: Path) -> list[int]:
        try:
            text = path.read_text(encoding="ascii")
        except OSError as error:
            raise BackendError("read enforce_isolation", f"{path}: {error.strerror or error}: the kernel's amdgpu has "
                               "no process isolation (Linux 6.12+), or sysfs is not mounted in the agent") from error
        try:
            return [int(v) for v in text.split()]
        except ValueError as error:
            raise BackendError("read enforce_isolation", f"{path}: unexpected content {text.strip()!r}") from error

    def clean(self, bdf: int, partition: int) -> dict[str, object]:
        """Ensure ``enforce_isolation`` is 1 on ``partition`` (if ``enforce``), run the cleaner shader there.

        Returns the evidence: the value found, the value after, and that the cleaner shader ran.
        """
        address = pci_address(bdf)
        directory = self._dir(bdf)
        isolation = directory / "enforce_isolation"
        with self._lock(address):
            values = self._read(isolation)
            if not 0 <= partition < len(values):
                raise BackendError("read enforce_isolation", f"{isolation} lists {len(values)} partition(s), "
                                   f"partition {partition} is not among them")
            found = values[partition]
            if self.enforce and found != _ENABLE:
                values[partition] = _ENABLE
                try:
                    _write(isolation, " ".join(map(str, values)) + "\n")
                except OSError as error:
                    raise BackendError("write enforce_isolation", f"{isolation}: {error.strerror or error} (the agent "
                                       "needs sysfs mounted read-write: privileged, or a writable /sys "
                                       "host path)") from error
                after = self._read(isolation)
                if len(after) <= partition or after[partition] != _ENABLE:
                    raise BackendError("write enforce_isolation", f"{isolation} reads {' '.join(map(str, after))} "
                                       f"after setting partition {partition} to 1")
                values = after
            cleaner = directory / "run_cleaner_shader"
            try:
                _write(cleaner, f"{partition}\n")
            except OSError as error:
                raise BackendError("run_cleaner_shader", f"{cleaner}: {error.strerror or error}: the LDS and registers "
                                   "the last tenant left (CVE-2023-4969) are not cleared") from error
        return {"pci_address": address, "partition": partition, "enforce_isolation_found": found,
                "enforce_isolation": values[partition], "cleaner_shader_ran": True}
