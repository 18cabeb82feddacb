"""Cost of the drain's ``/proc/*/fd`` scan (``agent/devhandles.py``) against the bare syscalls under it.

Method: a fake proc_root of ``--pids`` PIDs with 8 fd links each (nvidiactl, nvidia-uvm, /dev/null,
a pipe, a socket, a log file, an eventfd, one GPU node: the set a CUDA process holds) pointing at
real character device nodes made with ``mknod`` (the driver's numbers, ``195:<minor>``; needs root
or CAP_MKNOD). Alternating in one process, best of ``--repeat``: ``DeviceHandles.scan`` of gpu-0
(which follows each link with ``os.stat`` to match ``st_rdev``) and the baseline, a loop that only
lists every fd directory and ``os.stat``s every link (the least any device-number scan must do).
The ratio is what the scan's own bookkeeping (owners, exemptions, labels) costs on top.

Usage: python benchmarks/devhandles_scan.py [--pids 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pids", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
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
