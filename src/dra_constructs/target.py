"""The target Kubernetes version and everything derived from it.

This is the only module that branches on Kubernetes versions. Every other module asks a
:class:`Target` a question (which API version, which CEL variables, which labels) instead of
comparing version strings. Facts: ``shared/reference/dra-api.md`` sections 1, 3, 4, 5, 7, 8.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from dra_constructs.errors import DraConstructsError
from dra_constructs.target_gates import FEATURE_GATES, GateFact

__all__ = [
    "API_VERSIONS",
    "DEFAULT_KUBERNETES_VERSION",
    "DRA_FIELDS",
    "FEATURE_GATES",
    "SUPPORTED_MINORS",
    "ApiVersionFact",
    "DraFieldFact",
    "GateFact",
    "RbacRule",
    "Target",
]

#: Oldest and newest Kubernetes minor the library can emit for (1.32 brought v1beta1; the
#: newest is the newest schema ``kubernetes-validate`` ships).
SUPPORTED_MINORS = range(32, 38)
DEFAULT_KUBERNETES_VERSION = "1.32"

_VERSION_RE = re.compile(r"^v?1\.(\d+)(?:\.(\d+))?$")


# --- API lifecycle facts (shared/reference/dra-2026.md, dra-api.md sections 1, 4, 8) -------------


@dataclass(frozen=True)
class ApiVersionFact:
    """When one ``group/version`` of a set of kinds exists, is deprecated and is removed (minors).

    ``served_by_default``: the first minor whose API server serves it without ``--runtime-config``
    and feature gates (``None``: never, in the supported releases).
    """

    api_version: str
    kinds: frozenset[str]
    introduced: int
    deprecated: int | None = None
    removed: int | None = None
    served_by_default: int | None = None


_DRA_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "ResourceSlice"})

#: ``resource.k8s.io`` versions of the DRA kinds (the v1alpha3 claim kinds are DRA007's: removed shapes).
#: Served by default: only ``v1`` (the beta versions need ``--runtime-config`` on every release,
#: dra-api.md 1.1; DeviceTaintRule ``v1beta2`` also the DRADeviceTaintRules gate, off in 1.36);
#: ``tests/controlplane/test_served_versions.py`` reads discovery of default 1.34 and 1.37 API servers.
API_VERSIONS: tuple[ApiVersionFact, ...] = (
    ApiVersionFact("resource.k8s.io/v1beta1", _DRA_KINDS, introduced=32, deprecated=35, removed=38),
    ApiVersionFact("resource.k8s.io/v1beta2", _DRA_KINDS, introduced=33, deprecated=36, removed=39),
    ApiVersionFact("resource.k8s.io/v1", _DRA_KINDS, introduced=34, served_by_default=34),
    ApiVersionFact("resource.k8s.io/v1alpha3", frozenset({"DeviceTaintRule"}), introduced=33, deprecated=36,
                   removed=39),
    ApiVersionFact("resource.k8s.io/v1beta2", frozenset({"DeviceTaintRule"}), introduced=36),
    ApiVersionFact("resource.k8s.io/v1", frozenset({"DeviceTaintRule"}), introduced=37, served_by_default=37),
)


@dataclass(frozen=True)
class DraFieldFact:
    """A DRA API field that appeared (or disappeared) in a given minor, behind a feature gate.

    ``default_on`` is the first minor whose default feature gates enable it (``None``: not yet).
    """

    field: str
    introduced: int
    feature_gate: str | None = None
    default_on: int | None = None
    removed: int | None = None

    def describe(self) -> str:
        """``"added in 1.34 (DRAConsumableCapacity, alpha; on by default from 1.36)"``."""
        if self.feature_gate is None:
            return f"added in 1.{self.introduced}"
        on = f"on by default from 1.{self.default_on}" if self.default_on else "off by default"
        return f"added in 1.{self.introduced} ({self.feature_gate}; {on})"


def _fields(*facts: DraFieldFact) -> dict[str, DraFieldFact]:
    return {fact.field: fact for fact in facts}


#: Fields newer than 1.32 (KEP-4816, 5055, 5075, 4815, 5007, 5004). Keys are the rule's field ids.
DRA_FIELDS: dict[str, DraFieldFact] = _fields(
    DraFieldFact("request.firstAvailable", 33, "DRAPrioritizedList", 34),
    DraFieldFact("request.tolerations", 33, "DRADeviceTaints", 36),
    DraFieldFact("request.capacity", 34, "DRAConsumableCapacity", 36),
    DraFieldFact("constraint.distinctAttribute", 34, "DRAConsumableCapacity", 36),
    DraFieldFact("deviceClass.extendedResourceName", 34, "DRAExtendedResource", 36),
    DraFieldFact("slice.sharedCounters", 33, "DRAPartitionableDevices", 36),
    DraFieldFact("slice.perDeviceNodeSelection", 33, "DRAPartitionableDevices", 36),
    DraFieldFact("device.consumesCounters", 33, "DRAPartitionableDevices", 36),
    DraFieldFact("device.nodeName", 33, "DRAPartitionableDevices", 36),
    DraFieldFact("device.nodeSelector", 33, "DRAPartitionableDevices", 36),
    DraFieldFact("device.allNodes", 33, "DRAPartitionableDevices", 36),
    DraFieldFact("device.taints", 33, "DRADeviceTaints", 36),
    DraFieldFact("device.bindsToNode", 34, "DRADeviceBindingConditions", 36),
    DraFieldFact("device.bindingConditions", 34, "DRADeviceBindingConditions", 36),
    DraFieldFact("device.bindingFailureConditions", 34, "DRADeviceBindingConditions", 36),
    DraFieldFact("device.allowMultipleAllocations", 34, "DRAConsumableCapacity", 36),
    DraFieldFact("capacity.requestPolicy", 34, "DRAConsumableCapacity", 36),
    DraFieldFact("taint.effect.None", 35, "DRADeviceTaints", 36),
    DraFieldFact("deviceTaintRule.deviceSelector.deviceClassName", 33, "DRADeviceTaints", None, removed=35),
    DraFieldFact("deviceTaintRule.deviceSelector.selectors", 33, "DRADeviceTaints", None, removed=35),
)


@dataclass(frozen=True)
class RbacRule:
    """One RBAC ``PolicyRule`` (``resourceNames`` empty: every name)."""

    api_group: str
    resource: str
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()

    def manifest(self) -> dict[str, list[str]]:
        """The rule as it goes into a (Cluster)Role's ``rules``."""
        rule = {"apiGroups": [self.api_group], "resources": [self.resource], "verbs": list(self.verbs)}
        if self.resource_names:
            rule["resourceNames"] = list(self.resource_names)
        return rule


