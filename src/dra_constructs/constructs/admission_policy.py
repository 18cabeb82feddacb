"""``GuardrailsAdmissionPolicy``: the per-object rules as ValidatingAdmissionPolicies in the cluster.

Construct layer (imports cdk8s). The manifests come from :mod:`.policy` (pure Python); this
construct only places them in a chart as ``ApiObject``\\ s with fixed names (the bindings refer
to the policies by name).
"""

from __future__ import annotations

from collections.abc import Sequence

import cdk8s
import constructs

from dra_constructs.constructs.scope import resolve_dra_extended_resources
from dra_constructs.guardrails.policy import POLICY_RULES, admission_policy_manifests

__all__ = ["GuardrailsAdmissionPolicy"]


class GuardrailsAdmissionPolicy(constructs.Construct):
    """ValidatingAdmissionPolicy + binding pairs (``admissionregistration.k8s.io/v1``, GA since 1.30).

    Pods and the pod templates of Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs,
    ReplicationControllers and CronJobs are checked for DRA001, DRA002, DRA005, DRA006, DRA007,
    DRA008 and DRA020; ResourceClaims and ResourceClaimTemplates for DRA003, DRA006, DRA007 and
    DRA017; Namespaces for DRA019 (the admin-access label).

    :param name: prefix of the policy names (``<name>-pods``, ``-workloads``, ``-cronjobs``,
        ``-claims``, ``-namespaces``). Default: ``dra-guardrails``.
    :param rules: the rule ids to enforce. Default: all of ``POLICY_RULES``.
    :param validation_actions: binding actions. Default: ``("Deny",)``; ``("Warn", "Audit")``
        observes without refusing.
    :param excluded_namespaces: namespaces the bindings skip (node agents, the driver).
        Default: ``("kube-system",)``.
    :param dra_extended_resources: extended resource names the cluster serves through DRA, which
        DRA001 must not refuse (``deviceclass.resource.kubernetes.io/*`` never is). Default: the
        names of the App's ``set_dra_extended_resources``. Names mapped by a DeviceClass you ship
        in the App must be declared there too.
    :param namespaces: bind only to these namespaces (e.g. a tenant's). Default: all but the excluded.
    :param admin_access_namespaces: Namespaces allowed to carry the admin-access label (DRA019; no
        suppression annotation lifts it). Default: none (the sanitizer's agent needs no admin access).
    """

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        *,
        name: str = "dra-guardrails",
        rules: Sequence[str] = POLICY_RULES,
        validation_actions: Sequence[str] = ("Deny",),
        excluded_namespaces: Sequence[str] = ("kube-system",),
        dra_extended_resources: Sequence[str] | None = None,
        namespaces: Sequence[str] = (),
        admin_access_namespaces: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, id)
        names = list(resolve_dra_extended_resources(scope)) if dra_extended_resources is None else list(
            dra_extended_resources)
        #: The emitted manifests as plain dicts (policies and bindings, in order).
        self.manifests = admission_policy_manifests(
            name, rules=rules, validation_actions=validation_actions, excluded_namespaces=excluded_namespaces,
            dra_extended_resources=names,
            namespaces=namespaces, admin_access_namespaces=admin_access_namespaces,
        )
        for manifest in self.manifests:
            kind = manifest["kind"]
            metadata = manifest["metadata"]
            suffix = "binding" if kind.endswith("Binding") else "policy"
            api_object = cdk8s.ApiObject(
                self,
                f"{metadata['name']}-{suffix}",
                api_version=manifest["apiVersion"],
                kind=kind,
                metadata=cdk8s.ApiObjectMetadata(name=metadata["name"], labels=metadata["labels"]),
            )
            api_object.add_json_patch(cdk8s.JsonPatch.add("/spec", manifest["spec"]))
