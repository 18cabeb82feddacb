"""Files in an audit's input that are not Kubernetes manifests yet: reported as skipped, not as errors.

A directory of a real project holds Helm / Go templates (``{{ ... }}``), kustomize files
(``kustomization.yaml``, patches) and configuration YAML (Helm values, tool configs) next to its
manifests. None of them is something the API server would receive, so they are reported as
*skipped input* with what to run first, and every other file is still audited. Malformed
Kubernetes manifests stay input errors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from dra_constructs._safe_load import yaml_documents
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails.manifest import Manifest

__all__ = ["SkippedInput", "load_or_skip", "unauditable"]

_KUSTOMIZE_NAMES = frozenset({"kustomization.yaml", "kustomization.yml", "kustomization"})
_KUSTOMIZE_KINDS = frozenset({"Kustomization", "Component"})
#: Top-level keys only a kustomization has (a document with them and no kind is one).
_KUSTOMIZE_KEYS = frozenset({"resources", "bases", "patches", "patchesStrategicMerge", "patchesJson6902",
                             "components", "namePrefix", "nameSuffix", "commonLabels", "configMapGenerator",
                             "secretGenerator", "images", "replacements", "generators", "transformers"})
_KUSTOMIZE_HINT = "run kustomize build (kubectl kustomize DIR) and audit its output: kustomize build DIR | " \
                  "dra-constructs audit -"
_HELM_HINT = "render it first: helm template RELEASE CHART | dra-constructs audit - (or audit the rendered " \
             "directory of helm template --output-dir)"


@dataclass(frozen=True)
class SkippedInput:
    """A file the audit did not check, why, and how to make it auditable."""

    file: str
    reason: str
    hint: str
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "reason": self.reason, "hint": self.hint}

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: skipped: {self.reason}; {self.hint}"


def _documents(text: str, file: str) -> list[Any] | None:
    """The documents, read within the same limits as any input (``None`` if that fails)."""
    try:
        return [d.value for d in yaml_documents(text, file) if d.value is not None]
    except DraConstructsError:
        return None


def _is_json_patch(doc: Any) -> bool:
    return isinstance(doc, list) and bool(doc) and all(isinstance(op, dict) and "op" in op and "path" in op
                                                       for op in doc)


def _template_line(text: str) -> int | None:
    for number, line in enumerate(text.splitlines(), 1):
        if "{{" in line:
            return number
    return None


def unauditable(file: str, text: str, manifests: list[Manifest] | None) -> SkippedInput | None:
    """Why ``file`` is not a Kubernetes manifest (``manifests``: what loaded, ``None`` if loading failed)."""
    name = PurePath(file).name.lower()
    if name in _KUSTOMIZE_NAMES or (manifests and any(
            m.kind in _KUSTOMIZE_KINDS and m.group == "kustomize.config.k8s.io" for m in manifests)):
        return SkippedInput(file, "a kustomization, not a manifest", _KUSTOMIZE_HINT)
    if manifests is not None:
        return None
    line = _template_line(text)
    if line is not None:
        return SkippedInput(file, "a Helm / Go template ({{ ... }}), not a manifest", _HELM_HINT, line)
    docs = _documents(text, file)
    if not docs:
        return None
    if all(_is_json_patch(d) for d in docs):
        return SkippedInput(file, "a JSON patch (kustomize patches:), not a manifest", _KUSTOMIZE_HINT)
    if all(isinstance(d, dict) and "apiVersion" not in d and "kind" not in d for d in docs):
        if any(_KUSTOMIZE_KEYS & set(d) for d in docs):
            return SkippedInput(file, "a kustomization without apiVersion/kind, not a manifest", _KUSTOMIZE_HINT)
        return SkippedInput(file, "YAML without apiVersion and kind (Helm values or a tool's configuration), "
                                  "not a Kubernetes manifest",
                            "pass only manifests; for Helm values render the chart: helm template RELEASE CHART "
                            "-f FILE | dra-constructs audit -")
    return None


def load_or_skip(load: Callable[[], list[Manifest]], file: str, text: str,
                 skipped: list[SkippedInput] | None,
                 errors: list[DraConstructsError] | None) -> list[Manifest]:
    """``load()``, unless the file is not a manifest (appended to ``skipped``) or is malformed.

    With ``skipped`` / ``errors`` set to ``None`` the old contract holds: templates and broken
    files raise :class:`DraConstructsError`. With lists, the audit goes on with the other files.
    """
    try:
        manifests = load()
    except DraConstructsError as error:
        skip = unauditable(file, text, None) if skipped is not None else None
        if skip is not None and skipped is not None:
            skipped.append(skip)
            return []
        if errors is None:
            raise
        errors.append(error)
        return []
    skip = unauditable(file, text, manifests) if skipped is not None else None
    if skip is not None and skipped is not None:
        skipped.append(skip)
        return []
    return manifests
