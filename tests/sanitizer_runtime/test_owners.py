"""Process owners from ``/proc/<pid>/cgroup``, in the formats the kubelet and the runtimes write.

Paths follow kubernetes pkg/kubelet/cm: ``pod_container_manager_linux.go`` (``podCgroupNamePrefix
= "pod"``), ``qos_container_manager_linux.go`` (``burstable``, ``besteffort``; Guaranteed pods
directly under ``kubepods``) and ``cgroup_manager_linux.go`` (systemd: ``-`` joins the levels,
``escapeSystemdCgroupName`` turns the UID's ``-`` into ``_``); the container scopes are
containerd's ``cri-containerd-<id>.scope``, CRI-O's ``crio-<id>.scope`` and Docker's
``docker-<id>.scope``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_constructs.agent.owners import Owner, ProcOwners, parse_cgroup

UID = "7c6d5e4f-3a2b-4c1d-9e8f-0a1b2c3d4e5f"
CTR = "a" * 64


@pytest.mark.parametrize("text", [
    # cgroup v2, systemd driver, the three QoS classes and the three runtimes
    f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}.slice/"
    f"cri-containerd-{CTR}.scope\n",
    f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID.replace('-', '_')}.slice/"
    f"crio-{CTR}.scope\n",
    f"0::/kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice/docker-{CTR}.scope\n",
    # cgroup v2, cgroupfs driver
    f"0::/kubepods/burstable/pod{UID}/{CTR}\n",
    f"0::/kubepods/pod{UID}/{CTR}\n",
    # cgroup v1: one line per hierarchy (and a hybrid host's unified 0:: line)
    f"12:memory:/kubepods/besteffort/pod{UID}/{CTR}\n4:cpu,cpuacct:/kubepods/besteffort/pod{UID}/{CTR}\n"
    f"1:name=systemd:/kubepods/besteffort/pod{UID}/{CTR}\n0::/kubepods/besteffort/pod{UID}/{CTR}\n",
    # seen from the agent's own private cgroup namespace: relative to its root
    f"0::/../../kubepods-besteffort.slice/kubepods-besteffort-pod{UID.replace('-', '_')}.slice/"
    f"cri-containerd-{CTR}.scope\n",
])
def test_a_pods_container_is_recognised_in_every_kubelet_naming(text: str) -> None:
    owner = parse_cgroup(text)
    assert owner.kind == "pod" and owner.pod_uid == UID and owner.container == CTR


def test_a_static_pods_uid_is_its_config_hash() -> None:
    uid = "5b2e0c1e8a0f4b6f9d0c7e6a1b2c3d4e"
    owner = parse_cgroup(f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice/"
                         f"cri-containerd-{CTR}.scope\n")
    assert owner == Owner("pod", uid, CTR, owner.detail)


@pytest.mark.parametrize(("text", "kind"), [
    ("0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0\n", "host"),
    ("0::/user.slice/user-1000.slice/session-3.scope\n", "host"),
    ("0::/\n", "host"),
    ("0::/kubepods.slice/kubepods-burstable.slice\n", "unknown"),  # under kubepods, but no pod level
    ("", "unknown"),
    ("garbage\n", "unknown"),
    (f"12:memory:/kubepods/pod{UID}/{CTR}\n0::/kubepods/pod{'1' * 8}-0000-4000-8000-{'0' * 12}/{CTR}\n",
     "unknown"),  # two pods named: nobody's for sure
])
def test_anything_else_is_the_host_or_unknown(text: str, kind: str) -> None:
    owner = parse_cgroup(text)
    assert owner.kind == kind and owner.pod_uid is None


def test_owners_are_read_from_the_proc_root_and_fail_closed(tmp_path: Path) -> None:
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text(f"0::/kubepods/burstable/pod{UID}/{CTR}\n")
    owners = ProcOwners(tmp_path)
    assert owners(4242).pod_uid == UID
    gone = owners(4243)
    assert gone.kind == "unknown" and "cannot read" in gone.detail
    assert owners(4242).describe(lambda uid: "team-a/server-0") == f"pod team-a/server-0 (uid {UID})"
    assert gone.describe().startswith("unknown (cannot read")
