"""A read-only view of one manifest dict: identity, pod spec, DRA requests (pure Python).

Rules never index raw dicts blindly: user YAML can hold ``null`` or the wrong type anywhere,
so every accessor here degrades to "empty" instead of raising.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Generic, TypeVar, overload

from dra_constructs._safe_load import _orjson  # (None without orjson: every object is walked)

__all__ = [
    "CLUSTER_SCOPED_KINDS",
    "DISCOVERED_BY",
    "POD_SPEC_KINDS",
    "Manifest",
    "PodView",
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

#: Kinds whose pod spec is read at its path (:data:`_POD_SPEC_PATHS`); other kinds are searched.
POD_SPEC_KINDS = frozenset(_POD_SPEC_PATHS)

_T = TypeVar("_T")


class cached_property(Generic[_T]):  # named as the functools one it stands in for
    """:func:`functools.cached_property` without the lock Python 3.11's takes on every first access.

    A 200,000-object audit makes over a million first accesses; the lock (removed in Python
    3.12) was a fifth of the rules' time. The audit runs in one thread.
    """

    def __init__(self, func: Callable[[Any], _T]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> cached_property[_T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> _T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> _T | cached_property[_T]:
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.func(instance)
        return value


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a mapping, else an empty dict."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` if it is a list, else an empty list."""
    return value if isinstance(value, list) else []


@lru_cache(maxsize=1024)
def _is_identifier(part: str) -> bool:
    return _IDENTIFIER.match(part) is not None


def field_path(base: str, *parts: str | int) -> str:
    """Extend a field path: ``field_path("spec", "containers", 0, "env")`` -> ``spec.containers[0].env``.

    Keys that are not identifiers are quoted: ``limits['nvidia.com/gpu']``.
    """
    out = base
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _is_identifier(part):
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


@dataclass(frozen=True)
class PodView:
    """One pod spec inside a manifest, with its path and the metadata of its pod (template)."""

    spec: dict[str, Any]
    path: str
    metadata: dict[str, Any]
    metadata_path: str | None

    def containers(self, include_init: bool = True) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(path, container)`` for containers, init containers and ephemeral containers."""
        found = self._containers
        return iter(found if include_init else found[:self._main_containers])

    def claims(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(path, entry)`` for every ``resourceClaims[i]``."""
        return iter(self._claims)

    # Listed once per pod (every rule asks; a cluster export has 100,000s of pods): the spec is
    # not changed after loading.
    @cached_property
    def _containers(self) -> list[tuple[str, dict[str, Any]]]:
        return [(field_path(self.path, group, i), container)
                for group in ("containers", "initContainers", "ephemeralContainers")
                for i, container in enumerate(as_list(self.spec.get(group))) if isinstance(container, dict)]

    @cached_property
    def _main_containers(self) -> int:
        return sum(isinstance(c, dict) for c in as_list(self.spec.get("containers")))

    @cached_property
    def _claims(self) -> list[tuple[str, dict[str, Any]]]:
        return [(field_path(self.path, "resourceClaims", i), entry)
                for i, entry in enumerate(as_list(self.spec.get("resourceClaims"))) if isinstance(entry, dict)]


def _looks_like_container(node: dict[str, Any]) -> bool:
    resources = node.get("resources")
    return (isinstance(node.get("image"), str)
            or (isinstance(resources, dict) and ("limits" in resources or "requests" in resources))
            or isinstance(node.get("env"), list))


def _holds_resources(node: dict[str, Any]) -> bool:
    """A ``ResourceRequirements``-shaped dict: ``limits`` or ``requests`` maps names to quantities."""
    return isinstance(node.get("limits"), dict) or isinstance(node.get("requests"), dict)


@dataclass
class _Discovered:
    pods: list[PodView] = field(default_factory=list)
    loose: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    resources: list[tuple[str, dict[str, Any], str | None]] = field(default_factory=list)


#: What an object without pod specs, loose containers and resources dicts shares with every other such
#: object (what discovery finds is read, never changed: slim copies share theirs too).
_NOTHING_FOUND = _Discovered()

