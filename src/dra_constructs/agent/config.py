"""Typed configuration of the sanitizer agent (``AgentConfig``), loadable from JSON or YAML.

This model is a stable contract: the DaemonSet construct renders it into a ConfigMap and the
agent validates it at start. Every field has a default and a description; unknown keys are
rejected (``extra="forbid"``) so a typo never silently falls back to a default.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dra_constructs._io import ReadBudget, read_input
from dra_constructs._safe_load import json_document, yaml_documents
from dra_constructs.agent.devhandles import DEFAULT_EXEMPT, ExemptRule
from dra_constructs.catalog.amd import AMD_DRIVER
from dra_constructs.catalog.driver import DRIVER
from dra_constructs.errors import DraConstructsError

__all__ = [
    "AMD_FILL_TIMEOUT_S",
    "AMD_RESET",
    "DEFAULT_TAINT_KEY",
    "AgentConfig",
    "AmdBackendSettings",
    "KubeSettings",
    "PartitionReset",
    "QuarantinePolicy",
    "SimulatedBackendSettings",
    "TenantBoundary",
    "load_config",
]

#: ``cuMemAlloc`` granularity on current GPUs (2 MiB pages); the fill allocates in such chunks.
CUDA_ALLOCATION_GRANULE = 2 << 20

#: Key of the DeviceTaintRule taint the agent places (guard and quarantine).
DEFAULT_TAINT_KEY = "sanitizer.dra-constructs.io/barrier"


class QuarantinePolicy(StrEnum):
    """What a device that failed its barrier gets, besides being kept out of service."""

    #: DeviceTaintRule (where the target has one) + NVML compute mode PROHIBITED + Event.
    TAINT_AND_PROHIBIT = "taint-and-prohibit"
    #: DeviceTaintRule + Event only; compute mode is left alone (for drivers where it fails).
    TAINT_ONLY = "taint-only"


class PartitionReset(StrEnum):
    """Cold partition reset at release (guideline rule 6); see docs/sanitizer-runtime.md."""

    OFF = "off"
    #: Destroy the MIG compute instances and GPU instance, recreate them at the same placement
    #: (new UUID), then fill and verify the new instance. Whole GPUs are reset as with ``gpu``.
    MIG_INSTANCE = "mig-instance"
    #: Reset the whole GPU (``nvidia-smi --gpu-reset``: NVML has no public reset call). Simulated
    #: backend only: the reset needs no NVML client on the GPU, and the agent's own NVML session
    #: (as the DRA kubelet plugin's, persistenced's, DCGM's) is one, so on a real node it never succeeds.
    GPU = "gpu"


class TenantBoundary(BaseModel):
    """What makes two claims the same security boundary: their namespace, or a label's value."""

    model_config = ConfigDict(extra="forbid")

    by: Literal["namespace", "label"] = Field(default="namespace", description="namespace, or a claim label.")
    label_key: str | None = Field(default=None, description="The label for `by: label` (e.g. tenant).")

    @model_validator(mode="after")
    def _label(self) -> TenantBoundary:
        if self.by == "label" and not self.label_key:
            raise ValueError("tenant_boundary.by 'label' needs `label_key`")
        return self

    def of(self, metadata: dict[str, Any]) -> str | None:
        """The boundary of an object with this ``metadata`` (None: unknown)."""
        if self.by == "namespace":
            value = metadata.get("namespace")
        else:
            value = (metadata.get("labels") or {}).get(self.label_key or "")
        return str(value) if value else None


#: ``fill_timeout_s`` default of backend ``amd`` (host read-back verify; docs/amd.md, measurements).
AMD_FILL_TIMEOUT_S = 900.0
#: Why the AMD backend performs no cold reset (the reset policy, docs/amd.md).
AMD_RESET = ("an AMD GPU reset is not contained to one device: on an XGMI hive (MI300X/MI325X/MI350 nodes) the "
             "driver resets every GPU of the hive, with every other tenant's work on it, and a partition cannot be "
             "reset on its own (re-partitioning needs an amdgpu reload)")


class AmdBackendSettings(BaseModel):
    """Backend ``amd`` (AMD SMI + HIP, docs/amd.md): where amdgpu's process-isolation files are."""

    model_config = ConfigDict(extra="forbid")

    sysfs_root: str = Field(
        default="/sys", description="sysfs as the agent sees it (enforce_isolation, run_cleaner_shader).")
    enforce_isolation: bool = Field(
        default=True, description="Set enforce_isolation to 1 on every partition the barrier cleans (the kernel "
                                  "then runs the cleaner shader between processes too); false: only check it.")


