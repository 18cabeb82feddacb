"""The agent names its own LSM confinement at start (the drain's reads of host processes need none)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_constructs.agent.backends.base import lsm_confinement


def _proc(tmp_path: Path, **attrs: str) -> Path:
    for name, text in attrs.items():
        path = tmp_path / "self" / "attr" / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize(("attrs", "expected"), [
    # containerd's / CRI-O's default profile (moby's template: ptrace read only to the same peer)
    ({"apparmor__current": "cri-containerd.apparmor.d (enforce)\n"}, "cri-containerd.apparmor.d (enforce)"),
    ({"apparmor__current": "unconfined\n"}, None),  # appArmorProfile: Unconfined, or privileged
    ({"current": "docker-default (enforce)\n"}, "docker-default (enforce)"),  # kernels before 5.8
    ({"current": "system_u:system_r:container_t:s0:c12,c34\x00"}, "system_u:system_r:container_t:s0:c12,c34"),
    ({"current": "system_u:system_r:spc_t:s0\x00"}, None),  # SELinux: a privileged container
    ({"apparmor__current": "", "current": "unconfined"}, None),
    ({}, None),  # no LSM attributes: nothing to name
])
def test_lsm_confinement(tmp_path: Path, attrs: dict[str, str], expected: str | None) -> None:
    assert lsm_confinement(_proc(tmp_path, **attrs)) == expected