#: Top-level fields :func:`_discover` does not search.
_NOT_SEARCHED = frozenset({"apiVersion", "kind", "metadata", "status"})

#: Every key :func:`_discover` finds something by: a pod spec has ``containers``, a loose container
#: ``image``, ``env`` or ``resources`` holding ``limits``/``requests``, a resources dict ``limits`` or
#: ``requests``.
DISCOVERED_BY = ("containers", "image", "env", "limits", "requests")
#: :data:`DISCOVERED_BY` as orjson writes a key.
_FOUND_BY = tuple(f'"{key}":'.encode() for key in DISCOVERED_BY)
#: Any of :data:`_FOUND_BY`, in one C search (a generator over the five was most of the check's time).
_FOUND_BY_ANY = re.compile(b"|".join(re.escape(key) for key in _FOUND_BY))


def nothing_to_discover(root: dict[str, Any]) -> bool:
    """True only if :func:`_discover` would find nothing in ``root`` (no key it finds by, at any depth).

    One C pass instead of a Python walk: orjson writes every dict and list the walk visits (subclasses
    too), a string's ``"`` as ``\\"``, so ``"image":`` occurs in the text wherever a key ``image`` does;
    where it occurs otherwise (inside a string) the object is only walked. Values orjson cannot write
    (keys that are not strings, integers past 64 bits, nesting past its limit, other types) are walked.
    """
    if _orjson is None:
        return False
    try:
        text = _orjson.dumps([value for key, value in root.items() if key not in _NOT_SEARCHED])
    except (TypeError, _orjson.JSONEncodeError):
        return False
    return _FOUND_BY_ANY.search(text) is None


def _discover(root: dict[str, Any]) -> _Discovered:
    """Pod specs (dicts with a ``containers`` list of dicts), loose containers and resource dicts.

    Iterative and depth-unbounded (a CRD may nest pod specs at any depth; the reader bounds the
    input). A pod spec is not searched further: its containers are the pod's. ``resources`` lists
    every ``limits``/``requests`` dict outside pod specs (a Kubeflow TrainJob's
    ``trainer.resourcesPerNode``, a KServe model's ``resources``) with the path of the loose
    container holding it, if any.
    """
    found = _Discovered()
    stack: list[tuple[Any, str, Any]] = [
        (value, str(key), root) for key, value in reversed(list(root.items()))
        if key not in _NOT_SEARCHED
    ]
    containers: dict[int, str] = {}
    while stack:
        node, path, parent = stack.pop()
        if isinstance(node, dict):
            pod_containers = node.get("containers")
            if (isinstance(pod_containers, list) and pod_containers
                    and all(isinstance(c, dict) for c in pod_containers)):
                in_template = path.endswith(".spec") and isinstance(parent, dict)
                metadata = as_dict(parent.get("metadata")) if in_template else {}
                meta_path = path[: -len("spec")] + "metadata" if in_template else None
                found.pods.append(PodView(node, path, metadata, meta_path))
                continue
            if _looks_like_container(node):
                found.loose.append((path, node))
                containers[id(node)] = path
            if _holds_resources(node):
                found.resources.append((path, node, containers.get(id(parent))))
            stack.extend((value, field_path(path, key), node)
                         for key, value in reversed(list(node.items())) if isinstance(key, str))
        elif isinstance(node, list):
            stack.extend((value, field_path(path, i), parent) for i, value in reversed(list(enumerate(node))))
    return found


