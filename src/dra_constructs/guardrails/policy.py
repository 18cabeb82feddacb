"""ValidatingAdmissionPolicy manifests for the per-object rules (pure Python, plain dicts).

The cluster refuses what never went through dra-constructs: Pods and the pod templates of
Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs, ReplicationControllers and
CronJobs (DRA001, DRA002, DRA005, DRA006, DRA007, DRA008, DRA020), ResourceClaims /
ResourceClaimTemplates of every resource.k8s.io version (DRA003, DRA006, DRA007, DRA017, DRA022), and
Namespaces (DRA019: the admin-access label, :mod:`.policy_namespaces`). Cross-object rules (DRA004's
CEL checks, DRA006's shared claims, DRA009, DRA021) stay with the synth validation and the audit.

The CEL uses only standard CEL (``has``, ``all``, ``exists``, ``filter``, ``map``, ``matches``,
``startsWith``, ``contains``), so the tests evaluate it with a real CEL engine. Suppressions are
honoured by rule id from the ``guardrails.dra-constructs.io/suppressions`` annotation of the
object (for workloads also of its pod template); reasons are enforced at synth and by the audit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails.context import KAI_GPU_ANNOTATIONS as KAI_SHARING_ANNOTATIONS
from dra_constructs.guardrails.policy_namespaces import namespace_validations, namespace_variables
from dra_constructs.guardrails.resources import IMPLICIT_EXTENDED_RESOURCE_PREFIX
from dra_constructs.guardrails.rules.barrier_toleration import SANITIZER_TAINT_KEY
from dra_constructs.guardrails.rules.env_selection import DEVICE_ENV_VARS, HIDING_VALUES, MPS_PREFIX
from dra_constructs.guardrails.rules.gvisor_gpu import GVISOR_NAME
from dra_constructs.guardrails.suppressions import SUPPRESSIONS_ANNOTATION
from dra_constructs.isolation import ISOLATION_TAINT_KEY, SHARED_VALUE

__all__ = ["POLICY_RULES", "PolicyKind", "admission_policy_manifests"]

#: Rules the admission policy can enforce per object.
POLICY_RULES = ("DRA001", "DRA002", "DRA003", "DRA005", "DRA006", "DRA007", "DRA008", "DRA017", "DRA019", "DRA020",
                "DRA022")

_API = "admissionregistration.k8s.io/v1"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,198}[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_OPS = ["CREATE", "UPDATE"]


def _cel_str(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _cel_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(_cel_str(v) for v in sorted(values)) + "]"


def _not_suppressed(rule: str) -> str:
    """CEL: the object's suppression annotation names ``rule`` (RE2 over the JSON text)."""
    pattern = '"rule"' + r"\s*:\s*" + f'"{rule}"'
    return f"variables.suppressions.matches({_cel_str(pattern)})"


# --- pod-shaped objects ----------------------------------------------------------------------

def _gpu_resource(dra_names: Sequence[str]) -> str:
    """CEL: resource name ``k`` is a device-plugin GPU resource (DRA-served names are DRA010, not refused)."""
    exempt = f" && !(k in {_cel_list(dra_names)})" if dra_names else ""
    return (
        "(k.contains('/') && !k.startsWith(" + _cel_str(IMPLICIT_EXTENDED_RESOURCE_PREFIX) + ")" + exempt + " && "
        "(k.matches('(?i)gpu') || k.matches('(?i)^nvidia[.]com/(mig-|(ga|gh|gb|gv|gk|gm|gp|tu|ad)[0-9]{2,3})')))"
    )


def _bad_resources(dra_names: Sequence[str]) -> str:
    gpu = _gpu_resource(dra_names)
    return ("has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(k, " + gpu + ")) || "
            "(has(c.resources.requests) && c.resources.requests.exists(k, " + gpu + ")))")


