"""Barrier overhead per device on the simulated backend, 56 devices (8 GPUs x 7 slices) at once.

Method: one agent runtime (real barrier, simulated node, in-memory API) sanitizes all 56 MIG
slices concurrently in a thread pool, ``--rounds`` times. Each device has a tenant (1-3
processes, some needing SIGKILL after the 30 s grace period) whose memory holds non-zero data.
Grace periods run on per-device virtual clocks (no wall time); the wall time spent inside the
simulated fill and verify calls is measured and subtracted. What remains is the barrier's own
overhead: state persistence (with and without fsync), NVML polling, signalling, the guard and
evidence. Kubernetes API latency is not included (the in-memory API answers at once).

Usage: python benchmarks/sanitizer_barrier.py [--rounds 5] [--no-fsync]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from dra_constructs.agent.backends import simulated
from dra_constructs.agent.config import AgentConfig, KubeSettings, SimulatedBackendSettings
from dra_constructs.agent.kube import Tenant
from dra_constructs.agent.runtime import build_runtime
from dra_constructs.agent.simkube import SimulatedKube

_SCRUB_WALL: dict[str, float] = {}


def _timed(method: Any) -> Any:
    def wrapper(self: Any) -> Any:
        start = time.perf_counter()
        try:
            return method(self)
        finally:
            name = self._dev.info.name
            _SCRUB_WALL[name] = _SCRUB_WALL.get(name, 0.0) + time.perf_counter() - start
    return wrapper


def run(rounds: int, fsync: bool, health_gates: bool = True) -> dict[str, Any]:
    simulated._SimSession.fill = _timed(simulated._SimSession.fill)  # type: ignore[method-assign]
    simulated._SimSession.verify = _timed(simulated._SimSession.verify)  # type: ignore[method-assign]
    settings = SimulatedBackendSettings(gpus=8, mig_slices_per_gpu=7, memory_bytes=4096)
    with tempfile.TemporaryDirectory() as tmp:
        config = AgentConfig(node_name="bench", backend="simulated", state_dir=f"{tmp}/state",
                             evidence_file=f"{tmp}/evidence.jsonl", simulated=settings, max_parallel=56,
                             health_gates=health_gates,
                             kube=KubeSettings(mode="disabled", kubernetes_version="1.34"))
        node = simulated.SimulatedNode(settings)
        rt = build_runtime(config, kube_ops=SimulatedKube(), node=node, fsync=fsync)
        devices = rt.devices
        assert len(devices) == 56
        rng = random.Random(0)
        for d in devices:  # first contact: sanitize never-seen devices
            rt.barrier.run(d, "startup-unknown")
        overheads: list[float] = []
        round_walls: list[float] = []
        dirty = 0

        def one(device: Any, tenant: Tenant) -> float:
            _SCRUB_WALL[device.name] = 0.0
            start = time.perf_counter()
            record = rt.barrier.run(device, "deallocated", tenant)
            wall = time.perf_counter() - start
            assert record.result == "released", record.reason
            return wall - _SCRUB_WALL[device.name]

        with ThreadPoolExecutor(max_workers=56) as pool:
            for r in range(rounds):
                tenants = {}
                for d in devices:
                    pod = str(uuid.UUID(int=rng.getrandbits(128)))  # the claim's pod: only its processes are signalled
                    tenant = Tenant(f"ns/claim-{r}-{d.name}", "ns", f"{r}-{d.name}", pods=(pod,))
                    rt.barrier.mark_allocated(d, tenant)
                    node.start_tenant(d.name, [("obey", rng.uniform(0, 45)) for _ in range(rng.randint(1, 3))], rng,
                                      pod=pod)
                    tenants[d.name] = tenant
                start = time.perf_counter()
                overheads += list(pool.map(one, devices, [tenants[d.name] for d in devices]))
                round_walls.append(time.perf_counter() - start)
                dirty += sum(not node.audit(d.name).clean for d in devices)
        sequential: list[float] = []  # the same work, one device at a time: latency without contention
        for d in devices:
            pod = str(uuid.UUID(int=rng.getrandbits(128)))
            tenant = Tenant(f"ns/claim-seq-{d.name}", "ns", f"seq-{d.name}", pods=(pod,))
            rt.barrier.mark_allocated(d, tenant)
            node.start_tenant(d.name, [("obey", rng.uniform(0, 45)) for _ in range(rng.randint(1, 3))], rng,
                              pod=pod)
            sequential.append(one(d, tenant) * 1000)
    overheads_ms = sorted(o * 1000 for o in overheads)
    sequential.sort()
    return {
        "devices": 56, "rounds": rounds, "fsync": fsync, "health_gates": health_gates,
        "concurrent_latency_ms_per_device": {
            "mean": round(statistics.mean(overheads_ms), 3),
            "p50": round(overheads_ms[len(overheads_ms) // 2], 3),
            "p99": round(overheads_ms[int(len(overheads_ms) * 0.99) - 1], 3),
            "max": round(overheads_ms[-1], 3),
        },
        "sequential_overhead_ms_per_device": {
            "mean": round(statistics.mean(sequential), 3), "p50": round(sequential[len(sequential) // 2], 3),
            "max": round(sequential[-1], 3)},
        "round_wall_ms_56_devices": round(statistics.median(round_walls) * 1000, 1),
        "amortized_ms_per_device": round(statistics.median(round_walls) * 1000 / 56, 3),
        "goal_ms": 5.0,
        "dirty_devices_after_release": dirty,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-fsync", action="store_true")
    parser.add_argument("--no-health-gates", action="store_true", help="AgentConfig.health_gates off (their cost)")
    args = parser.parse_args()
    print(json.dumps(run(args.rounds, not args.no_fsync, not args.no_health_gates), indent=2))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    sys.exit(main())
