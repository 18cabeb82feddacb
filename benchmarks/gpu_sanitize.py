"""GPU check of the barrier on one whole GPU (no MIG changes). Needs cuda-bindings, nvidia-ml-py.

1. Process 1 (a child) allocates all it can, fills it with a known 64-bit pattern, exits.
2. The barrier runs on the GPU through the real backends (NVML drain/verify contexts, CUDA
   worker zero-fill + device-side verify), with no Kubernetes API (``kube.mode: disabled``).
3. Process 2 (a child) allocates all it can and counts the pattern's words on the device.
Prints JSON: tenant_pattern_words (the positive control: must equal the tenant's words),
residue_words (must be 0), coverage of free and of total memory, bytes not covered, fill
(memset only, no allocation time) and verify bandwidth (GB/s and as a fraction of
``--peak-gbps``), barrier wall time. Exit 1 if the planted pattern was not found before the
barrier, residue was found after it, or the barrier did not release. Runs in well under 5
minutes on an 80-141 GB GPU. Against the stand-in driver of the tests (no GPU) it runs the
same code paths (tests/sanitizer_runtime/test_standin_e2e.py).

Usage: python benchmarks/gpu_sanitize.py [--device-index 0] [--peak-gbps 4800]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PATTERN32 = 0xA5C3_5A3C
PATTERN64 = (PATTERN32 << 32) | PATTERN32


def _child(mode: str) -> int:
    from dra_constructs.agent.backends.cuda import CudaContext

    ctx = CudaContext()
    allocated = ctx.allocate_all()
    if mode == "fill":
        seconds = ctx.memset(PATTERN32)
        count, _ = ctx.count_words(PATTERN64, match=True)
        print(json.dumps({"allocated": allocated, "pattern_words": count, "seconds": seconds}))
    else:
        count, seconds = ctx.count_words(PATTERN64, match=True)
        print(json.dumps({"allocated": allocated, "residue_words": count, "seconds": seconds}))
    return 0  # exit without freeing: the driver tears the context down, as for a killed tenant


def _run_child(mode: str, uuid: str) -> dict[str, float]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": uuid, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    out = subprocess.run([sys.executable, __file__, "--child", mode], env=env, capture_output=True, text=True,
                         check=True, timeout=240)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device-index", type=int, default=0)
    parser.add_argument("--peak-gbps", type=float, default=4800.0, help="datasheet bandwidth (H200: 4800)")
    parser.add_argument("--child", choices=("fill", "search"))
    parser.add_argument("--proc-root", default="/proc",
                        help="where the drain's fd/maps scan looks (a stand-in node's own proc tree in tests; a scan "
                             "that cannot read a process refuses the release)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    if args.child:
        return _child(args.child)

    from dra_constructs.agent.config import AgentConfig, KubeSettings
    from dra_constructs.agent.runtime import build_runtime
    from dra_constructs.errors import DraConstructsError

    with tempfile.TemporaryDirectory() as tmp:
        config = AgentConfig(node_name="gpu-check", backend="nvml", grace_period_s=5, drain_timeout_s=30,
                             state_dir=f"{tmp}/state", evidence_file=f"{tmp}/evidence.jsonl",
                             kube=KubeSettings(mode="disabled", kubernetes_version="1.34"), proc_root=args.proc_root)
        try:
            rt = build_runtime(config, fsync=True)
        except DraConstructsError as error:
            print(f"gpu_sanitize: {error}", file=sys.stderr)
            return 2
        device = [d for d in rt.devices if not d.is_mig][args.device_index]
        first = _run_child("fill", device.uuid)
        start = time.perf_counter()
        record = rt.barrier.run(device, "gpu-check")
        barrier_s = time.perf_counter() - start
        second = _run_child("search", device.uuid)
    fill_bw = (record.fill_bytes_per_s or 0) / 1e9
    verify_bw = (record.verify_bytes_per_s or 0) / 1e9
    report = {
        "device": device.name, "uuid": device.uuid, "memory_bytes": device.memory_bytes,
        "tenant_pattern_words": first["pattern_words"], "tenant_bytes": first["allocated"],
        "barrier_result": record.result, "barrier_reason": record.reason, "barrier_seconds": round(barrier_s, 3),
        "phase_seconds": record.phase_seconds, "coverage": record.coverage, "coverage_of_free": record.coverage_of_free,
        "coverage_of_total": record.coverage_of_total, "bytes_not_covered": record.bytes_not_covered,
        "bytes_context": record.bytes_context, "control": [record.control_found, record.control_planted],
        "bytes_free": record.bytes_free, "bytes_zeroed": record.bytes_zeroed, "bytes_verified": record.bytes_verified,
        "fill_gbps": round(fill_bw, 1), "fill_fraction_of_peak": round(fill_bw / args.peak_gbps, 3),
        "verify_gbps": round(verify_bw, 1), "verify_fraction_of_peak": round(verify_bw / args.peak_gbps, 3),
        "scrub_on_free_disabled": record.scrub_on_free_disabled,
        "second_tenant_bytes": second["allocated"], "residue_words": second["residue_words"],
    }
    print(json.dumps(report, indent=2))
    planted = first["pattern_words"] == first["allocated"] // 8 > 0  # the search sees a pattern that is there
    if not planted:
        print("gpu_sanitize: the tenant's pattern was not found before the barrier: the search proves nothing",
              file=sys.stderr)
    return 0 if planted and report["residue_words"] == 0 and record.result == "released" else 1


if __name__ == "__main__":
    sys.exit(main())