@dataclass(frozen=True)
class Target:
    """A Kubernetes version the emitted manifests must be valid for.

    ``patch`` is ``None`` for "the latest patch release of that minor".
    """

    minor: int = 32
    patch: int | None = None

    @classmethod
    def parse(cls, version: str | Target | None, where: str = "target") -> Target:
        """Parse ``"1.32"``, ``"v1.33"`` or ``"1.32.3"``; ``None`` gives the default (1.32)."""
        if isinstance(version, Target):
            return version
        if version is None:
            version = DEFAULT_KUBERNETES_VERSION
        match = _VERSION_RE.match(str(version).strip())
        if not match:
            raise DraConstructsError(
                where, "kubernetesVersion", version, "not a Kubernetes version",
                'write "1.MINOR" or "1.MINOR.PATCH", for example "1.32" or "1.34"',
            )
        minor = int(match.group(1))
        patch = int(match.group(2)) if match.group(2) is not None else None
        if minor not in SUPPORTED_MINORS:
            raise DraConstructsError(
                where, "kubernetesVersion", version,
                f"dra-constructs supports Kubernetes 1.{SUPPORTED_MINORS.start} to "
                f"1.{SUPPORTED_MINORS.stop - 1} (resource.k8s.io/v1beta1 appeared in 1.32)",
                f"pick a version between 1.{SUPPORTED_MINORS.start} and 1.{SUPPORTED_MINORS.stop - 1}",
            )
        return cls(minor=minor, patch=patch)

    def __str__(self) -> str:
        return f"1.{self.minor}" if self.patch is None else f"1.{self.minor}.{self.patch}"

    # --- resource.k8s.io -------------------------------------------------------------------

    @cached_property
    def resource_version(self) -> str:
        """The ``resource.k8s.io`` version emitted: v1beta1 (1.32), v1beta2 (1.33), v1 (1.34+)."""
        if self.minor == 32:
            return "v1beta1"
        if self.minor == 33:
            return "v1beta2"
        return "v1"

    @cached_property
    def resource_api_version(self) -> str:
        """``apiVersion`` of ResourceClaimTemplates and other DRA objects we emit."""
        return f"resource.k8s.io/{self.resource_version}"

    @property
    def wraps_requests_in_exactly(self) -> bool:
        """v1beta2 and v1 put a request's class, selectors and count under ``exactly``."""
        return self.resource_version != "v1beta1"

    @property
    def has_first_available(self) -> bool:
        """``firstAvailable`` prioritized lists (DRAPrioritizedList) exist from 1.33."""
        return self.minor >= 33

    @property
    def has_request_tolerations(self) -> bool:
        """Device tolerations on requests (DRADeviceTaints) exist from 1.33."""
        return self.minor >= 33

    @property
    def reserved_for_max(self) -> int:
        """``status.reservedFor`` limit: 32 in 1.32, 256 from 1.33."""
        return 32 if self.minor == 32 else 256

    @property
    def has_dra_extended_resources(self) -> bool:
        """DeviceClass ``extendedResourceName`` (KEP-5004) is on by default: beta from 1.36, GA 1.37.

        Alpha (off by default) in 1.34-1.35. Where it is on, ResourceQuota ``requests.<name>`` of a
        DRA-backed extended resource (and the implicit ``deviceclass.resource.kubernetes.io/<class>``)
        counts the devices of that class, so a tenant quota must cap those names too.
        """
        return self.dra_extended_resources_on_by_default

    @property
    def supports_kueue_dra(self) -> bool:
        """Kueue's DRA integration (v0.18+) needs ``resource.k8s.io/v1``: Kubernetes 1.34 or later."""
        return self.minor >= 34

    @property
    def supports_kueue_counter_quota(self) -> bool:
        """Kueue's counter-based quota (``deviceClassMappings[].sources[].counter``) needs 1.35+.

        Kueue's docs (``concepts/dynamic_resource_allocation.md``, v0.19: "Kubernetes 1.35 or later
        with the DRAPartitionableDevices feature gate enabled (beta in Kubernetes 1.36)"): devices
        consuming counters, read from ``resource.k8s.io/v1`` ResourceSlices in the 1.35 split layout.
        """
        return self.minor >= 35

    # --- CEL environment -------------------------------------------------------------------

    @property
    def cel_has_allow_multiple_allocations(self) -> bool:
        """Whether ``device.allowMultipleAllocations`` is declared with default feature gates.

        The DRA compiler declares it only while DRAConsumableCapacity is on: alpha (off by
        default) in 1.34-1.35, beta (on) from 1.36. An API server of 1.34 with default gates
        rejects a selector that reads it (``check(..., allow_multiple_allocations=True)`` models
        a server with the gate on).
        """
        return self.minor >= 36

    @property
    def cel_list_type_attributes(self) -> bool:
        """Whether attribute values may be lists (DRAListTypeAttributes) with default feature gates.

        The gate is alpha (off) from 1.36 and still alpha in 1.37, so no supported version has it
        on by default. With it, compile.go types attribute values ``dyn`` instead of ``any``
        (comprehensions over them compile, a ``dyn`` result is accepted) and declares
        ``includes()`` (introduced 1.36, so usable from the 1.37 API server).
        """
        return False

    @property
    def cel_cost_estimator_bug(self) -> bool:
        """1.32.0-1.32.2 had no size estimator: attribute strings count as unbounded."""
        return self.minor == 32 and self.patch is not None and self.patch < 3

    # The API server checks a *new* selector against the CEL environment of its compatibility
    # version, one minor below its own (``environment.NewExpressions`` with
    # ``DefaultCompatibilityVersion()``): a library "introduced" in 1.N is usable from 1.N+1.
    # Sources: kubernetes/apiserver pkg/cel/environment/base.go, component-base compatibility,
    # kubernetes/dynamic-resource-allocation cel/compile.go, go.mod (cel-go version).

    @property
    def cel_has_two_var_comprehensions(self) -> bool:
        """``all(i, v, ...)``, ``transformList`` and friends (introduced 1.32, usable from 1.33)."""
        return self.minor >= 33

    @property
    def cel_semver_normalize(self) -> bool:
        """``semver(s, true)`` / ``isSemver(s, true)`` (semver library v1: introduced 1.33)."""
        return self.minor >= 34

    @property
    def cel_has_ext_lists(self) -> bool:
        """cel-go's lists extension v3 (``slice``, ``flatten``, ``sort``...; introduced 1.34)."""
        return self.minor >= 35

    @property
    def cel_optional_library_version(self) -> int:
        """cel-go optional library: v1 in cel-go 0.22 (1.32); v2 (``first``, ``unwrap``) from 0.23."""
        return 1 if self.minor == 32 else 2

    @property
    def cel_cost_tracks_local_sizes(self) -> bool:
        """cel-go >= 0.23 (1.33+) estimates sizes of bound and iteration variables."""
        return self.minor >= 33

    @property
    def cel_cost_semver_functions(self) -> bool:
        """Kubernetes' cost estimator prices ``semver()`` by length from 1.33 (cost.go)."""
        return self.minor >= 33

    @property
    def cel_knows_ident_escape_syntax(self) -> bool:
        """cel-go >= 0.23 (1.33+) parses backtick identifiers, then rejects them (not enabled)."""
        return self.minor >= 33

    @property
    def cel_declares_ip_cidr_type_names(self) -> bool:
        """1.32's IP and CIDR libraries also declare the identifiers ``net.IP`` and ``net.CIDR``."""
        return self.minor == 32

    # --- admin access ----------------------------------------------------------------------

    @property
    def admin_access_namespace_labels(self) -> tuple[str, ...]:
        """Namespace labels that allow ``adminAccess`` claims (value ``"true"``).

        1.33 checks ``resource.k8s.io/admin-access``, 1.34+ ``resource.kubernetes.io/admin-access``;
        both are set through 1.34 so an upgrade across the rename never breaks the namespace.
        """
        if self.minor <= 34:
            return ("resource.k8s.io/admin-access", "resource.kubernetes.io/admin-access")
        return ("resource.kubernetes.io/admin-access",)

    # --- device taints ---------------------------------------------------------------------

    @property
    def device_taint_rule_api_version(self) -> str | None:
        """``apiVersion`` of DeviceTaintRule, or ``None`` where the kind does not exist (1.32)."""
        if self.minor == 32:
            return None
        if self.minor <= 35:
            return "resource.k8s.io/v1alpha3"
        if self.minor == 36:
            return "resource.k8s.io/v1beta2"
        return "resource.k8s.io/v1"

    @property
    def device_taint_rules_served_by_default(self) -> bool:
        """Whether a default API server serves DeviceTaintRule: from 1.37 (GA, ``v1``).

        Before, the kind needs gates and an API version turned on: 1.33-1.34 DRADeviceTaints (alpha) and
        ``--runtime-config`` for v1alpha3; 1.35 DRADeviceTaintRules (alpha); 1.36 DRADeviceTaintRules
        (beta but off by default) and ``resource.k8s.io/v1beta2`` (``target_gates``).
        """
        return self.device_taint_rule_api_version is not None and self.gate_on_by_default("DRADeviceTaintRules")

    @property
    def device_taint_rule_has_cel_selectors(self) -> bool:
        """1.35 removed ``deviceClassName`` and ``selectors`` from the rule's deviceSelector."""
        return self.minor in (33, 34)

    @property
    def device_taint_effects(self) -> tuple[str, ...]:
        """Valid device taint effects (``None`` is informational, added in 1.35)."""
        return ("NoSchedule", "NoExecute") if self.minor < 35 else ("None", "NoSchedule", "NoExecute")

    # --- partitionable devices, feature gates, inventory shape -----------------------------

    @property
    def has_partitionable_devices(self) -> bool:
        """ResourceSlice ``sharedCounters`` / device ``consumesCounters`` exist (KEP-4815, alpha 1.33)."""
        return self.minor >= 33

    @property
    def distinct_attribute_compares_values(self) -> bool:
        """``distinctAttribute`` refuses a repeated value from 1.35; the 1.34 allocator compares the
        values' pointers (``attribute.StringValue == attr.StringValue``), so only a device without
        the attribute is refused there."""
        return self.minor >= 35

    @property
    def allocator_skips_incomplete_pools(self) -> bool:
        """From 1.35 an ``ExactCount`` request takes no device of an incomplete pool (one whose slice
        count differs from ``resourceSliceCount``); through 1.34 it does (only ``All`` fails on one)."""
        return self.minor >= 35

    @property
    def allocator_keeps_refused_counters(self) -> bool:
        """The scheduler's allocator leaves the counters of a device it refused after the counter
        check (taint, constraint) consumed for the rest of the allocation: through 1.35 (and
        1.36.0-1.36.2); from 1.36.3 ``allocateDevice`` rolls them back (``rollbackDevice``). A
        target without a patch release is the newest one."""
        return self.minor <= 35 or (self.minor == 36 and self.patch is not None and self.patch <= 2)

    @property
    def shared_devices_charge_counters_once(self) -> bool:
        """A shared device (``allowMultipleAllocations``) already in use charges its counters no
        second time (``skipCounterCheck`` in ``allocateDevice``, from 1.35; in 1.34 every share does)."""
        return self.minor >= 35

    @property
    def allocator_charges_committed_share_counters(self) -> bool:
        """Counters of a device held only by committed shares (``shareID`` results of other claims)
        are subtracted once from the pool's counter sets: from 1.36.2 (``internal.IsDeviceAllocated``
        in ``checkAvailableCounters``, ``k8s.io/dynamic-resource-allocation`` v0.36.2, kubernetes
        d2c2de72); earlier releases (1.35.x, 1.36.0-1) count dedicated results only and overdraw."""
        return self.minor >= 37 or (self.minor == 36 and (self.patch is None or self.patch >= 2))

    @property
    def counter_sets_in_own_slice(self) -> bool:
        """From 1.35 a slice with ``sharedCounters`` holds no devices (the NVIDIA driver splits them)."""
        return self.minor >= 35

    @property
    def allocator_sorts_pools(self) -> bool:
        """From 1.36 the allocator orders a node's pools by driver and name (those with binding
        conditions last) and each pool's slices by name (``GatherPools``/``buildPool``); before, in
        Go map order (none defined)."""
        return self.minor >= 36

    @property
    def default_mig_mode(self) -> str:
        """``"dynamic"`` where DRAPartitionableDevices is on by default (beta, 1.36+), else ``"static"``."""
        return "dynamic" if self.minor >= 36 else "static"

    def check_mig_mode(self, mode: str | None, where: str) -> str:
        """The MIG inventory shape for this target: ``mode`` if valid here, else the default."""
        if mode is None:
            return self.default_mig_mode
        if mode not in ("dynamic", "static"):
            raise DraConstructsError(where, "mig_mode", mode, "not a MIG inventory shape",
                                     'write "dynamic" (DynamicMIG: counters) or "static" (pre-created MIG devices)')
        if mode == "dynamic" and not self.has_partitionable_devices:
            raise DraConstructsError(where, "mig_mode", mode,
                                     f"Kubernetes {self} has no partitionable devices (sharedCounters came in 1.33)",
                                     'use mig_mode="static", or target 1.33+ (1.33-1.35 need the '
                                     "DRAPartitionableDevices feature gate; on by default from 1.36)")
        return mode

    @property
    def default_feature_gates(self) -> dict[str, bool]:
        """The scheduler's DRA feature gates with their defaults in this release.

        Sources: kubernetes ``pkg/features/versioned_kube_features.go`` (DRAAdminAccess beta 1.34,
        DRAPrioritizedList beta 1.34, DRAPartitionableDevices / DRADeviceTaints /
        DRAConsumableCapacity / DRADeviceBindingConditions beta 1.36) and
        ``shared/reference/dra-2026.md``.
        """
        return {
            "DRAAdminAccess": self.minor >= 34,
            "DRAPrioritizedList": self.minor >= 34,
            "DRAPartitionableDevices": self.minor >= 36,
            "DRADeviceTaints": self.minor >= 36,
            "DRAConsumableCapacity": self.minor >= 36,
            "DRADeviceBindingConditions": self.minor >= 36,
            "DRAResourceClaimDeviceStatus": self.minor >= 33,
        }

    def gate(self, name: str) -> GateFact:
        """The life of DRA feature gate ``name`` (:data:`FEATURE_GATES`)."""
        fact = FEATURE_GATES.get(name)
        if fact is None:
            raise DraConstructsError("target", "feature_gate", name, "not a DRA feature gate dra-constructs knows",
                                     f"use one of {', '.join(sorted(FEATURE_GATES))}")
        return fact

    def gate_stage(self, name: str) -> str | None:
        """``"alpha"``, ``"beta"``, ``"GA"`` of gate ``name`` in this release (``None``: it does not exist yet)."""
        return self.gate(name).stage(self.minor)

    def gate_on_by_default(self, name: str) -> bool:
        """Whether this release's default feature gates enable ``name``."""
        return self.gate(name).on_by_default(self.minor)

    @property
    def claim_device_status_ga(self) -> bool:
        """ResourceClaim ``status.devices`` (DRAResourceClaimDeviceStatus) is GA from 1.37 (beta, on, 1.33-1.36)."""
        return self.gate_stage("DRAResourceClaimDeviceStatus") == "GA"

    @property
    def dra_extended_resources_ga(self) -> bool:
        """Extended resources served by DRA (DRAExtendedResource) are GA from 1.37 (beta, on, in 1.36)."""
        return self.gate_stage("DRAExtendedResource") == "GA"

    @property
    def claim_status_authorization_is_granular(self) -> bool:
        """From 1.36 (DRAResourceClaimGranularStatusAuthorization, beta, on) ``resourceclaims/status``
        is not enough: ``status.devices`` also needs ``resourceclaims/driver``, ``status.allocation``
        and ``status.reservedFor`` also ``resourceclaims/binding``."""
        return self.gate_on_by_default("DRAResourceClaimGranularStatusAuthorization")

    def claim_status_writer_rules(self, driver: str, *, node_local: bool = True,
                                  allocation: bool = False) -> tuple[RbacRule, ...]:
        """The ClusterRole rules a writer of ResourceClaim ``status.devices`` of ``driver`` needs here.

        From 1.36 the API server checks, per driver whose entries change, the verb
        ``associated-node:<verb>`` (a ServiceAccount whose token is bound to the claim's node, such
        as a kubelet plugin's) or else ``arbitrary-node:<verb>`` on the synthetic subresource
        ``resourceclaims/driver`` named by the driver; ``allocation`` adds
        ``resourceclaims/binding`` (changing ``status.allocation`` / ``status.reservedFor``).
        Source: kubernetes v1.37.2 ``pkg/registry/resource/utils.go`` (``AuthorizedForDeviceStatus``,
        ``AuthorizedForBinding``); tested against the real API servers of 1.34 and 1.37.
        """
        rules = [RbacRule("resource.k8s.io", "resourceclaims/status", ("get", "patch", "update"))]
        if self.claim_status_authorization_is_granular:
            prefix = "associated-node:" if node_local else "arbitrary-node:"
            rules.append(RbacRule("resource.k8s.io", "resourceclaims/driver", (f"{prefix}patch", f"{prefix}update"),
                                  (driver,)))
            if allocation:
                rules.append(RbacRule("resource.k8s.io", "resourceclaims/binding", ("patch", "update")))
        return tuple(rules)

    @property
    def known_feature_gates(self) -> frozenset[str]:
        """Gates the ``fit`` command accepts (those that exist in this release or are GA)."""
        return frozenset(self.default_feature_gates)

    @property
    def has_distinct_attribute(self) -> bool:
        """``constraints[].distinctAttribute`` (with DRAConsumableCapacity, 1.34+)."""
        return self.minor >= 34

    # --- API lifecycle (DRA011) --------------------------------------------------------------

    def api_version_fact(self, api_version: str, kind: str) -> ApiVersionFact | None:
        """The lifecycle facts of ``kind`` in ``api_version`` (``None``: not a versioned DRA kind)."""
        for fact in API_VERSIONS:
            if fact.api_version == api_version and kind in fact.kinds:
                return fact
        return None

    def served_by_default(self, api_version: str, kind: str) -> bool:
        """Whether this release's API server serves ``kind`` in ``api_version`` without extra flags."""
        fact = self.api_version_fact(api_version, kind)
        if fact is None or fact.served_by_default is None or self.minor < fact.served_by_default:
            return False
        return fact.removed is None or self.minor < fact.removed

    def has_dra_field(self, field: str) -> bool:
        """Whether the API server of this target knows ``field`` (a key of :data:`DRA_FIELDS`)."""
        fact = DRA_FIELDS[field]
        return fact.introduced <= self.minor and (fact.removed is None or self.minor < fact.removed)

    # --- extended resources served by DRA (KEP-5004) ---------------------------------------

    @property
    def dra_extended_resources_exist(self) -> bool:
        """DeviceClass ``extendedResourceName`` and the implicit ``deviceclass.resource.kubernetes.io/<class>``.

        The field and the scheduler's mapping exist from 1.34 (DRAExtendedResource: alpha 1.34-1.35,
        beta and on by default 1.36, GA 1.37); before 1.34 a Pod asking for such a name is served by
        a device plugin or by nothing.
        """
        return self.has_dra_field("deviceClass.extendedResourceName")

    @property
    def dra_extended_resources_on_by_default(self) -> bool:
        """Whether default feature gates map extended resources to DRA (1.36+)."""
        return self.minor >= (DRA_FIELDS["deviceClass.extendedResourceName"].default_on or 99)

    # --- topology alignment ----------------------------------------------------------------

    def topology_attribute(self, on: str) -> str:
        """The fully qualified attribute a ``matchAttribute`` alignment ``on`` compares.

        - ``pcieRoot``: ``resource.kubernetes.io/pcieRoot`` (string ``pci<domain>:<bus>``), the
          standard attribute of ``k8s.io/dynamic-resource-allocation/deviceattribute``, published
          by the NVIDIA driver on GPUs and MIG devices and by network drivers on NICs;
        - ``numaNode``: ``resource.kubernetes.io/numaNode`` (int). The name became a standard
          constant in 1.37's ``deviceattribute`` package, but an attribute name is only a string in
          the ResourceSlice: no API server version checks it, so every supported target compares
          the same name. Which NVIDIA driver release publishes it (only main, after v0.4) is
          :mod:`dra_constructs.catalog.driver_versions`; claims checked against the catalog refuse
          alignments the declared release (``set_nvidia_driver_version``) cannot meet.
          The list form (``IntValues``) needs DRAListTypeAttributes, off by default on every target;
          the catalog publishes the scalar;
        - ``parentGPU``: ``gpu.nvidia.com/parentUUID`` (MIG devices only).
        """
        names = {"pcieRoot": "resource.kubernetes.io/pcieRoot", "numaNode": "resource.kubernetes.io/numaNode",
                 "parentGPU": "gpu.nvidia.com/parentUUID"}
        if on not in names:
            raise DraConstructsError("target", "align.on", on, "not a topology alignment",
                                     f"use one of {', '.join(names)}")
        return names[on]

    # --- schema ----------------------------------------------------------------------------

    @property
    def schema_version(self) -> str:
        """The ``kubernetes-validate`` schema folder for this target, e.g. ``"1.32.0"``."""
        return f"1.{self.minor}.0"