_BAD_ENV = (
    "has(c.env) && c.env.exists(e, e.name.startsWith(" + _cel_str(MPS_PREFIX) + ") || "
    "(e.name in " + _cel_list(sorted(DEVICE_ENV_VARS)) + " && (has(e.valueFrom) || "
    "(has(e.value) && !(e.value in " + _cel_list(sorted(HIDING_VALUES)) + ")))))"
)
# DRA006 per object, as rules/software_sharing.py: GPU-sharing device-plugin resources (time-sliced
# nvidia.com/gpu.shared, HAMi, cGPU, vGPU), the same pattern as its _SHARED_GPU_RESOURCE.
_SHARED_NAME = "k.matches('(?i)/(.*gpumem.*|gpucores|gpu-mem.*|gpu-core.*|gpu[.]shared|vgpu-.*)$')"
_SHARED_RESOURCES = (
    "has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(k, " + _SHARED_NAME + ")) || "
    "(has(c.resources.requests) && c.resources.requests.exists(k, " + _SHARED_NAME + ")))"
)
_UNDECLARED_CLAIM = (
    "has(c.resources) && has(c.resources.claims) && c.resources.claims.exists(r, !(r.name in variables.claimNames))"
)
_CLAIM_USED = (
    "variables.containers.exists(c, has(c.resources) && has(c.resources.claims) && "
    "c.resources.claims.exists(r, r.name == n))"
)


def _dra_resource(dra_names: Sequence[str]) -> str:
    """CEL: resource name ``k`` is served through DRA (the implicit class name, or a declared name)."""
    declared = f" || k in {_cel_list(dra_names)}" if dra_names else ""
    return f"(k.startsWith({_cel_str(IMPLICIT_EXTENDED_RESOURCE_PREFIX)}){declared})"


def _dra_allocations(dra_names: Sequence[str]) -> str:
    """CEL: the pod gets devices through DRA (a claim, or an extended resource DRA serves)."""
    k = _dra_resource(dra_names)
    return ("(size(variables.claimNames) > 0 || variables.containers.exists(c, has(c.resources) && "
            f"((has(c.resources.limits) && c.resources.limits.exists(k, {k})) || "
            f"(has(c.resources.requests) && c.resources.requests.exists(k, {k})))))")


#: CEL: the pod runs in gVisor (``runtimeClassName`` by name; handlers are the audit's, cross-object).
_GVISOR = ("has(variables.spec.runtimeClassName) && "
           f"variables.spec.runtimeClassName.matches({_cel_str('(?i)' + GVISOR_NAME.pattern)})")


