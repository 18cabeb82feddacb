"""``AuditContext.env_source`` (built on the first ``envFrom`` lookup) finds what indexing each object did."""

from __future__ import annotations

from typing import Any

from dra_constructs.guardrails import audit


def _config_map(name: str, namespace: str | None, value: str, api_version: str = "v1") -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": api_version, "kind": "ConfigMap", "metadata": metadata,
            "data": {"CUDA_VISIBLE_DEVICES": value}}


def _pod(source: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"},
            "spec": {"containers": [{"name": "c", "image": "i", "envFrom": [{"configMapRef": {"name": source}}]}]}}


def _imports(objects: list[dict[str, Any]]) -> list[str]:
    return [f.message for f in audit(objects).findings if f.rule == "DRA002"]


def test_the_last_of_equal_config_maps_wins_and_other_api_versions_are_not_sources() -> None:
    hidden = _config_map("env", "n", "none")
    shown = _config_map("env", "n", "0")
    assert any("CUDA_VISIBLE_DEVICES='0'" in m for m in _imports([hidden, shown, _pod("env")]))
    assert _imports([shown, hidden, _pod("env")]) == []
    assert _imports([_config_map("env", "n", "0", api_version="v2"), _pod("env")]) == []


def test_a_config_map_without_namespace_is_found_from_any_namespace() -> None:
    assert any("CUDA_VISIBLE_DEVICES='1'" in m for m in _imports([_config_map("loose", None, "1"), _pod("loose")]))
    assert _imports([_config_map("other", "elsewhere", "1"), _pod("other")]) == []
