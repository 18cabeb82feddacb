"""The runtime bundle the DaemonSet carries: the agent zipapp and its rendered configuration.

Pure Python. The zipapp comes from :func:`dra_constructs.agent.zipapp.build_zipapp`
(deterministic bytes of exactly this package version's runtime); the configuration is the
validated :class:`AgentConfig` as YAML. Both go into one immutable ConfigMap whose name carries
their hash, and the hashes go onto the pod template, so a change to either rolls the DaemonSet.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import yaml

from dra_constructs.agent.config import AgentConfig
from dra_constructs.constructs.sanitizer._agent_spec import CONFIG_FILE, ZIPAPP_FILE
from dra_constructs.errors import DraConstructsError

__all__ = ["CONFIG_MAP_MAX_BYTES", "RuntimeBundle", "build_bundle", "render_config"]

#: ConfigMap payload limit the API server enforces (data + binaryData keys and values, 1 MiB).
CONFIG_MAP_MAX_BYTES = 1024 * 1024


def render_config(config: AgentConfig) -> str:
    """The agent configuration as deterministic YAML (sorted keys; no simulated section on nvml)."""
    exclude = {"simulated", "amd"} if config.backend == "nvml" else {"simulated"} if config.backend == "amd" else set()
    data: dict[str, Any] = config.model_dump(mode="json", exclude=exclude)
    return yaml.safe_dump(data, sort_keys=True, default_flow_style=False)


@dataclass(frozen=True)
class RuntimeBundle:
    """The agent zipapp and configuration that one ConfigMap carries."""

    zipapp: bytes
    config_yaml: str

    @cached_property
    def runtime_sha256(self) -> str:
        """SHA-256 of the zipapp bytes."""
        return hashlib.sha256(self.zipapp).hexdigest()

    @cached_property
    def config_sha256(self) -> str:
        """SHA-256 of the rendered configuration."""
        return hashlib.sha256(self.config_yaml.encode()).hexdigest()

    @cached_property
    def sha256(self) -> str:
        """SHA-256 over both (names the ConfigMap)."""
        return hashlib.sha256(f"{self.runtime_sha256}\n{self.config_sha256}".encode()).hexdigest()

    @property
    def size(self) -> int:
        """Bytes the API server counts against the ConfigMap limit."""
        return len(ZIPAPP_FILE) + len(self.zipapp) + len(CONFIG_FILE) + len(self.config_yaml.encode())


def build_bundle(config: AgentConfig, where: str, zipapp: bytes | None = None) -> RuntimeBundle:
    """Build the bundle (``zipapp`` defaults to this package's runtime) and check its size."""
    if zipapp is None:
        from dra_constructs.agent.zipapp import build_zipapp

        zipapp = build_zipapp()
    bundle = RuntimeBundle(zipapp=zipapp, config_yaml=render_config(config))
    if bundle.size > CONFIG_MAP_MAX_BYTES:
        raise DraConstructsError(
            where, "runtime", f"{bundle.size} bytes",
            f"the agent zipapp and config exceed the ConfigMap limit of {CONFIG_MAP_MAX_BYTES} bytes",
            "report it: the runtime zipapp must stay small (it carries only dra_constructs code)",
        )
    return bundle
