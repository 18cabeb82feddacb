"""DynamicMIG: one barrier at a time per physical GPU, across every agent process on the node.

Overlapping placements (and the whole GPU) share memory slices, so two barriers on one GPU (the
DaemonSet's and a hand-run ``dra-sanitizer once`` / ``release``) would create two transient
instances, one refused by the other. :class:`GpuLock` is an ``flock`` on
``<state_dir>/locks/parent-<gpu uuid>.lock`` (the kernel releases it if the holder dies) plus a
per-GPU ``RLock`` in the process: reentrant (a recovery holds it and runs the whole barrier) and
exclusive between threads. Taken before the per-device lock, everywhere.
"""

from __future__ import annotations

import fcntl
import threading
from pathlib import Path
from typing import IO

__all__ = ["GpuLock", "GpuLocks"]


class GpuLock:
    """One GPU's node-wide, reentrant lock (``with lock:``, or ``acquire``/``release``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._rlock = threading.RLock()
        self._depth = 0
        self._handle: IO[bytes] | None = None

    def acquire(self, blocking: bool = True) -> bool:
        """Take it; False (non-blocking only) if another thread or process holds it."""
        if not self._rlock.acquire(blocking=blocking):
            return False
        if self._depth == 0:
            handle = open(self.path, "a+b")  # noqa: SIM115 - kept open while held, closed in release()
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                self._rlock.release()
                return False
            except BaseException:
                handle.close()
                self._rlock.release()
                raise
            self._handle = handle
        self._depth += 1
        return True

    def release(self) -> None:
        """Give one level back; the file lock goes with the last."""
        self._depth -= 1
        if self._depth == 0 and self._handle is not None:
            done, self._handle = self._handle, None
            fcntl.flock(done.fileno(), fcntl.LOCK_UN)
            done.close()
        self._rlock.release()

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self.release()


class GpuLocks:
    """The :class:`GpuLock` of each GPU, by UUID, under ``root`` (the state store's ``locks`` folder)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._locks: dict[str, GpuLock] = {}
        self._guard = threading.Lock()

    def get(self, gpu_uuid: str) -> GpuLock:
        """The lock of one GPU (UUIDs are ``GPU-<hex>``: safe in a file name)."""
        with self._guard:
            lock = self._locks.get(gpu_uuid)
            if lock is None:
                lock = self._locks[gpu_uuid] = GpuLock(self.root / f"parent-{gpu_uuid.replace('/', '_')}.lock")
            return lock