@dataclass
class Manifest:
    """One Kubernetes object as read from a file, stdin or a synthesized chart."""

    obj: dict[str, Any]
    file: str | None = None
    line: int | None = None
    position: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    #: Bytes ``[start, end)`` of the object's text in its file, when it was read item by item
    #: (``_json_stream``): findings are located by reading only those bytes again.
    span: tuple[int, int] | None = field(default=None, repr=False, compare=False)
    #: Its ``shape_key``, when the loader computed it (the engine does not compute it again).
    shape: bytes | None = field(default=None, repr=False, compare=False)
    #: Its rule facets (``guardrails.facets``), when the reader proved them from the object's text.
    known_facets: int | None = field(default=None, repr=False, compare=False)

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
    def _discovered(self) -> _Discovered:
        keys = _POD_SPEC_PATHS.get(self.kind)
        if keys is not None:
            node: Any = self.obj
            parent: Any = None
            for key in keys:
                parent, node = node, as_dict(node).get(key)
            if not isinstance(node, dict):
                return _NOTHING_FOUND
            metadata = self.metadata if self.kind == "Pod" else as_dict(as_dict(parent).get("metadata"))
            meta_path = "metadata" if self.kind == "Pod" else ".".join(keys[:-1]) + ".metadata"
            return _Discovered(pods=[PodView(node, ".".join(keys), metadata, meta_path)])
        if self.is_resource_api:
            return _NOTHING_FOUND  # claims, classes, slices: no pod specs (capacity.requests is not a pod's)
        # Other kinds (Kubeflow PyTorchJob/TrainJob, RayCluster, JobSet, LeaderWorkerSet, Argo, KServe, ...):
        # find every embedded pod spec, and container-like and resource dicts outside them (ConfigMaps,
        # Services and most other objects hold no key the search finds by: not walked).
        if nothing_to_discover(self.obj):
            return _NOTHING_FOUND
        return _discover(self.obj)

    def know_nothing_discovered(self) -> None:
        """Note that the object holds nothing :func:`_discover` finds (its reader proved it from its text):
        it is never searched. Not for :data:`POD_SPEC_KINDS`, which are read at their pod spec's path."""
        assert self.kind not in _POD_SPEC_PATHS, self.kind
        self.__dict__["_discovered"] = _NOTHING_FOUND

    @cached_property  # (every rule asks, a dozen times an object)
    def pods(self) -> list[PodView]:
        """Every pod spec of the object: a Pod's, a workload's template, or ones found in custom kinds."""
        return self._discovered.pods

    def share_listings(self, like: Manifest) -> None:
        """Take the containers and claims ``like`` listed of its pod specs (same kind, same pod specs).

        For an object whose shape key equals ``like``'s (``shape_key``): the pod specs differ at
        most in fields no rule reads, so the listings (paths and entries) are ``like``'s.
        """
        for mine, theirs in zip(self.pods, like.pods, strict=False):
            if mine.path == theirs.path:
                for name in ("_containers", "_main_containers", "_claims"):
                    if name in theirs.__dict__ and name not in mine.__dict__:
                        mine.__dict__[name] = theirs.__dict__[name]

    def containers(self, include_init: bool = True) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(path, container)`` for the containers of every pod spec of the object."""
        for pod in self.pods:
            yield from pod.containers(include_init)

    def loose_containers(self) -> list[tuple[str, dict[str, Any]]]:
        """Container-like dicts of custom kinds outside any pod spec (``image`` / ``resources`` / ``env``)."""
        return self._discovered.loose

    def loose_resources(self) -> list[tuple[str, dict[str, Any], str | None]]:
        """``(path, resources dict, path of the loose container holding it or None)`` outside pod specs."""
        return self._discovered.resources

    def pod_claims(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(path, entry)`` for every ``resourceClaims[i]`` of every pod spec."""
        for pod in self.pods:
            yield from pod.claims()

    def pod_labels(self) -> dict[str, Any]:
        """The object's labels overlaid with its pod templates' labels."""
        labels = dict(self.labels())
        for pod in self.pods:
            labels.update(as_dict(pod.metadata.get("labels")))
        return labels

    # --- DRA claims ----------------------------------------------------------------------

    @cached_property
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

    def requests(self) -> tuple[RequestView, ...]:
        """Every device request of a claim (subrequests of ``firstAvailable`` included); several rules ask."""
        return self._requests

    @cached_property
    def _requests(self) -> tuple[RequestView, ...]:
        return tuple(self._find_requests())

    def _find_requests(self) -> Iterator[RequestView]:
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
