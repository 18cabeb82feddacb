"""A read-only view of one manifest dict: identity, pod spec, DRA requests (pure Python).

Rules never index raw dicts blindly: user YAML can hold ``null`` or the wrong type anywhere,
so every accessor here degrades to "empty" instead of raising.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

__all__ = [
    "CLUSTER_SCOPED_KINDS",
    "Manifest",
    "RequestView",
    "as_dict",
    "as_list",
    "field_path",
]

#: Built-in kinds without a namespace (findings show them as ``Kind//name``).
CLUSTER_SCOPED_KINDS = frozenset({
    "APIService", "CSIDriver", "CSINode", "ClusterPolicy", "ClusterRole", "ClusterRoleBinding",
    "CustomResourceDefinition", "DeviceClass", "DeviceTaintRule", "IngressClass",
    "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "MutatingWebhookConfiguration",
    "Namespace", "Node", "PersistentVolume", "PriorityClass", "ResourceClass", "ResourceSlice",
    "RuntimeClass", "StorageClass", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
    "ValidatingWebhookConfiguration", "VolumeAttachment",
})

#: Where each workload kind keeps its pod spec.
_POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a mapping, else an empty dict."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` if it is a list, else an empty list."""
    return value if isinstance(value, list) else []


def field_path(base: str, *parts: str | int) -> str:
    """Extend a field path: ``field_path("spec", "containers", 0, "env")`` -> ``spec.containers[0].env``.

    Keys that are not identifiers are quoted: ``limits['nvidia.com/gpu']``.
    """
    out = base
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENTIFIER.match(part):
            out = f"{out}.{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out


@dataclass(frozen=True)
class RequestView:
    """One device request (or ``firstAvailable`` subrequest) of a claim, in any API version.

    v1beta1 requests are flat; v1beta2/v1 put the fields under ``exactly`` or list
    subrequests under ``firstAvailable``. ``path`` points at the dict holding the fields.
    """

    path: str
    name: str
    fields: dict[str, Any]
    subrequest: bool = False

    @property
    def device_class_name(self) -> str:
        value = self.fields.get("deviceClassName")
        return value if isinstance(value, str) else ""

    @property
    def admin_access(self) -> bool:
        return self.fields.get("adminAccess") is True

    def selectors(self) -> Iterator[tuple[str, Any]]:
        """``(path, expression)`` for every ``selectors[i].cel.expression`` (expression may be malformed)."""
        for i, selector in enumerate(as_list(self.fields.get("selectors"))):
            cel = as_dict(as_dict(selector).get("cel"))
            yield field_path(self.path, "selectors", i, "cel", "expression"), cel.get("expression")


