"""Snapshot-friendly synthesis, the cdk8s ``Testing.synth`` convention (public as ``dra_constructs.testing``).

``synth(chart_or_app)`` returns the manifests as plain dicts, like ``cdk8s.Testing.synth``, with the
guardrails run as ``cdk8s synth`` runs them, and with every embedded agent zipapp (a ConfigMap
``binaryData`` value that is a zip archive with a ``__main__.py``; ~157 KB of base64) replaced by
``<zipapp sha256:HEX, N bytes>``. ``zipapp="placeholder"`` also replaces that digest wherever the
manifests carry it (the pod-template annotation) and the ConfigMap's hash suffix, so a library
upgrade that only changes the agent's code leaves the snapshot as it was; ``zipapp="keep"`` changes
nothing. docs/testing.md has the pattern.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
import zipfile
from collections.abc import Callable
from typing import Any, Literal

import cdk8s
import constructs

from dra_constructs.errors import DraConstructsError

__all__ = ["ZipappMode", "is_zipapp", "synth"]

ZipappMode = Literal["digest", "placeholder", "keep"]
_MODES = ("digest", "placeholder", "keep")
_HASH_SUFFIX = re.compile(r"^(.*-)([0-9a-f]{10})$")


def is_zipapp(data: bytes) -> bool:
    """Whether ``data`` is a Python zipapp (a zip archive with a top-level ``__main__.py``)."""
    if not data.startswith(b"PK\x03\x04"):
        return False
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return "__main__.py" in archive.namelist()
    except zipfile.BadZipFile:
        return False


def synth(scope: constructs.Construct, *, zipapp: ZipappMode = "digest") -> list[dict[str, Any]]:
    """The manifests of a Chart, or of every Chart of an App in order, as plain dicts.

    Runs the App's validations (the guardrails) first, as ``cdk8s synth`` does; a failing one raises
    its ``GuardrailsError``. ``zipapp``: ``"digest"`` (default), ``"placeholder"`` or ``"keep"``.
    """
    if zipapp not in _MODES:
        raise DraConstructsError("dra_constructs.testing.synth", "zipapp", zipapp, "not a zipapp mode",
                                 f"use one of {', '.join(_MODES)}")
    charts = _charts(scope)
    docs: list[dict[str, Any]] = [_plain(doc) for chart in charts for doc in cdk8s.Testing.synth(chart)]
    if zipapp == "keep":
        return docs
    replacements: dict[str, str] = {}
    for doc in docs:
        replacements.update(_replace_zipapps(doc, zipapp))
    if zipapp == "placeholder" and replacements:
        docs = [_substitute(doc, replacements) for doc in docs]
    return docs


def _charts(scope: constructs.Construct) -> list[cdk8s.Chart]:
    if isinstance(scope, cdk8s.App):
        return list(scope.charts)
    if isinstance(scope, cdk8s.Chart):
        return [scope]
    raise DraConstructsError("dra_constructs.testing.synth", "scope", type(scope).__name__,
                             "is neither a cdk8s Chart nor an App", "pass the chart or the app: synth(chart)")


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _replace_zipapps(doc: dict[str, Any], mode: str) -> dict[str, str]:
    """Replace the zipapps of a ConfigMap in place; returns the strings to substitute elsewhere."""
    binary = doc.get("binaryData") if doc.get("kind") == "ConfigMap" else None
    if not isinstance(binary, dict):
        return {}
    out: dict[str, str] = {}
    for key, value in binary.items():
        if not isinstance(value, str):
            continue
        try:
            data = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            continue
        if not is_zipapp(data):
            continue
        digest = hashlib.sha256(data).hexdigest()
        if mode == "placeholder":
            binary[key] = "<zipapp>"
            out[digest] = "<zipapp-sha256>"
            name = str(doc.get("metadata", {}).get("name", ""))
            match = _HASH_SUFFIX.match(name)
            if match:
                out[name] = match.group(1) + "<hash>"
        else:
            binary[key] = f"<zipapp sha256:{digest}, {len(data)} bytes>"
    return out


def _substitute(value: Any, replacements: dict[str, str]) -> Any:
    """``value`` with every string that equals a key of ``replacements`` replaced (keys and values alike)."""
    swap: Callable[[Any], Any] = lambda v: replacements.get(v, v) if isinstance(v, str) else v  # noqa: E731
    if isinstance(value, dict):
        return {swap(k): _substitute(v, replacements) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, replacements) for v in value]
    return swap(value)
