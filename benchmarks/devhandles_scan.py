"""Cost of the drain's ``/proc/*/fd`` scan (``agent/devhandles.py``) against the bare syscalls under it.

Method: a fake proc_root of ``--pids`` PIDs with 8 fd links each (nvidiactl, nvidia-uvm, /dev/null,
a pipe, a socket, a log file, an eventfd, one GPU node: the set a CUDA process holds) pointing at
real character device nodes made with ``mknod`` (the driver's numbers, ``195:<minor>``; needs root
or CAP_MKNOD). Alternating in one process, best of ``--repeat``: ``DeviceHandles.scan`` of gpu-0
(which follows each link with ``os.stat`` to match ``st_rdev``) and the baseline, a loop that only
lists every fd directory and ``os.stat``s every link (the least any device-number scan must do).
The ratio is what the scan's own bookkeeping (owners, exemptions, labels) costs on top.

``--drain``: what one drain poll costs in scans and time. The real barrier on a simulated whole GPU
whose claim process survives SIGKILL (D state) drains until ``drain_timeout_s`` (grace 0: every
poll is one that SIGKILLs it, which closes its pidfd, so each poll pins it anew), with the real
``DeviceHandles`` scan of ``--proc`` (default this machine's ``/proc``: fd and ``maps`` of every
process) and a signaller keeping ``OsSignaller``'s pidfd contract. With ``--before REV`` the drain
of ``REV`` (``git show REV:src/dra_constructs/agent/barrier_drain.py``, the same barrier otherwise)
runs alternately in the same process. Reported per drain: polls, scans, scans per poll, wall ms per
poll (the drain's own time, best of ``--repeat``), and one scan alone (best of ``--repeat``).

Usage: python benchmarks/devhandles_scan.py [--pids 2000] [--repeat 5]
       python benchmarks/devhandles_scan.py --drain [--proc /proc] [--before main] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import signal
import stat
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dra_constructs.agent.devhandles import DeviceHandles
from dra_constructs.agent.devices import DeviceInfo

GPU0 = DeviceInfo("gpu-0", "GPU-a", 0, 80 << 30)
PROC_DEVICES = "Character devices:\n195 nvidia-frontend\n235 nvidia-uvm\n237 nvidia-caps\n"


def build_tree(root: Path, pids: int) -> Path:
    """``root/dev`` device nodes and ``root/proc/<pid>/fd/<n>`` links; one PID holds gpu-0."""
    dev = root / "dev"
    dev.mkdir()
    nodes = {"nvidia0": (195, 0), "nvidia1": (195, 1), "nvidiactl": (195, 255), "nvidia-uvm": (235, 0)}
    for name, (major, minor) in nodes.items():
        os.mknod(dev / name, 0o600 | stat.S_IFCHR, os.makedev(major, minor))
    proc = root / "proc"
    proc.mkdir()
    (proc / "devices").write_text(PROC_DEVICES)
    log = root / "app.log"
    log.write_text("")
    for pid in range(1000, 1000 + pids):
        fd = proc / str(pid) / "fd"
        fd.mkdir(parents=True)
        gpu = "nvidia0" if pid == 1000 + pids - 1 else "nvidia1"
        targets: tuple[str | Path, ...] = (dev / "nvidiactl", dev / "nvidia-uvm", "/dev/null", "pipe:[1]",
                                           "socket:[2]", log, "anon_inode:[eventfd]", dev / gpu)
        for number, target in enumerate(targets, start=3):
            os.symlink(target, fd / str(number))
        (proc / str(pid) / "comm").write_text("python3\n")
    return proc


def bare_stat_scan(proc: Path) -> int:
    """List every fd directory and stat every link (what the scan cannot do without)."""
    seen = 0
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        fd_dir = os.path.join(entry.path, "fd")
        for fd in os.scandir(fd_dir):
            try:
                os.stat(fd.path)
            except OSError:
                continue
            seen += 1
    return seen


def best_of(repeat: int, run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


class _PidfdContract:
    """``OsSignaller``'s pidfd contract over the simulated signaller: ``pin`` is True only when it opens a new
    pidfd (False: already pinned, or gone); a SIGKILL closes the pid's pidfd (backends/base.py)."""

    def __init__(self, inner: Any, alive: Callable[[int], bool]) -> None:
        self._inner, self._alive, self._fds = inner, alive, set[int]()

    def pin(self, pid: int) -> bool:
        if pid in self._fds or not self._alive(pid):
            return False
        self._fds.add(pid)
        return True

    def signal(self, pid: int, signum: int) -> bool:
        if signum == signal.SIGKILL:
            self._fds.discard(pid)
        return bool(self._inner.signal(pid, signum))


def _drain_before(rev: str) -> type:
    """``_DrainMixin`` of ``rev``'s ``barrier_drain.py`` (the other modules are today's; same drain API)."""
    repo = Path(__file__).resolve().parents[1]
    source = subprocess.run(["git", "show", f"{rev}:src/dra_constructs/agent/barrier_drain.py"], cwd=repo,
                            check=True, capture_output=True, text=True).stdout
    module = types.ModuleType(f"barrier_drain_{rev}")
    exec(compile(source, f"{rev}:barrier_drain.py", "exec"), module.__dict__)  # our own file at rev
    mixin: type = module._DrainMixin
    return mixin


