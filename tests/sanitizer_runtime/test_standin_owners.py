"""Real processes on the stand-in driver: only the released claim's pod is signalled (r16, r02, r03).

The tenants are real child processes holding stand-in contexts; each gets the cgroup file the
kubelet would give it (``standin.cgroup``: cgroupfs driver, cgroup v1 lines) under the agent's
``proc_root``, keyed by its real PID, or a host cgroup, or none (unreadable: unknown owner).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from dra_constructs.agent.kube import Tenant as ClaimTenant
from dra_constructs.agent.state import Phase

from .standin import GPU, MiB, Tenant
from .test_standin_backends import POD, MakeNode, runtime, standin  # noqa: F401 - fixture


def test_only_the_released_claims_processes_are_signalled(standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    node = standin([GPU("GPU-a", total=64 * MiB)])
    rt = runtime(tmp_path)
    (device,) = rt.devices
    assert rt.barrier.run(device, "startup-unknown").result == "released"
    claim = ClaimTenant("team-a/c1", "team-a", "u1", pods=(POD,))
    rt.barrier.mark_allocated(device, claim)
    mine = Tenant(node, "GPU-a", nbytes=4 * MiB, ignore_term=True, pod=POD)
    host = Tenant(node, "GPU-a", nbytes=MiB, ignore_term=True)
    (node.proc_root / str(host.pid)).mkdir(parents=True)
    (node.proc_root / str(host.pid) / "cgroup").write_text("0::/system.slice/dcgm-exporter.service\n")
    stray = Tenant(node, "GPU-a", nbytes=MiB, ignore_term=True)  # its cgroup cannot be read: unknown owner
    try:
        record = rt.barrier.run(device, "deallocated", claim)
        assert not mine.alive() and host.alive() and stray.alive()
        assert record.pids_sigterm == record.pids_sigkill == [mine.pid]
        assert record.result == "quarantined" and (record.reason or "").startswith("foreign contexts")
        kinds = {p["pid"]: p["owner_kind"] for p in record.foreign_processes}
        assert kinds == {host.pid: "host", stray.pid: "unknown"}
        assert rt.barrier.recover(device) is None  # they still run: the device stays guarded
        for other in (host, stray):
            os.kill(other.pid, signal.SIGKILL)  # their owners end them
            other.stop()
        released = rt.barrier.recover(device)
        assert released is not None and released.trigger == "zero-contexts" and released.result == "released"
        assert released.pids_sigterm == [] and rt.barrier.deps.store.load(device.name).phase is Phase.CLEAN
    finally:
        for tenant in (mine, host, stray):
            tenant.stop()