@dataclass
class Manifest:
    """One Kubernetes object as read from a file, stdin or a synthesized chart."""

    obj: dict[str, Any]
    file: str | None = None
    line: int | None = None
    position: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    # --- identity ------------------------------------------------------------------------

    @cached_property
    def api_version(self) -> str:
        value = self.obj.get("apiVersion")
        return value if isinstance(value, str) else ""

    @cached_property
    def kind(self) -> str:
        value = self.obj.get("kind")
        return value if isinstance(value, str) else ""

    @cached_property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @cached_property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @cached_property
    def metadata(self) -> dict[str, Any]:
        return as_dict(self.obj.get("metadata"))

    @cached_property
    def name(self) -> str:
        name = self.metadata.get("name")
        if isinstance(name, str) and name:
            return name
        generate = self.metadata.get("generateName")
        return f"{generate}*" if isinstance(generate, str) and generate else "<unnamed>"

    @cached_property
    def namespace(self) -> str:
        """The explicit ``metadata.namespace``, or ``""`` when the manifest leaves it to the apply."""
        value = self.metadata.get("namespace")
        return value if isinstance(value, str) else ""

    @property
    def cluster_scoped(self) -> bool:
        return self.kind in CLUSTER_SCOPED_KINDS

    @cached_property
    def display_namespace(self) -> str:
        """Namespace as reported: ``""`` for cluster-scoped kinds, ``default`` when unset."""
        if self.cluster_scoped:
            return ""
        return self.namespace or "default"

    @cached_property
    def object_id(self) -> str:
        return f"{self.kind}/{self.display_namespace}/{self.name}"

    def labels(self) -> dict[str, Any]:
        return as_dict(self.metadata.get("labels"))

    def annotations(self) -> dict[str, Any]:
        return as_dict(self.metadata.get("annotations"))

    # --- pods ----------------------------------------------------------------------------

    @cached_property
    def _pod(self) -> tuple[dict[str, Any], str, dict[str, Any]] | None:
        keys = _POD_SPEC_PATHS.get(self.kind)
        if keys is None:
            # Unknown kinds (Argo Rollouts, custom workloads) with the usual pod-template shape.
            template = as_dict(as_dict(self.obj.get("spec")).get("template"))
            if not isinstance(as_dict(template.get("spec")).get("containers"), list):
                return None
            keys = ("spec", "template", "spec")
        node: Any = self.obj
        for key in keys:
            node = as_dict(node).get(key)
        if not isinstance(node, dict):
            return None
        if self.kind == "Pod":
            metadata = self.metadata
        else:
            parent: Any = self.obj
            for key in keys[:-1]:
                parent = as_dict(parent).get(key)
            metadata = as_dict(as_dict(parent).get("metadata"))
        return node, ".".join(keys), metadata

    @property
    def pod_spec(self) -> dict[str, Any] | None:
        """The pod spec of a Pod or of a workload's pod template, else ``None``."""
        return self._pod[0] if self._pod else None

    @property
    def pod_spec_path(self) -> str:
        return self._pod[1] if self._pod else ""

    @property
    def pod_metadata(self) -> dict[str, Any]:
        """The pod's own metadata (the template's for workloads)."""
        return self._pod[2] if self._pod else {}

    def containers(self, include_init: bool = True) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(path, container)`` for containers, init containers and ephemeral containers."""
        spec = self.pod_spec
        if spec is None:
            return
        groups = ("containers", "initContainers", "ephemeralContainers") if include_init else ("containers",)
        for group in groups:
            for i, container in enumerate(as_list(spec.get(group))):
                if isinstance(container, dict):
                    yield field_path(self.pod_spec_path, group, i), container

    def pod_claims(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(path, entry)`` for every ``spec.resourceClaims[i]``."""
        spec = self.pod_spec
        if spec is None:
            return
        for i, entry in enumerate(as_list(spec.get("resourceClaims"))):
            if isinstance(entry, dict):
                yield field_path(self.pod_spec_path, "resourceClaims", i), entry

    # --- DRA claims ----------------------------------------------------------------------

    @property
    def is_resource_api(self) -> bool:
        return self.group == "resource.k8s.io"

    @cached_property
    def claim_spec(self) -> tuple[dict[str, Any], str] | None:
        """``(ResourceClaimSpec, path)`` of a ResourceClaim or ResourceClaimTemplate."""
        if not self.is_resource_api:
            return None
        if self.kind == "ResourceClaim":
            spec = self.obj.get("spec")
            return (spec, "spec") if isinstance(spec, dict) else None
        if self.kind == "ResourceClaimTemplate":
            spec = as_dict(self.obj.get("spec")).get("spec")
            return (spec, "spec.spec") if isinstance(spec, dict) else None
        return None

    def requests(self) -> Iterator[RequestView]:
        """Every device request of a claim (subrequests of ``firstAvailable`` included)."""
        if self.claim_spec is None:
            return
        spec, base = self.claim_spec
        for i, raw in enumerate(as_list(as_dict(spec.get("devices")).get("requests"))):
            request = as_dict(raw)
            path = field_path(base, "devices", "requests", i)
            name = request.get("name") if isinstance(request.get("name"), str) else ""
            exactly = request.get("exactly")
            first = request.get("firstAvailable")
            if isinstance(exactly, dict):
                yield RequestView(field_path(path, "exactly"), str(name), exactly)
            if isinstance(first, list):
                for j, sub in enumerate(first):
                    sub = as_dict(sub)
                    sub_name = sub.get("name") if isinstance(sub.get("name"), str) else ""
                    yield RequestView(field_path(path, "firstAvailable", j), f"{name}/{sub_name}", sub, True)
            if not isinstance(exactly, dict) and not isinstance(first, list):
                yield RequestView(path, str(name), request)

    def request_names(self) -> set[str]:
        """Names a container's ``resources.claims[].request`` may use (``req`` and ``req/sub``)."""
        names: set[str] = set()
        for request in self.requests():
            names.add(request.name)
            if request.subrequest:
                names.add(request.name.partition("/")[0])
        return names

    def device_configs(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(path, opaque)`` of every opaque device config of a claim or DeviceClass."""
        if self.claim_spec is not None:
            spec, base = self.claim_spec
            configs = as_list(as_dict(spec.get("devices")).get("config"))
            base = field_path(base, "devices", "config")
        elif self.is_resource_api and self.kind == "DeviceClass":
            configs = as_list(as_dict(self.obj.get("spec")).get("config"))
            base = "spec.config"
        else:
            return
        for i, config in enumerate(configs):
            opaque = as_dict(config).get("opaque")
            if isinstance(opaque, dict):
                yield field_path(base, i, "opaque"), opaque


def mapping_get(mapping: Mapping[str, Any], *keys: str) -> Any:
    """Nested ``get`` that tolerates non-dicts on the way."""
    node: Any = mapping
    for key in keys:
        node = as_dict(node).get(key)
    return node