def _pod_validations(rules: Sequence[str], dra_names: Sequence[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if "DRA001" in rules:
        out.append({
            "expression": f"{_not_suppressed('DRA001')} || size(variables.legacyGpuContainers) == 0",
            "messageExpression": "'DRA001: container ' + variables.legacyGpuContainers[0] + ' requests a legacy GPU "
                                 "extended resource (nvidia.com/gpu, nvidia.com/mig-*, ...); request GPUs through a "
                                 "DRA ResourceClaim (spec.resourceClaims + resources.claims)'",
            "reason": "Forbidden",
        })
    if "DRA002" in rules:
        out.append({
            "expression": f"{_not_suppressed('DRA002')} || size(variables.deviceEnvContainers) == 0",
            "messageExpression": "'DRA002: container ' + variables.deviceEnvContainers[0] + ' selects or shares GPUs "
                                 "through NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES / CUDA_MPS_*; remove the "
                                 "variable, the DRA claim decides the devices'",
            "reason": "Forbidden",
        })
    if "DRA005" in rules:
        out.append({
            "expression": f"{_not_suppressed('DRA005')} || size(variables.undeclaredClaimContainers) == 0",
            "messageExpression": "'DRA005: container ' + variables.undeclaredClaimContainers[0] + ' references a "
                                 "claim that is not in spec.resourceClaims'",
            "reason": "Invalid",
        })
        out.append({
            "expression": f"{_not_suppressed('DRA005')} || size(variables.unusedClaims) == 0",
            "messageExpression": "'DRA005: pod claim ' + variables.unusedClaims[0] + ' is not listed in any "
                                 "container resources.claims, so no container gets the device'",
            "reason": "Invalid",
        })
    if "DRA006" in rules:
        out.append({
            "expression": f"{_not_suppressed('DRA006')} || size(variables.kaiSharing) == 0",
            "messageExpression": "'DRA006: annotation ' + variables.kaiSharing[0] + ' asks KAI Scheduler for a "
                                 "fraction of a GPU: pods packed onto one GPU share its memory and compute with no "
                                 "hardware isolation; use a MIG slice or suppress DRA006 with a reason'",
            "reason": "Forbidden",
        })
        out.append({
            "expression": f"{_not_suppressed('DRA006')} || size(variables.sharedGpuContainers) == 0",
            "messageExpression": "'DRA006: container ' + variables.sharedGpuContainers[0] + ' asks for a "
                                 "GPU-sharing device-plugin resource (time-slicing, HAMi, cGPU, vGPU): several pods "
                                 "share one GPU with no hardware isolation'",
            "reason": "Forbidden",
        })
    if "DRA007" in rules:
        out.append({
            "expression": f"{_not_suppressed('DRA007')} || !has(variables.spec.resourceClaims) || "
                          "variables.spec.resourceClaims.all(rc, !has(rc.source))",
            "message": "DRA007: the pod claim source: field was removed in 1.31; write resourceClaimTemplateName "
                       "or resourceClaimName directly on the resourceClaims entry",
            "reason": "Invalid",
        })
    if "DRA008" in rules:
        out.append({
            "expression": f"{_not_suppressed('DRA008')} || size(variables.claimNames) == 0 || "
                          "!has(variables.spec.terminationGracePeriodSeconds) || "
                          "variables.spec.terminationGracePeriodSeconds > 0",
            "message": "DRA008: a pod with device claims needs terminationGracePeriodSeconds >= 1 so preemption "
                       "can drain the device after SIGTERM",
            "reason": "Forbidden",
        })
    if "DRA020" in rules:
        out.append({
            "expression": f"{_not_suppressed('DRA020')} || !({_GVISOR}) || !{_dra_allocations(dra_names)}",
            "messageExpression": "'DRA020: runtimeClassName ' + variables.spec.runtimeClassName + ' runs the pod in "
                                 "gVisor, whose nvproxy exposes every GPU of the node to a pod with DRA devices "
                                 "(google/gvisor#13620); run GPU pods with runc'",
            "reason": "Forbidden",
        })
    return out


def _pod_variables(spec: str, template_metadata: str | None, dra_names: Sequence[str]) -> list[dict[str, str]]:
    annotation = _cel_str(SUPPRESSIONS_ANNOTATION)
    sources = ["object.metadata"] + ([template_metadata] if template_metadata else [])
    pod_meta = template_metadata or "object.metadata"  # where the audit reads a pod's KAI annotations
    suppressions = " + ".join(
        f"((has({m}) && has({m}.annotations) && {annotation} in {m}.annotations) ? {m}.annotations[{annotation}] : '')"
        for m in sources
    )
    return [
        {"name": "spec", "expression": spec},
        {"name": "containers", "expression": "variables.spec.containers + (has(variables.spec.initContainers) ? "
                                             "variables.spec.initContainers : [])"},
        {"name": "claimNames", "expression": "has(variables.spec.resourceClaims) ? "
                                             "variables.spec.resourceClaims.map(rc, rc.name) : []"},
        {"name": "suppressions", "expression": suppressions},
        {"name": "legacyGpuContainers",
         "expression": f"variables.containers.filter(c, {_bad_resources(dra_names)}).map(c, c.name)"},
        {"name": "deviceEnvContainers", "expression": f"variables.containers.filter(c, {_BAD_ENV}).map(c, c.name)"},
        {"name": "undeclaredClaimContainers",
         "expression": f"variables.containers.filter(c, {_UNDECLARED_CLAIM}).map(c, c.name)"},
        {"name": "unusedClaims", "expression": f"variables.claimNames.filter(n, !({_CLAIM_USED}))"},
        {"name": "kaiSharing", "expression": f"(has({pod_meta}) && has({pod_meta}.annotations)) ? "
                                             f"{_cel_list(KAI_SHARING_ANNOTATIONS)}.filter(k, k in "
                                             f"{pod_meta}.annotations) : []"},
        {"name": "sharedGpuContainers",
         "expression": f"variables.containers.filter(c, {_SHARED_RESOURCES}).map(c, c.name)"},
    ]


# --- claims ---------------------------------------------------------------------------------

_REQUEST_ALL = (
    "(has(r.exactly) ? (has(r.exactly.allocationMode) && r.exactly.allocationMode == 'All' && "
    "!(has(r.exactly.adminAccess) && r.exactly.adminAccess)) : "
    "(has(r.allocationMode) && r.allocationMode == 'All' && !(has(r.adminAccess) && r.adminAccess))) || "
    "(has(r.firstAvailable) && r.firstAvailable.exists(s, has(s.allocationMode) && s.allocationMode == 'All'))"
)
_REMOVED_MODE = (
    "(has(r.allocationMode) && r.allocationMode in ['Immediate', 'WaitForFirstConsumer']) || "
    "(has(r.exactly) && has(r.exactly.allocationMode) && "
    "r.exactly.allocationMode in ['Immediate', 'WaitForFirstConsumer'])"
)
# As rules/software_sharing.py: only the NVIDIA driver's config (driver gpu.nvidia.com or parameters of
# resource.nvidia.com/*; other drivers' TimeSlicing means something else), strategy in any letter case.
_SHARING = (
    "has(c.opaque) && has(c.opaque.parameters) && has(c.opaque.parameters.sharing) && "
    "(c.opaque.driver == 'gpu.nvidia.com' || (has(c.opaque.parameters.apiVersion) && "
    "string(c.opaque.parameters.apiVersion).startsWith('resource.nvidia.com/'))) && "
    "((has(c.opaque.parameters.sharing.strategy) && "
    "string(c.opaque.parameters.sharing.strategy).matches('(?i)^(timeslicing|mps)$')) || "
    "has(c.opaque.parameters.sharing.timeSlicingConfig) || has(c.opaque.parameters.sharing.mpsConfig))"
)

#: CEL: toleration ``t`` tolerates the sanitizer's taint (its key, or no key with operator Exists).
_TOLERATES_BARRIER = (
    f"((has(t.key) && t.key == {_cel_str(SANITIZER_TAINT_KEY)}) || "
    "((!has(t.key) || t.key == '') && has(t.operator) && t.operator == 'Exists'))"
)
#: CEL: request ``r`` (flat v1beta1, ``exactly`` or a ``firstAvailable`` subrequest) tolerates it;
#: adminAccess requests (admitted only in admin-access namespaces: node agents) are exempt.
_BARRIER_TOLERATION = (
    "(!has(r.exactly) && has(r.tolerations) && !(has(r.adminAccess) && r.adminAccess) && "
    f"r.tolerations.exists(t, {_TOLERATES_BARRIER})) || "
    "(has(r.exactly) && has(r.exactly.tolerations) && !(has(r.exactly.adminAccess) && r.exactly.adminAccess) && "
    f"r.exactly.tolerations.exists(t, {_TOLERATES_BARRIER})) || "
    f"(has(r.firstAvailable) && r.firstAvailable.exists(s, has(s.tolerations) && "
    f"s.tolerations.exists(t, {_TOLERATES_BARRIER})))"
)

#: CEL: toleration ``t`` tolerates the MIG isolation taint of another tenant (DRA022, per object): the key
#: with operator Exists, or a value other than the claim's own namespace and ``Shared``. Whether the
#: namespace is exclusive-gpu (then ``Shared`` and a missing own toleration are refused too) is the
#: tenant's own policy (``tenants/admission.py``), which knows it.
_TOLERATES_OTHER_TENANT = (
    f"(has(t.key) && t.key == {_cel_str(ISOLATION_TAINT_KEY)} && ((has(t.operator) && t.operator == 'Exists') || "
    f"!has(t.value) || !(t.value == variables.claimNamespace || t.value == {_cel_str(SHARED_VALUE)})))"
)
_ISOLATION_TOLERATION = (
    "(!has(r.exactly) && has(r.tolerations) && !(has(r.adminAccess) && r.adminAccess) && "
    f"r.tolerations.exists(t, {_TOLERATES_OTHER_TENANT})) || "
    "(has(r.exactly) && has(r.exactly.tolerations) && !(has(r.exactly.adminAccess) && r.exactly.adminAccess) && "
    f"r.exactly.tolerations.exists(t, {_TOLERATES_OTHER_TENANT})) || "
    f"(has(r.firstAvailable) && r.firstAvailable.exists(s, has(s.tolerations) && "
    f"s.tolerations.exists(t, {_TOLERATES_OTHER_TENANT})))"
)

# A request (v1 ``exactly``, v1beta1 top level, or a firstAvailable subrequest) asking for a share of a GPU
# class's capacity (KEP-5075); GPU class as AuditContext.is_gpu_class decides from the name alone.
_GPU_CLASS = "(d.contains('gpu') || d.contains('nvidia') || d.endsWith('.mig.dra-constructs.io'))"
_CAPACITY_OF = "has({x}.capacity) && has({x}.deviceClassName) && [{x}.deviceClassName].exists(d, " + _GPU_CLASS + ")"
_CAPACITY = (
    "(has(r.exactly) && " + _CAPACITY_OF.format(x="r.exactly") + ") || (" + _CAPACITY_OF.format(x="r") + ") || "
    "(has(r.firstAvailable) && r.firstAvailable.exists(s, " + _CAPACITY_OF.format(x="s") + "))"
)


def _claim_variables() -> list[dict[str, str]]:
    annotation = _cel_str(SUPPRESSIONS_ANNOTATION)
    return [
        {"name": "claimSpec", "expression": "object.kind == 'ResourceClaimTemplate' ? object.spec.spec : object.spec"},
        {"name": "devices", "expression": "has(variables.claimSpec.devices) ? variables.claimSpec.devices : {}"},
        {"name": "requests", "expression": "has(variables.devices.requests) ? variables.devices.requests : []"},
        {"name": "configs", "expression": "has(variables.devices.config) ? variables.devices.config : []"},
        {"name": "suppressions", "expression": f"(has(object.metadata.annotations) && {annotation} in "
                                               "object.metadata.annotations) ? "
                                               f"object.metadata.annotations[{annotation}] : ''"},
        {"name": "allRequests", "expression": f"variables.requests.filter(r, {_REQUEST_ALL}).map(r, r.name)"},
        {"name": "barrierTolerations",
         "expression": f"variables.requests.filter(r, {_BARRIER_TOLERATION}).map(r, r.name)"},
        {"name": "capacityRequests", "expression": f"variables.requests.filter(r, {_CAPACITY}).map(r, r.name)"},
        # ("namespace" is a reserved word of CEL: the API server refuses it as a variable name)
        {"name": "claimNamespace", "expression": "has(object.metadata.namespace) ? object.metadata.namespace : ''"},
        {"name": "isolationTolerations",
         "expression": f"variables.requests.filter(r, {_ISOLATION_TOLERATION}).map(r, r.name)"},
    ]


def _claim_validations(rules: Sequence[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if "DRA007" in rules:
        out.append({
            "expression": f"{_not_suppressed('DRA007')} || !(object.apiVersion in ['resource.k8s.io/v1alpha1', "
                          "'resource.k8s.io/v1alpha2', 'resource.k8s.io/v1alpha3'])",
            "messageExpression": "'DRA007: ' + object.apiVersion + ' is a removed alpha API; use "
                                 "resource.k8s.io/v1beta1 (1.32), v1beta2 (1.33) or v1 (1.34+)'",
            "reason": "Invalid",
        })
        out.append({
            "expression": f"{_not_suppressed('DRA007')} || !variables.requests.exists(r, {_REMOVED_MODE})",
            "message": "DRA007: allocationMode WaitForFirstConsumer/Immediate does not exist since 1.31; use "
                       "allocationMode: ExactCount with count (the scheduler allocates a claim when it schedules "
                       "the first pod using it, on that pod's node; topology: constraints[].matchAttribute)",
            "reason": "Invalid",
        })
    if "DRA003" in rules:
        out.append({
            "expression": f"{_not_suppressed('DRA003')} || size(variables.allRequests) == 0",
            "messageExpression": "'DRA003: request ' + variables.allRequests[0] + ' uses allocationMode All without "
                                 "adminAccess; use ExactCount with a count'",
            "reason": "Forbidden",
        })
    if "DRA006" in rules:
        out.append({
            "expression": f"{_not_suppressed('DRA006')} || !variables.configs.exists(c, {_SHARING})",
            "message": "DRA006: TimeSlicing / MPS sharing gives tenants one GPU without hardware isolation; use MIG "
                       "slices (mig.nvidia.com) or suppress DRA006 with a reason",
            "reason": "Forbidden",
        })
        out.append({
            "expression": f"{_not_suppressed('DRA006')} || size(variables.capacityRequests) == 0",
            "messageExpression": "'DRA006: request ' + variables.capacityRequests[0] + ' asks for a share of a GPU "
                                 "(consumable capacity): claims of other workloads and namespaces get the same GPU "
                                 "with no hardware isolation; use a MIG slice or suppress DRA006 with a reason'",
            "reason": "Forbidden",
        })
    if "DRA017" in rules:
        out.append({
            "expression": f"{_not_suppressed('DRA017')} || size(variables.barrierTolerations) == 0",
            "messageExpression": "'DRA017: request ' + variables.barrierTolerations[0] + ' tolerates the sanitizer "
                                 f"device taint {SANITIZER_TAINT_KEY} (or every taint): it could be allocated "
                                 "quarantined or mid-barrier devices; remove the toleration'",
            "reason": "Forbidden",
        })
    if "DRA022" in rules:
        out.append({
            "expression": f"{_not_suppressed('DRA022')} || size(variables.isolationTolerations) == 0",
            "messageExpression": "'DRA022: request ' + variables.isolationTolerations[0] + ' tolerates the MIG "
                                 f"isolation taint {ISOLATION_TAINT_KEY} of another tenant (operator Exists, or a "
                                 "value other than its namespace and Shared): it lands on GPUs exclusive-gpu tenants "
                                 "hold; tolerate only Equal to your own namespace or to Shared'",
            "reason": "Forbidden",
        })
    return out


# --- assembly -------------------------------------------------------------------------------

#: ResourceClaims the resourceclaim controller makes from a pod's template carry this annotation;
#: their template was checked (and maybe suppressed) when it was created, so they are skipped.
_NOT_GENERATED = {
    "name": "not-generated-from-a-template",
    "expression": "!has(object.metadata.annotations) || "
                  "!('resource.kubernetes.io/pod-claim-name' in object.metadata.annotations)",
}


@dataclass(frozen=True)
class PolicyKind:
    """One policy: which resources it matches and where their pod spec (or claim spec) lives.

    ``section`` says which validations apply: ``pods``, ``claims`` or ``namespaces``.
    """

    suffix: str
    resource_rules: tuple[dict[str, Any], ...]
    variables: tuple[dict[str, str], ...]
    section: str = "pods"
    match_conditions: tuple[dict[str, str], ...] = ()


def _kinds(dra_names: Sequence[str]) -> tuple[PolicyKind, ...]:
    def rule(groups: list[str], resources: list[str]) -> dict[str, Any]:
        return {"apiGroups": groups, "apiVersions": ["*"], "operations": list(_OPS), "resources": resources}

    return (
        PolicyKind("pods", (rule([""], ["pods"]),), tuple(_pod_variables("object.spec", None, dra_names))),
        PolicyKind(
            "workloads",
            (rule(["apps"], ["deployments", "replicasets", "statefulsets", "daemonsets"]),
             rule(["batch"], ["jobs"]), rule([""], ["replicationcontrollers"])),
            tuple(_pod_variables("object.spec.template.spec", "object.spec.template.metadata", dra_names)),
        ),
        PolicyKind("cronjobs", (rule(["batch"], ["cronjobs"]),),
                   tuple(_pod_variables("object.spec.jobTemplate.spec.template.spec",
                                        "object.spec.jobTemplate.spec.template.metadata", dra_names))),
        PolicyKind("claims", (rule(["resource.k8s.io"], ["resourceclaims", "resourceclaimtemplates"]),),
                   tuple(_claim_variables()), section="claims", match_conditions=(_NOT_GENERATED,)),
        PolicyKind("namespaces", (rule([""], ["namespaces"]),), tuple(namespace_variables()),
                   section="namespaces"),
    )


def admission_policy_manifests(
    name: str = "dra-guardrails",
    *,
    rules: Sequence[str] = POLICY_RULES,
    validation_actions: Sequence[str] = ("Deny",),
    excluded_namespaces: Sequence[str] = ("kube-system",),
    namespaces: Sequence[str] = (),
    dra_extended_resources: Sequence[str] = (),
    admin_access_namespaces: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """ValidatingAdmissionPolicies and their bindings (``admissionregistration.k8s.io/v1``).

    ``namespaces``: bind only to these namespaces (a tenant's); otherwise to every namespace but
    ``excluded_namespaces``. DRA001 never refuses ``deviceclass.resource.kubernetes.io/<class>``
    names nor the names in ``dra_extended_resources`` (extended resources the cluster serves
    through DRA, KEP-5004). ``admin_access_namespaces``: the Namespaces DRA019 lets carry the
    admin-access label (the sanitizer's, another node agent's); every other Namespace is refused it.
    """
    if not _NAME.match(name):
        raise DraConstructsError("GuardrailsAdmissionPolicy", "name", name,
                                 "not a DNS subdomain of at most 200 characters",
                                 "use lower-case letters, digits, '-' and '.', e.g. dra-guardrails")
    unknown = sorted(set(rules) - set(POLICY_RULES))
    if unknown:
        raise DraConstructsError(name, "rules", unknown, "not enforceable per object by an admission policy",
                                 f"choose from {', '.join(POLICY_RULES)}")
    bad_actions = sorted(set(validation_actions) - {"Deny", "Warn", "Audit"})
    if bad_actions or not validation_actions or ("Deny" in validation_actions and "Warn" in validation_actions):
        raise DraConstructsError(name, "validation_actions", list(validation_actions),
                                 "must be a non-empty subset of Deny, Warn, Audit without both Deny and Warn",
                                 'use ("Deny",) to refuse, or ("Warn", "Audit") to observe first')
    for namespace in admin_access_namespaces:
        if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
            raise DraConstructsError(name, "admin_access_namespaces", namespace, "not a namespace name (DNS label)",
                                     "name the sanitizer's namespace, e.g. dra-sanitizer")
    dra_names = sorted(set(dra_extended_resources))
    manifests: list[dict[str, Any]] = []
    for kind in _kinds(dra_names):
        if kind.section == "claims":
            validations = _claim_validations(rules)
        elif kind.section == "namespaces":
            validations = namespace_validations(rules, admin_access_namespaces)
        else:
            validations = _pod_validations(rules, dra_names)
        if not validations:
            continue
        policy_name = f"{name}-{kind.suffix}"
        labels = {"app.kubernetes.io/managed-by": "dra-constructs", "app.kubernetes.io/component": "guardrails"}
        manifests.append({
            "apiVersion": _API,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": policy_name, "labels": labels},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [dict(r) for r in kind.resource_rules]},
                **({"matchConditions": [dict(c) for c in kind.match_conditions]} if kind.match_conditions else {}),
                "variables": [dict(v) for v in kind.variables],
                "validations": validations,
            },
        })
        binding_spec: dict[str, Any] = {"policyName": policy_name, "validationActions": list(validation_actions)}
        if namespaces:
            binding_spec["matchResources"] = {"namespaceSelector": {"matchExpressions": [{
                "key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(set(namespaces))}]}}
        elif excluded_namespaces:
            binding_spec["matchResources"] = {"namespaceSelector": {"matchExpressions": [{
                "key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": sorted(excluded_namespaces)}]}}
        manifests.append({
            "apiVersion": _API,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": policy_name, "labels": labels},
            "spec": binding_spec,
        })
    return manifests
