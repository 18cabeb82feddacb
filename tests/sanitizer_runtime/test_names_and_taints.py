"""Device names, DeviceTaintRule shapes per target, scrub-on-free detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_constructs.agent.backends.nvml import host_pid_namespace, scrub_on_free_disabled
from dra_constructs.agent.devices import gpu_device_name, mig_device_name, mig_memory_gb, mig_profile_name
from dra_constructs.agent.taints import taint_rule, taint_rule_name
from dra_constructs.catalog import mig_profile
from dra_constructs.errors import DraConstructsError
from dra_constructs.target import Target


def test_device_names_match_the_nvidia_driver_and_the_catalog() -> None:
    assert gpu_device_name(3) == "gpu-3"
    assert mig_device_name(0, "1g.10gb", 19, 6) == "gpu-0-mig-1g10gb-19-6"
    # The driver's toRFC1123Compliant: dots dropped, then '+' (or any other character) becomes '-'.
    assert mig_device_name(1, "1g.10gb+me", 20, 0) == "gpu-1-mig-1g10gb-me-20-0"
    assert mig_device_name(0, "1g.20gb+gfx", 47, 3) == "gpu-0-mig-1g20gb-gfx-47-3"
    assert mig_device_name(0, "1g.24gb-me", 21, 1) == "gpu-0-mig-1g24gb-me-21-1"
    assert mig_device_name(0, "1g.10gb+me.all", 50, 0) == "gpu-0-mig-1g10gb-meall-50-0"
    assert mig_profile("A100_80GB", "1g.10gb+me").device_name_part == "1g10gb-me"
    profile = mig_profile("H100_80GB", "3g.40gb")
    assert mig_device_name(2, profile.name, profile.profile_id, 4) == (
        f"gpu-2-mig-{profile.device_name_part}-{profile.profile_id}-4")


@pytest.mark.parametrize(("minor", "api"), [(33, "resource.k8s.io/v1alpha3"), (35, "resource.k8s.io/v1alpha3"),
                                            (36, "resource.k8s.io/v1beta2"), (37, "resource.k8s.io/v1")])
def test_taint_rule_per_target(minor: int, api: str) -> None:
    target = Target.parse(f"1.{minor}")
    rule = taint_rule(target, "node-a", "gpu-0-mig-1g10gb-19-0", key="k.io/b", effect="NoSchedule",
                      value="quarantined", reason="drain timeout")
    assert rule["apiVersion"] == api and rule["kind"] == "DeviceTaintRule"
    assert rule["spec"]["deviceSelector"] == {"driver": "gpu.nvidia.com", "pool": "node-a",
                                              "device": "gpu-0-mig-1g10gb-19-0"}
    assert rule["spec"]["taint"] == {"key": "k.io/b", "value": "quarantined", "effect": "NoSchedule"}
    assert "selectors" not in rule["spec"]["deviceSelector"]  # tombstoned in 1.35; not needed before
    assert rule["metadata"]["annotations"]["sanitizer.dra-constructs.io/reason"] == "drain timeout"


def test_taint_rule_schema_valid() -> None:
    import kubernetes_validate  # a dev dependency: a missing one must fail, not skip

    for minor in (33, 36, 37):
        target = Target.parse(f"1.{minor}")
        rule = taint_rule(target, "node-a", "gpu-0", key="sanitizer.dra-constructs.io/barrier",
                          effect="NoExecute", value="in-use")
        kubernetes_validate.validate(rule, target.schema_version, strict=True)


def test_no_taint_rule_on_132_and_bad_effects_rejected() -> None:
    with pytest.raises(DraConstructsError, match=r"1\.32 has no DeviceTaintRule"):
        taint_rule(Target.parse("1.32"), "n", "gpu-0", key="k", effect="NoSchedule", value="v")
    with pytest.raises(DraConstructsError, match="taint_effect"):
        taint_rule(Target.parse("1.35"), "n", "gpu-0", key="k", effect="None", value="v")


def test_profile_names_follow_go_nvlib() -> None:
    """go-nvlib MigProfileInfo.String: slices from the GI profile index, GB in eighths of the GPU."""
    a100 = 81920 << 20
    assert mig_profile_name(0x0, 9856, a100) == "1g.10gb"
    assert mig_profile_name(0x7, 9856, a100) == "1g.10gb+me"      # 1_SLICE_REV1
    assert mig_profile_name(0x9, 19968, a100) == "1g.20gb"        # 1_SLICE_REV2
    assert mig_profile_name(0x2, 40192, a100) == "3g.40gb"
    assert mig_profile_name(0xA, 19968, a100) == "1g.20gb+gfx"
    assert mig_profile_name(0xD, 19968, a100) == "1g.20gb-me"     # 1_SLICE_NO_ME
    assert mig_profile_name(0xF, 9856, a100) == "1g.10gb+me.all"
    assert mig_profile_name(0x4, 81920, a100) == "7g.80gb"
    h100 = 81559 << 20  # NVML's total on an H100 80GB is below 80 GiB: rounded up to 80
    assert mig_profile_name(0x0, 9984, h100) == "1g.10gb"
    assert mig_profile_name(0x42, 1, h100) is None
    # Go's math.Round rounds halves away from zero (Python's round would give 4 here).
    assert mig_memory_gb(36 << 30, 4608) == 5


def test_long_names_are_hashed_to_valid_names() -> None:
    name = taint_rule_name("n" * 250, "gpu-0")
    assert len(name) <= 253 and name.startswith("dra-sanitizer-gpu-0-")
    assert taint_rule_name("n" * 250, "gpu-0") == name != taint_rule_name("m" * 250, "gpu-0")


@pytest.mark.parametrize(("text", "expected"), [
    ('RegistryDwords: ""\nRegistryDwordsPerDevice: ""\n', False),
    ('RegistryDwords: "RmFoo=1;RMDisableScrubOnFree=1"\n', True),
    ('RegistryDwords: "RMDisableScrubOnFree=0x0"\n', False),
    ('RegistryDwords: ""\nRegistryDwordsPerDevice: "pci=0000:3b:00.0;RmDisableScrubOnFree=1"\n', True),
    ("EnableMSI: 1\n", False),
])
def test_scrub_on_free_detection(text: str, expected: bool) -> None:
    assert scrub_on_free_disabled(text) is expected


def test_host_pid_namespace_reads_kthreadd(tmp_path: Path) -> None:
    assert host_pid_namespace(tmp_path) is False
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "comm").write_text("kthreadd\n")
    assert host_pid_namespace(tmp_path) is True
