"""Shared helpers: synthesize a SanitizerDaemonSet for a target, pick objects, extract the bundle."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import cdk8s

from dra_constructs import set_kubernetes_version
from dra_constructs.constructs.sanitizer.construct import SanitizerDaemonSet

IMAGE = "registry.example.com/platform/dra-sanitizer-base:0.1.0"
DIGEST = "sha256:" + "0123456789abcdef" * 4
VERSIONS = ("1.32", "1.33", "1.34")


def build(version: str = "1.34", *, chart_namespace: str | None = None,
          **kwargs: Any) -> tuple[SanitizerDaemonSet, list[dict[str, Any]]]:
    """A fresh app targeting ``version`` with one sanitizer; the construct and its manifests."""
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, version)
    chart = cdk8s.Chart(app, "gpu-sanitizer", namespace=chart_namespace)
    kwargs.setdefault("image", IMAGE)
    kwargs.setdefault("image_digest", DIGEST)
    sanitizer = SanitizerDaemonSet(chart, "sanitizer", **kwargs)
    return sanitizer, [dict(d) for d in cdk8s.Testing.synth(chart)]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The single manifest of ``kind``."""
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The DaemonSet's pod template spec."""
    spec: dict[str, Any] = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    return spec


def agent_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The agent container."""
    container: dict[str, Any] = pod_spec(docs)["containers"][0]
    return container


def extract_bundle(docs: list[dict[str, Any]], folder: Path) -> tuple[Path, Path]:
    """Write what the DaemonSet would run (zipapp and config, from its ConfigMap) into ``folder``.

    Follows the pod spec: the ConfigMap the ``runtime`` volume names, mounted where the command
    expects the files.
    """
    spec = pod_spec(docs)
    volume = next(v for v in spec["volumes"] if v["name"] == "runtime")
    config_map = next(d for d in docs if d["kind"] == "ConfigMap"
                      and d["metadata"]["name"] == volume["configMap"]["name"])
    command = spec["containers"][0]["command"]
    mount = next(m["mountPath"] for m in spec["containers"][0]["volumeMounts"] if m["name"] == "runtime")
    zipapp_name = Path(next(c for c in command if c.endswith(".pyz"))).relative_to(mount).as_posix()
    config_name = Path(command[command.index("--config") + 1]).relative_to(mount).as_posix()
    zipapp = folder / zipapp_name
    zipapp.write_bytes(base64.b64decode(config_map["binaryData"][zipapp_name]))
    config = folder / config_name
    config.write_text(config_map["data"][config_name])
    return zipapp, config
