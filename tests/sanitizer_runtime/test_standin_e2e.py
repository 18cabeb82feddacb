"""End to end without a GPU: the agent zipapp and benchmarks/gpu_sanitize.py on the stand-in driver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dra_constructs.agent.zipapp import build_zipapp

from .standin import CI, GI, GPU, MiB, Node, Tenant

REPO = Path(__file__).resolve().parents[2]


def test_the_zipapp_sanitizes_a_mig_instance_through_the_real_backends(tmp_path: Path, standin_lib: Path) -> None:
    node = Node(tmp_path / "node", standin_lib, [GPU(
        "GPU-a", minor=3, name="NVIDIA A100-SXM4-80GB", arch=80, mig=True, total=81920 * MiB,
        gis=[GI(5, [CI("MIG-5-0", 0), CI("MIG-5-1", 1)], placement_start=4)],
    )], ptx_isa_max=87).write()
    pyz = tmp_path / "agent.pyz"
    pyz.write_bytes(build_zipapp())
    config = tmp_path / "agent.yaml"
    config.write_text(f"node_name: node-a\nbackend: nvml\nstate_dir: {tmp_path}/state\ngrace_period_s: 0.3\n"
                      f"drain_timeout_s: 8\npoll_interval_s: 0.05\nevidence_file: {tmp_path}/evidence.jsonl\n"
                      f"proc_root: {node.proc_root}\n"  # the node's /proc: nvidia-caps major, MIG access files
                      "kube: {mode: disabled, kubernetes_version: '1.34'}\n")
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **node.env()}
    tenant = Tenant(node, "MIG-5-1", nbytes=16 * MiB, ignore_term=True)  # no claim behind it (no pod cgroup)

    def sanitizer(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-I", str(pyz), *args, "--config", str(config), "--device",
                               "gpu-3-mig-1g10gb-19-4"], env=env, capture_output=True, text=True, timeout=120)

    try:
        refused = sanitizer("once")  # a hand-run barrier releases no claim: it owns nobody's processes
        assert tenant.alive()
    finally:
        tenant.stop()
    assert refused.returncode == 1, refused.stderr[-2000:]
    record = json.loads(refused.stdout)
    assert record["result"] == "quarantined" and record["reason"].startswith("foreign contexts")
    assert record["pids_sigterm"] == record["pids_sigkill"] == []
    assert [p["pid"] for p in record["foreign_processes"]] == [tenant.pid]
    out = sanitizer("release", "--reason", "the stray process is gone")  # the whole barrier again
    assert out.returncode == 0, out.stderr[-2000:]
    record = json.loads(out.stdout)
    assert record["result"] == "released"
    assert record["control_found"] == record["control_planted"] > 0 and record["nonzero_words"] == 0
    assert record["bytes_verified"] == record["bytes_zeroed"] > 0 and record["coverage_of_free"] == 1.0
    assert 0.5 < record["coverage"] < 1.0  # of total - reserved: the context was not read
    assert bytes.fromhex("3c5ac3a5") not in node.memory(0, 0)  # the tenant's pattern is gone


def test_the_gpu_benchmark_runs_on_the_stand_in(tmp_path: Path, standin_lib: Path) -> None:
    node = Node(tmp_path / "node", standin_lib, [GPU("GPU-b", total=96 * MiB)], ptx_isa_max=87).write()
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_sanitize.py"), "--peak-gbps", "10",
                          "--proc-root", str(node.proc_root)],  # the node's /proc (this sandbox's PID 1 is unreadable)
                         env={**os.environ, **node.env()}, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert report["tenant_pattern_words"] == report["tenant_bytes"] // 8 > 0  # planted pattern found before
    assert report["residue_words"] == 0 and report["barrier_result"] == "released"  # and gone after
    assert report["bytes_not_covered"] == 96 * MiB - report["bytes_verified"] and report["control"] == [2, 2]
