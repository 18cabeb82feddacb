"""Everything a rule may ask about the whole manifest set: indexes, the target, CEL checks."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar, cast

from dra_constructs.guardrails.manifest import Manifest, PodView, as_dict, as_list, mapping_get
from dra_constructs.guardrails.resources import implicit_device_class, legacy_gpu_resources
from dra_constructs.target import Target

__all__ = [
    "GPU_DEVICE_CLASSES",
    "SANITIZER_LABEL",
    "TENANT_LABELS",
    "AuditContext",
    "CelVerdict",
]

#: KAI Scheduler's fractional-GPU pod annotations (a GPU pod without any resource or claim).
KAI_GPU_ANNOTATIONS = ("gpu-fraction", "gpu-memory")

T = TypeVar("T")

#: Objects of one shape (``shape_key``): the first one, and every one of them (the first included).
Group = tuple["Manifest", Sequence["Manifest"]]

#: Kinds :meth:`AuditContext._index` indexes (each object of them, of whatever shape).
_INDEXED_KINDS = frozenset({"ResourceClaimTemplate", "ResourceClaim", "DeviceClass", "RuntimeClass", "ConfigMap",
                            "Secret", "DaemonSet"})

#: NVIDIA DeviceClasses whose devices are GPUs or slices of one.
GPU_DEVICE_CLASSES = frozenset({"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"})

#: Name endings of the per-profile / per-model DeviceClasses the tenant platform emits (GPU classes).
TENANT_GPU_CLASS_SUFFIXES = (".mig.dra-constructs.io", ".gpu.dra-constructs.io", ".amd.dra-constructs.io")

#: The label the SanitizerDaemonSet construct puts on its DaemonSet (rule DRA009 looks for it).
SANITIZER_LABEL = ("dra-constructs.io/component", "sanitizer")
#: Pod label of a sanitizer DaemonSet that runs the AMD backend (``SanitizerDaemonSet(vendor="amd")``).
SANITIZER_AMD_LABEL = ("dra-constructs.io/sanitizer-vendor", "amd")

#: Labels that name a workload's tenant inside a namespace (first one present wins).
TENANT_LABELS = ("dra-constructs.io/tenant", "tenant", "capsule.clastix.io/tenant", "team")


@dataclass(frozen=True)
class CelVerdict:
    """The CEL checker's answer for one selector, reduced to what the rules print."""

    verdict: str
    error: str | None
    fix: str | None


@lru_cache(maxsize=4096)
def _check_cel(expression: str, target: str) -> CelVerdict:
    # The checker belongs to dra_constructs.cel (API-server rules per target version); imported
    # lazily so the rest of the guardrails work while that package loads its CEL environment.
    from dra_constructs.cel import check

    result = check(expression, target)
    return CelVerdict(str(result.verdict), result.error, result.fix)