class SimulatedBackendSettings(BaseModel):
    """Shape of the simulated node (backend ``simulated``): used by tests, demos and ``simulate``."""

    model_config = ConfigDict(extra="forbid")

    gpus: int = Field(default=8, ge=1, le=64, description="Simulated whole GPUs.")
    mig_slices_per_gpu: int = Field(
        default=7, ge=0, le=7, description="1g MIG slices per GPU (0: whole GPUs are the devices)."
    )
    memory_bytes: int = Field(
        default=4096, ge=256, le=1 << 26, description="Memory per device; really held as bytes."
    )
    allocation_granularity: int = Field(
        default=64, ge=8, description="Allocation unit (2 MiB on real GPUs); divides memory_bytes."
    )
    context_overhead_bytes: int = Field(
        default=256, ge=0, description="Memory the sanitizer's own context takes from the device."
    )
    scrub_on_free: bool = Field(default=False, description="Simulate the driver's scrub-on-free.")
    dynamic_mig: bool = Field(
        default=False, description="DynamicMIG: every placement is a device; instances exist only while prepared.")

    @model_validator(mode="after")
    def _granular(self) -> SimulatedBackendSettings:
        if self.memory_bytes % self.allocation_granularity or (
            self.context_overhead_bytes % self.allocation_granularity
        ):
            raise ValueError("memory_bytes and context_overhead_bytes must be multiples of allocation_granularity")
        if self.context_overhead_bytes >= self.memory_bytes:
            raise ValueError("context_overhead_bytes must be smaller than memory_bytes")
        return self


