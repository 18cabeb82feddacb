"""How many CUDA fill workers the agent may run at once without running out of memory.

Each worker is a Python interpreter with the CUDA libraries and one context: 110-160 MB of
host memory (measured RSS, issue 9). ``max_parallel`` 64 under the DaemonSet's 2 GiB limit
would need ~10 GB on an 8 x 7 MIG node, so the number of live workers is bounded by the
container's memory limit: ``(limit - agent_memory_bytes) // worker_memory_bytes``, at least 1
and at most ``max_parallel``. The limit is ``memory_limit_bytes`` from the config or, when
unset, the cgroup's (v2 ``memory.max``, v1 ``memory.limit_in_bytes``).
"""

from __future__ import annotations

from pathlib import Path

from dra_constructs.agent.config import AgentConfig

__all__ = ["cgroup_memory_limit", "worker_slots"]

_V1_UNLIMITED = 1 << 60  # cgroup v1 reports "no limit" as a huge page-aligned number


def cgroup_memory_limit(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The memory limit of this process's cgroup in bytes; None if unlimited or unreadable."""
    own = _own_cgroup_v2(root)
    for path in ([own / "memory.max"] if own else []) + [root / "memory.max",
                                                         root / "memory" / "memory.limit_in_bytes"]:
        try:
            text = path.read_text(encoding="ascii").strip()
        except OSError:
            continue
        if text == "max":
            return None
        try:
            value = int(text)
        except ValueError:
            continue
        return None if value >= _V1_UNLIMITED else value
    return None


def _own_cgroup_v2(root: Path) -> Path | None:
    """``<root>/<path>`` from ``/proc/self/cgroup``'s v2 line (``0::/path``), if it exists."""
    try:
        for line in Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines():
            if line.startswith("0::"):
                path = root / line[3:].lstrip("/")
                return path if path != root and path.is_dir() else None
    except OSError:
        pass
    return None


def worker_slots(config: AgentConfig, limit: int | None = None) -> int:
    """Workers that fit in the memory limit (``limit``, else config, else cgroup), within max_parallel."""
    if limit is None:
        limit = config.memory_limit_bytes if config.memory_limit_bytes is not None else cgroup_memory_limit()
    if limit is None:
        return config.max_parallel
    fit = (limit - config.agent_memory_bytes) // config.worker_memory_bytes
    return max(1, min(config.max_parallel, fit))