def drain_rounds(proc: str, repeat: int, before: str | None) -> dict[str, Any]:
    """Best-of-``repeat`` drains (now, and ``before`` alternating): polls, scans, ms per poll."""
    from dra_constructs.agent.backends.simulated import SimulatedNode
    from dra_constructs.agent.config import AgentConfig, KubeSettings, SimulatedBackendSettings
    from dra_constructs.agent.kube import Tenant
    from dra_constructs.agent.runtime import build_runtime
    from dra_constructs.agent.simkube import SimulatedKube

    logging.getLogger("dra_sanitizer").setLevel(logging.CRITICAL)  # every drain ends in a (planned) quarantine
    pod = "0c4e5f1a-7d2b-4c9e-9a41-5b7e2f3d8c10"
    tenant = Tenant("team-a/claim-1", "team-a", "uid-1", pods=(pod,))
    variants: dict[str, type | None] = {"now": None}
    if before:
        variants[f"before ({before})"] = _drain_before(before)
    results: dict[str, dict[str, Any]] = {}
    scan_alone = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        settings = SimulatedBackendSettings(gpus=1, mig_slices_per_gpu=0, memory_bytes=2048)
        config = AgentConfig(node_name="bench", backend="simulated", grace_period_s=0, drain_timeout_s=5,
                             state_dir=f"{tmp}/state", evidence_file=f"{tmp}/evidence.jsonl", simulated=settings,
                             selftest_at_start=False, kube=KubeSettings(mode="disabled", kubernetes_version="1.34"))
        node = SimulatedNode(settings)
        rt = build_runtime(config, kube_ops=SimulatedKube(), node=node, fsync=False)
        device = rt.devices[0]
        barrier, deps = rt.barrier, rt.barrier.deps
        now_class = type(barrier)
        scanner = DeviceHandles(proc).scan
        scans = [0]

        def counted(target: DeviceInfo) -> Any:
            scans[0] += 1
            return scanner(target)

        deps.device_handles = counted
        deps.signaller = _PidfdContract(deps.signaller, lambda p: p in deps.nvml.processes(device))
        barrier.run(device, "startup-unknown")
        polls = round(config.drain_timeout_s / config.poll_interval_s) + 1
        drain_wall = [0.0]

        def timed(base: type) -> type:
            """``base`` whose ``_drain`` (the polls alone, not the quarantine after it) is timed."""
            def _drain(self: Any, c: Any) -> None:
                start = time.perf_counter()
                try:
                    base._drain(self, c)  # type: ignore[attr-defined]
                finally:
                    drain_wall[0] = time.perf_counter() - start
            return type(f"Timed{base.__name__}", (base,), {"_drain": _drain})

        classes = {name: timed(now_class if mixin is None else type("BeforeBarrier", (mixin, now_class), {}))
                   for name, mixin in variants.items()}
        for _ in range(repeat):
            for name in variants:
                barrier.__class__ = classes[name]
                barrier.mark_allocated(device, tenant)
                (pid,) = node.start_tenant(device.name, [("unkillable", 0.0)], random.Random(0), pod=pod)
                scans[0] = 0
                record = barrier.run(device, "deallocated", tenant)
                wall = drain_wall[0]
                assert record.result == "quarantined" and (record.reason or "").startswith("drain timeout"), \
                    record.reason
                node._dev(device.name).remove(pid)  # the D-state process ends at last (no public call for it)
                best = results.setdefault(name, {"polls": polls, "scans": scans[0], "ms_per_poll": float("inf")})
                best["ms_per_poll"] = min(best["ms_per_poll"], wall * 1000 / polls)
                best["scans"] = scans[0]
            scan_alone = min(scan_alone, best_of(1, lambda: scanner(device)))
        barrier.__class__ = now_class
    for best in results.values():
        best["scans_per_poll"] = round(best["scans"] / best["polls"], 2)
        best["ms_per_poll"] = round(best["ms_per_poll"], 1)
    return {"proc": proc, "pids": sum(e.isdigit() for e in os.listdir(proc)), "scan_alone_ms":
            round(scan_alone * 1000, 1), "drains": results, "load_average": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pids", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--drain", action="store_true", help="scans and wall time per drain poll (see above)")
    parser.add_argument("--proc", default="/proc", help="--drain: the proc root the scan reads")
    parser.add_argument("--before", default=None, help="--drain: a git revision whose drain runs alternately")
    args = parser.parse_args(argv)
    if args.drain:
        print(json.dumps(drain_rounds(args.proc, args.repeat, args.before)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        proc = build_tree(Path(tmp), args.pids)
        handles = DeviceHandles(proc, self_pid=1)
        scan = handles.scan(GPU0)
        if [h.pid for h in scan.holders] != [1000 + args.pids - 1] or scan.scanned != args.pids:
            print(f"wrong scan result: {scan}", file=sys.stderr)
            return 1
        rounds = []
        for _ in range(3):  # alternate, so load changes hit both alike
            rounds.append((best_of(args.repeat, lambda: handles.scan(GPU0)),
                           best_of(args.repeat, lambda: bare_stat_scan(proc))))
    scan_s = min(r[0] for r in rounds)
    bare_s = min(r[1] for r in rounds)
    print(json.dumps({"pids": args.pids, "fds": args.pids * 8, "scan_ms": round(scan_s * 1000, 1),
                      "bare_stat_ms": round(bare_s * 1000, 1), "ratio": round(scan_s / bare_s, 2),
                      "load_average": os.getloadavg()[0]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