class AuditContext:
    """The manifest set being audited, indexed for cross-object rules."""

    def __init__(self, manifests: Sequence[Manifest], target: Target, tenant_scope: str = "set",
                 dra_extended_resources: Mapping[str, str] | None = None, *,
                 groups: Sequence[Group] | None = None, by_shape: bool = False) -> None:
        self.manifests = manifests
        #: The manifests by shape (``shape_key``), in the order each shape first appears: objects of one group
        #: differ only in what the key leaves out (name, uid, status, hash labels...; never kind, namespace,
        #: labels, annotations, file or spec), so a set rule may judge the first and report every member. An
        #: object that is not memoized is a group of its own. Without ``groups`` every object is its own.
        self.groups: Sequence[Group] = groups if groups is not None else [(m, (m,)) for m in manifests]
        #: The first object of each group, in order: every object of a kind that is not memoized is one.
        self.representatives: list[Manifest] = [first for first, _ in self.groups]
        #: Facts of an object with a shape key (``Manifest.shape``) hold for its shape (the engine's ``memoize``).
        self.by_shape = by_shape
        self.target = target
        #: Extended resource name -> DeviceClass the cluster maps it to (the user's declarations).
        self.declared_extended_resources: dict[str, str] = dict(dra_extended_resources or {})
        #: The same, from ``spec.extendedResourceName`` of DeviceClasses in the set.
        self._class_extended_resources: dict[str, str] = {}
        #: DRA009's "manifest set": the whole input ("set") or each file on its own ("file").
        self.tenant_scope = tenant_scope
        self._templates: dict[tuple[str, str], Manifest] = {}
        self._claims: dict[tuple[str, str], Manifest] = {}
        self._by_name: dict[tuple[str, str], list[Manifest]] = defaultdict(list)
        self._device_classes: dict[str, Manifest] = {}
        #: ConfigMaps and Secrets, indexed for ``envFrom`` on the first lookup (a cluster export holds 100,000s
        #: of ConfigMaps and few pods with ``envFrom``).
        self._env_candidates: list[Manifest] = []
        self._env_sources: dict[tuple[str, str, str], Manifest] | None = None
        #: RuntimeClass name -> its ``handler`` (node.k8s.io RuntimeClasses in the set).
        self.runtime_class_handlers: dict[str, str] = {}
        self.sanitizer_present = False
        #: A counted sanitizer DaemonSet runs the AMD backend (:data:`SANITIZER_AMD_LABEL`): DRA009 counts AMD tenants.
        self.amd_sanitizer_present = False
        #: Namespaces of the sanitizer DaemonSets in the set (counted or not): DRA019's exception.
        self.sanitizer_namespaces: set[str] = set()
        #: Sanitizer DaemonSets that do not count: their pods wait for a DRA allocation (path, why).
        self.sanitizers_not_counted: list[tuple[Manifest, str]] = []
        self._gpu_pod: dict[int | bytes, bool] = {}
        self._memo: dict[tuple[str, int | bytes], Any] = {}
        self._indexes: dict[str, Any] = {}
        #: Object id -> its shape key (``shape_key``), told by the engine: facts of one shape are computed once.
        self._shapes: dict[int, bytes] = {}
        for first, members in self.groups:  # (the objects of a group are of one kind)
            if first.kind in _INDEXED_KINDS:
                for manifest in members:
                    self._index(manifest)

    def _index(self, m: Manifest) -> None:
        """Index ``m`` (called only for kinds in ``_INDEXED_KINDS``: a kind indexed here belongs there)."""
        kind = m.kind
        if kind in ("ConfigMap", "Secret"):  # (first: no other branch takes these kinds)
            self._env_candidates.append(m)
        elif m.is_resource_api and kind in ("ResourceClaimTemplate", "ResourceClaim"):
            (self._templates if kind == "ResourceClaimTemplate" else self._claims)[(m.namespace, m.name)] = m
            self._by_name[(kind, m.name)].append(m)
        elif m.is_resource_api and kind == "DeviceClass":
            self._device_classes[m.name] = m
            mapped = as_dict(m.obj.get("spec")).get("extendedResourceName")
            if isinstance(mapped, str) and mapped:
                self._class_extended_resources.setdefault(mapped, m.name)
        elif kind == "RuntimeClass" and m.group == "node.k8s.io":
            handler = m.obj.get("handler")
            self.runtime_class_handlers[m.name] = handler if isinstance(handler, str) else ""
        elif kind == "DaemonSet":
            key, value = SANITIZER_LABEL
            if m.pod_labels().get(key) == value:
                if m.namespace:
                    self.sanitizer_namespaces.add(m.namespace)
                claims = [entry for _, entry in m.pod_claims()]
                if claims:
                    # A pod with claims runs only where the scheduler allocates them; an admin claim
                    # with allocationMode All cannot be allocated on a node with more than 32 devices
                    # (8 x 7 MIG, every DynamicMIG node), so those nodes would run with no barrier.
                    self.sanitizers_not_counted.append(
                        (m, f"its pods request {len(claims)} ResourceClaim(s) (spec.resourceClaims) and run only "
                            "where the scheduler can allocate them: an allocationMode All claim cannot be "
                            "allocated on nodes with more than 32 devices"))
                else:
                    self.sanitizer_present = True
                    amd_key, amd_value = SANITIZER_AMD_LABEL
                    self.amd_sanitizer_present |= m.pod_labels().get(amd_key) == amd_value

    # --- lookups -------------------------------------------------------------------------

    def _lookup(self, kind: str, index: dict[tuple[str, str], Manifest], namespace: str,
                name: str) -> Manifest | None:
        found = index.get((namespace, name))
        if found is not None:
            return found
        # A manifest without a namespace lands wherever it is applied: match it leniently.
        candidates = [m for m in self._by_name.get((kind, name), []) if not m.namespace or not namespace]
        return candidates[0] if len(candidates) == 1 else None

    def template(self, namespace: str, name: str) -> Manifest | None:
        """The ResourceClaimTemplate ``namespace/name`` in the set, if present."""
        return self._lookup("ResourceClaimTemplate", self._templates, namespace, name)

    def claim(self, namespace: str, name: str) -> Manifest | None:
        """The ResourceClaim ``namespace/name`` in the set, if present."""
        return self._lookup("ResourceClaim", self._claims, namespace, name)

    def namespaces_elsewhere(self, kind: str, namespace: str, name: str, file: str | None) -> list[str]:
        """Other namespaces holding a ``kind`` called ``name`` in the same file (one ``kubectl apply``; at
        synth, the App) while ``namespace`` (set) holds none in the whole set."""
        if not namespace:
            return []
        index = self._templates if kind == "ResourceClaimTemplate" else self._claims
        if self._lookup(kind, index, namespace, name) is not None:
            return []
        return sorted({m.namespace for m in self._by_name.get((kind, name), [])
                       if m.namespace not in ("", namespace) and m.file == file})

    def claims_named(self, name: str) -> list[Manifest]:
        """Every ResourceClaim called ``name``, in any namespace."""
        return list(self._by_name.get(("ResourceClaim", name), []))

    def device_class(self, name: str) -> Manifest | None:
        return self._device_classes.get(name)

    def env_source(self, kind: str, namespace: str, name: str) -> Manifest | None:
        """A ConfigMap or Secret an ``envFrom`` refers to, if it is in the set."""
        sources = self._env_sources
        if sources is None:  # (in input order: the last of equal keys wins, as when indexed one by one)
            sources = self._env_sources = {(m.kind, m.namespace, m.name): m for m in self._env_candidates
                                           if m.api_version == "v1"}
        return sources.get((kind, namespace, name)) or sources.get((kind, "", name))

    def claim_source(self, pod: Manifest, entry: dict[str, Any]) -> Manifest | None:
        """The template or claim a pod's ``resourceClaims`` entry points at, if in the set."""
        template = entry.get("resourceClaimTemplateName")
        if isinstance(template, str):
            return self.template(pod.namespace, template)
        claim = entry.get("resourceClaimName")
        if isinstance(claim, str):
            return self.claim(pod.namespace, claim)
        return None

    # --- derived facts -------------------------------------------------------------------

    def note_shape(self, m: Manifest, key: bytes) -> None:
        """``m``'s shape key: what :meth:`memo`, :meth:`is_gpu_pod` and :meth:`uses_only_admin_claims`
        compute for ``m`` holds for every object of the shape (they read only what the key holds). With
        ``by_shape``, an object's own ``Manifest.shape`` counts without being told."""
        self._shapes[id(m)] = key

    def _slot(self, m: Manifest) -> int | bytes:
        if self.by_shape and m.shape is not None:
            return m.shape
        return self._shapes.get(id(m)) or id(m)

    def index(self, key: str, build: Callable[[AuditContext], T]) -> T:
        """``build(self)``, built once per audit: an index over the whole set that several rules share.

        Kept on the context, so it goes with it: an index that refers back to the context (and
        so to every manifest) must not outlive the audit.
        """
        if key not in self._indexes:
            self._indexes[key] = build(self)
        return cast(T, self._indexes[key])

    def memo(self, key: str, m: Manifest, compute: Callable[[Manifest], Any]) -> Any:
        """``compute(m)``, computed once per object (or shape) and audit (for facts several rules ask)."""
        slot = (key, self._slot(m))
        if slot not in self._memo:
            self._memo[slot] = compute(m)
        return self._memo[slot]

    def dra_extended_resource(self, name: str) -> tuple[str, str] | None:
        """``(DeviceClass, how)`` when the target serves extended resource ``name`` through DRA (KEP-5004).

        ``how`` is ``"declared"`` (the user said the cluster maps it), ``"class"`` (a DeviceClass in
        the set has ``extendedResourceName: name``) or ``"implicit"``
        (``deviceclass.resource.kubernetes.io/<class>``). ``None`` before 1.34, where no such
        mapping exists, and for names nothing maps.
        """
        if not self.target.dra_extended_resources_exist:
            return None
        if name in self.declared_extended_resources:
            return self.declared_extended_resources[name], "declared"
        if name in self._class_extended_resources:
            return self._class_extended_resources[name], "class"
        implicit = implicit_device_class(name)
        return (implicit, "implicit") if implicit else None

    def is_gpu_class(self, class_name: str) -> bool:
        """Whether a DeviceClass hands out GPUs (NVIDIA's or AMD's classes, or a class in the set selecting them)."""
        if class_name in GPU_DEVICE_CLASSES or class_name.endswith(TENANT_GPU_CLASS_SUFFIXES):
            return True
        device_class = self.device_class(class_name)
        if device_class is not None:
            selectors = as_list(mapping_get(device_class.obj, "spec", "selectors"))
            text = repr(selectors)
            return "gpu.nvidia.com" in text or "gpu.amd.com" in text or "gpu" in class_name
        return "gpu" in class_name or "nvidia" in class_name

    def claim_is_gpu(self, claim: Manifest) -> bool:
        return any(self.is_gpu_class(r.device_class_name) for r in claim.requests())

    def claim_is_admin_only(self, claim: Manifest) -> bool:
        requests = list(claim.requests())
        return bool(requests) and all(r.admin_access for r in requests)

    def is_gpu_pod(self, m: Manifest) -> bool:
        """A pod (or template) that gets GPUs: legacy GPU resources, or a claim for a GPU class.

        A claim whose template or ResourceClaim is not in the set counts as a GPU claim.
        """
        key = self._slot(m)
        cached = self._gpu_pod.get(key)
        if cached is not None:
            return cached
        result = any(self.is_gpu_pod_spec(m, pod) for pod in m.pods)
        self._gpu_pod[key] = result
        return result

    def is_gpu_pod_spec(self, m: Manifest, pod: PodView) -> bool:
        """Whether one pod spec of ``m`` gets GPUs (see :meth:`is_gpu_pod`)."""
        if any(legacy_gpu_resources(container) for _, container in pod.containers()):
            return True
        if any(key in as_dict(pod.metadata.get("annotations")) for key in KAI_GPU_ANNOTATIONS):
            return True
        for _, entry in pod.claims():
            source = self.claim_source(m, entry)
            if source is None or self.claim_is_gpu(source):
                return True
        return False

    def uses_only_admin_claims(self, m: Manifest) -> bool:
        """Every pod claim is an adminAccess claim in the set (a node agent, not a tenant)."""
        return bool(self.memo("uses_only_admin_claims", m, self._uses_only_admin_claims))

    def _uses_only_admin_claims(self, m: Manifest) -> bool:
        sources = [self.claim_source(m, entry) for _, entry in m.pod_claims()]
        return bool(sources) and all(s is not None and self.claim_is_admin_only(s) for s in sources)

    def check_cel(self, expression: str) -> CelVerdict:
        """The CEL checker's verdict for a selector under this audit's target version."""
        return _check_cel(expression, str(self.target))


def tenant_of(m: Manifest) -> tuple[str, str]:
    """``(namespace, tenant label value)`` of a workload; the label may be on the pod template."""
    labels = m.pod_labels()
    for key in TENANT_LABELS:
        value = labels.get(key)
        if isinstance(value, str) and value:
            return m.namespace, value
    return m.namespace, ""
