"""The agent names its own LSM confinement at start (the drain's reads of host processes need none)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_constructs.agent.backends.base import lsm_confinement
from dra_constructs.agent.runtime import confinement_warning

from .test_standin_backends import MakeNode, runtime, standin  # noqa: F401 - fixture


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


def test_the_warning_in_container_t_names_the_se_linux_type_to_set() -> None:
    warning = confinement_warning("system_u:system_r:container_t:s0:c12,c34")
    assert "SELinux domain container_t" in warning
    assert "set securityContext.seLinuxOptions.type: spc_t on the agent container" in warning
    assert 'se_linux_type="spc_t"' in warning and "appArmorProfile" not in warning


def test_the_warning_under_an_apparmor_profile_names_unconfined() -> None:
    warning = confinement_warning("cri-containerd.apparmor.d (enforce)")
    assert "AppArmor profile cri-containerd.apparmor.d (enforce)" in warning
    assert "set securityContext.appArmorProfile: {type: Unconfined} on the agent container" in warning
    assert "seLinuxOptions" not in warning


@pytest.mark.parametrize(("label", "setting"), [
    ("system_u:system_r:container_t:s0:c12,c34", "set securityContext.seLinuxOptions.type: spc_t"),
    ("cri-containerd.apparmor.d (enforce)", "set securityContext.appArmorProfile: {type: Unconfined}"),
])
def test_the_agent_warns_at_start_with_the_setting(
        standin: MakeNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
        caplog: pytest.LogCaptureFixture, label: str, setting: str) -> None:
    """The real NVML start-up (stand-in driver, ``device_handles`` on) logs the warning once, naming what to set."""
    from dra_constructs.agent import runtime as runtime_module

    from .standin import GPU

    standin([GPU("GPU-a", minor=0)])
    monkeypatch.setattr(runtime_module, "lsm_confinement", lambda: label)
    with caplog.at_level("WARNING", logger="dra_sanitizer"):
        runtime(tmp_path)
    warnings = [r.getMessage() for r in caplog.records if setting in r.getMessage()]
    assert len(warnings) == 1 and label in warnings[0], [r.getMessage() for r in caplog.records]