class KubeSettings(BaseModel):
    """How the agent reaches the Kubernetes API (client: the ``kubernetes`` package)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["in-cluster", "kubeconfig", "url", "disabled"] = Field(
        default="in-cluster",
        description="in-cluster service account, a kubeconfig file, a plain URL (tests), or no API.",
    )
    url: str | None = Field(default=None, description="API server URL for mode `url`.")
    kubeconfig: str | None = Field(default=None, description="kubeconfig path for mode `kubeconfig`.")
    request_timeout_s: float = Field(default=10.0, gt=0, le=300, description="Per-request timeout.")
    retries: int = Field(default=5, ge=0, le=20, description="Retries of a failed request (5xx, timeout).")
    retry_backoff_s: float = Field(default=0.5, ge=0, le=30, description="First backoff; doubles per retry.")
    watch_timeout_s: int = Field(default=300, ge=1, le=3600, description="Server-side watch timeout.")
    event_namespace: str = Field(default="default", description="Namespace of the Events the agent posts.")
    kubernetes_version: str | None = Field(
        default=None, description='Target version ("1.33"); None: read from the API server\'s /version.'
    )

    @model_validator(mode="after")
    def _mode_fields(self) -> KubeSettings:
        if self.mode == "url" and not self.url:
            raise ValueError("mode 'url' needs `url`")
        if self.mode == "kubeconfig" and not self.kubeconfig:
            raise ValueError("mode 'kubeconfig' needs `kubeconfig`")
        return self


class AgentConfig(BaseModel):
    """Everything the sanitizer agent needs; the defaults are the production defaults."""

    model_config = ConfigDict(extra="forbid")

    node_name: str = Field(
        default="", description="This node's name (= the DRA pool); usually from the downward API."
    )
    backend: Literal["nvml", "amd", "simulated"] = Field(
        default="nvml", description="`nvml` (NVML + CUDA), `amd` (AMD SMI + HIP + the cleaner shader) or `simulated`."
    )
    grace_period_s: float = Field(
        default=30.0, ge=0, le=3600, description="SIGTERM to SIGKILL, like terminationGracePeriodSeconds."
    )
    drain_timeout_s: float = Field(
        default=60.0, gt=0, le=7200, description="Whole drain limit (>= grace); past it: quarantine."
    )
    poll_interval_s: float = Field(default=0.5, gt=0, le=60, description="NVML process-list poll interval.")
    coverage_threshold: float = Field(
        default=0.99, gt=0, le=1,
        description="Least fraction of free memory after our context zeroed and verified (coverage_of_free)."
    )
    quarantine_policy: QuarantinePolicy = Field(
        default=QuarantinePolicy.TAINT_AND_PROHIBIT, description="What a failed device gets."
    )
    taint_key: str = Field(default=DEFAULT_TAINT_KEY, description="Key of the device taint.")
    taint_effect: Literal["NoSchedule", "NoExecute"] = Field(
        default="NoSchedule", description="Effect of the guard/quarantine taint."
    )
    selftest_at_start: bool = Field(
        default=True, description="Run the residue canary (agent/canary.py) at start, once per GPU model and "
                                  "driver version, on a clean unclaimed device.")
    require_scrub_on_free: bool = Field(
        default=False,
        description="Quarantine every device while the driver's scrub-on-free is disabled (else: report).",
    )
    health_gates: bool = Field(
        default=True, description="Check ECC, row remapping, the recovery action and XIDs before a release "
                                  "(agent/health.py); a failing gate quarantines.")
    require_ecc: bool = Field(
        default=True, description="ECC disabled on a GPU that has it fails the ecc-mode gate (quarantine); "
                                  "off: recorded as unavailable.")
    state_dir: str = Field(default="/var/lib/dra-sanitizer", description="Crash-safe per-device state.")
    proc_root: str = Field(
        default="/proc",
        description="Where /proc/<pid>/cgroup names each GPU process's pod (hostPID): only processes of the "
                    "released claim's pods are signalled (tests point it at files of the same format).",
    )
    device_handles: bool = Field(
        default=True, description="The drain also counts processes holding the device's nodes open (/dev/nvidia<N>, "
                                  "MIG capability nodes), found in <proc_root>/*/fd (agent/devhandles.py).")
    device_handles_exempt: list[ExemptRule] = Field(
        default_factory=lambda: [r.model_copy(deep=True) for r in DEFAULT_EXEMPT],
        description="NVML-only monitors that hold every GPU's node without a context, by executable "
                    "(readlink /proc/<pid>/exe) and owner (host, or a pod in given namespaces, or host-systemd-unit: "
                    "a host daemon in its own mount namespace named by its systemd unit's cgroup, host PID "
                    "namespace and root; optionally a uid), "
                    "never by comm (a process sets its own): listed in the evidence, not counted (a context they "
                    "hold is still in NVML's lists).")
    evidence_file: str = Field(
        default="/var/log/dra-sanitizer/evidence.jsonl", description="One JSON record per barrier cycle."
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(default="INFO")
    metrics_port: int = Field(
        default=9402, ge=0, le=65535, description="/metrics, /healthz, /readyz (0: pick a free port)."
    )
    metrics_address: str = Field(default="0.0.0.0", description="Listen address of the metrics server.")
    max_parallel: int = Field(default=64, ge=1, le=512, description="Barriers run at once (one per device).")
    worker_memory_bytes: int = Field(
        default=192 << 20, ge=16 << 20,
        description="Host memory one CUDA fill worker needs (measured 110-160 MB); bounds live workers.",
    )
    agent_memory_bytes: int = Field(
        default=256 << 20, ge=0, description="Host memory the agent itself needs besides its workers.",
    )
    memory_limit_bytes: int | None = Field(
        default=None, gt=0,
        description="Container memory limit for the worker bound; None: read the cgroup (memory.max).",
    )
    unaccounted_memory_bytes: int | None = Field(
        default=None, ge=0, le=64 << 20,
        description="Most device memory (beyond NVML's reserved) in use by no listed process before our context. "
                    "None: half an allocation granule (1 MiB of CUDA's 2 MiB; the simulated node's granularity), "
                    "so any hidden allocation exceeds it (docs/sanitizer-runtime.md, unaccounted memory).",
    )
    fill_timeout_s: float = Field(default=120.0, gt=0, description="Limit of one CUDA fill+verify worker.")
    dynamic_mig: bool = Field(
        default=False, description="The NVIDIA DRA driver runs with DynamicMIG: every MIG placement is a device.")
    partition_reset: PartitionReset = Field(
        default=PartitionReset.OFF, description="Cold partition reset at every release (off | mig-instance | gpu).")
    mig_isolation: bool = Field(
        default=False, description="Taint GPUs held by shared-gpu tenants (value Shared) so exclusive-gpu tenants' MIG "
                                   "slices never land beside them (agent/isolation.py); on wherever a tenant is "
                                   "exclusive-gpu.")
    tenant_boundary: TenantBoundary = Field(
        default_factory=TenantBoundary, description="Security boundary of a claim (recorded; see the docs).")
    reset_timeout_s: float = Field(
        default=120.0, gt=0, le=3600, description="Limit of one partition reset; past it: quarantine.")
    simulated: SimulatedBackendSettings = Field(default_factory=SimulatedBackendSettings)
    amd: AmdBackendSettings = Field(default_factory=AmdBackendSettings)
    kube: KubeSettings = Field(default_factory=KubeSettings)

    @model_validator(mode="after")
    def _drain_covers_grace(self) -> AgentConfig:
        if self.drain_timeout_s < self.grace_period_s:
            raise ValueError("drain_timeout_s must be at least grace_period_s")
        if self.backend == "nvml" and self.partition_reset is PartitionReset.GPU:
            raise ValueError("partition_reset 'gpu' cannot work on a real node: nvidia-smi --gpu-reset needs no NVML "
                             "client on the GPU and the agent's own NVML session is one; use 'mig-instance' or 'off'")
        if self.backend == "amd" and self.selftest_at_start:
            if "selftest_at_start" in self.model_fields_set:
                raise ValueError("selftest_at_start: the residue canary (agent/canary.py) has no AMD implementation "
                                 "(the HIP worker writes no pattern); set it false with backend amd")
            self.selftest_at_start = False  # the default follows the backend: no canary on AMD
        if self.backend == "amd" and "fill_timeout_s" not in self.model_fields_set:
            # The HIP verify reads every byte back to the host (amd_hip.py): 192 GB of an MI300X in SPX at
            # the 0.7 GB/s measured on a loaded 2-core machine is ~270 s (docs/amd.md); 120 s would quarantine it.
            self.fill_timeout_s = AMD_FILL_TIMEOUT_S
        if self.backend == "amd" and self.partition_reset is not PartitionReset.OFF:
            raise ValueError(f"partition_reset {self.partition_reset.value!r} is not available on AMD: {AMD_RESET}; "
                             "use 'off'")
        return self

    @property
    def unaccounted_allowance(self) -> int:
        """``unaccounted_memory_bytes``, or half of one allocation granule of the backend."""
        if self.unaccounted_memory_bytes is not None:
            return self.unaccounted_memory_bytes
        granule = self.simulated.allocation_granularity if self.backend == "simulated" else CUDA_ALLOCATION_GRANULE
        return granule // 2

    @property
    def state_path(self) -> Path:
        """``state_dir`` as a path."""
        return Path(self.state_dir)

    @property
    def dra_driver(self) -> str:
        """The DRA driver whose claims and devices this agent guards: ``gpu.amd.com`` (backend amd), else
        ``gpu.nvidia.com`` (the allocation results it maps, the DeviceTaintRules' ``deviceSelector.driver``)."""
        return AMD_DRIVER if self.backend == "amd" else DRIVER


#: Bytes of a config file read at most (a real one is about 1 KiB); a bigger file, a FIFO or a
#: device is refused before parsing (docs/input-limits.md), as are depth, alias and duplicate-key excess.
MAX_CONFIG_BYTES = 1024 * 1024


def _read(path: Path) -> Any:
    where = str(path)
    text = read_input(path, "--config", "JSON or YAML AgentConfig file",
                      budget=ReadBudget(MAX_CONFIG_BYTES, MAX_CONFIG_BYTES))
    if path.suffix.lower() == ".json":
        return json_document(text, where, "--config")
    documents = [document.value for document in yaml_documents(text, where, "--config")]  # YAML: a JSON superset
    if len(documents) > 1:
        raise DraConstructsError(where, "--config", f"{len(documents)} documents", "more than one YAML document",
                                 "write one AgentConfig mapping (no --- separators)")
    return documents[0] if documents else None


def load_config(path: str | Path | None, **overrides: Any) -> AgentConfig:
    """Load and validate an ``AgentConfig`` (JSON or YAML file; ``None``: defaults).

    ``overrides`` (top-level fields, e.g. from the command line) win over the file.
    Raises :class:`DraConstructsError` naming the file, the field and the fix.
    """
    where = str(path) if path is not None else "config"
    data: Any = {}
    if path is not None:
        try:
            data = _read(Path(path))
        except DraConstructsError:
            raise
        except OSError as error:
            raise DraConstructsError(where, "--config", str(path), f"cannot read: {error.strerror}",
                                     "pass the path of a JSON or YAML AgentConfig file") from error
        except (ValueError, yaml.YAMLError) as error:  # JSONDecodeError is a ValueError
            raise DraConstructsError(where, "--config", str(path), f"not valid JSON/YAML: {error}",
                                     "fix the syntax of the file") from error
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise DraConstructsError(where, "<root>", type(data).__name__, "the config must be a mapping",
                                     "write the AgentConfig fields as a YAML/JSON object")
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return AgentConfig.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "<root>"
        value = first.get("input")
        raise DraConstructsError(
            where, field, value, first["msg"],
            f"see AgentConfig in dra_constructs.agent.config ({error.error_count()} error(s))",
        ) from error
