"""DRA005: containers reference claims through ``resources.claims``; names resolve; no claim unused."""

from __future__ import annotations

from collections.abc import Iterator

from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.facets import POD
from dra_constructs.guardrails.manifest import Manifest, PodView, as_dict, as_list, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity

__all__ = ["RULE"]


def _pod_hits(m: Manifest, pod: PodView, ctx: AuditContext) -> Iterator[Hit]:
    declared: dict[str, dict[str, object]] = {}
    for path, entry in pod.claims():
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            yield Hit(field_path(path, "name"), "a pod resourceClaims entry has no name")
            continue
        if name in declared:
            yield Hit(field_path(path, "name"), f"pod claim {name!r} is declared twice in resourceClaims")
        declared[name] = entry
        sources = [k for k in ("resourceClaimName", "resourceClaimTemplateName") if entry.get(k)]
        if len(sources) != 1 and "source" not in entry:  # ``source:`` is DRA007's finding
            yield Hit(path, f"pod claim {name!r} must name exactly one of resourceClaimTemplateName and "
                            f"resourceClaimName (it names {len(sources)})",
                      fix="set resourceClaimTemplateName (one claim per pod) or resourceClaimName (a shared claim)")
        yield from _other_namespace(m, path, entry, ctx)
    used: set[str] = set()
    for path, container in pod.containers():
        listed: set[tuple[str, str | None]] = set()
        for i, ref in enumerate(as_list(as_dict(container.get("resources")).get("claims"))):
            ref = as_dict(ref)
            ref_path = field_path(path, "resources", "claims", i)
            name = ref.get("name")
            cname = container.get("name")
            request = ref.get("request") or None
            key = (name, request) if isinstance(name, str) and isinstance(request, (str, type(None))) else None
            if key is not None and key in listed:
                shown = f"{name}/{request}" if request else name
                yield Hit(ref_path, f"container {cname!r} lists claim {shown!r} twice in resources.claims: the API "
                                    "server rejects the duplicate",
                          fix="list each claim (or claim request) once per container; two claims that should "
                              "differ need different names in spec.resourceClaims")
                continue
            if key is not None:
                listed.add(key)
            if not isinstance(name, str) or name not in declared:
                known = ", ".join(sorted(declared)) or "none"
                yield Hit(field_path(ref_path, "name"),
                          f"container {cname!r} references claim {name!r}, which is not in the pod's "
                          f"resourceClaims (declared: {known})",
                          fix="add the claim to spec.resourceClaims or fix the name in resources.claims")
                continue
            used.add(name)
            request = ref.get("request")
            if isinstance(request, str) and request:
                source = ctx.claim_source(m, declared[name])
                if source is not None and request not in source.request_names():
                    yield Hit(field_path(ref_path, "request"),
                              f"container {cname!r} asks for request {request!r} of claim {name!r}, but "
                              f"{source.kind} {source.name!r} has requests {sorted(source.request_names())}",
                              fix="use one of the request names of the claim (or drop request: for all)")
    for path, entry in pod.claims():
        name = entry.get("name")
        if isinstance(name, str) and name and name not in used:
            yield Hit(path, f"pod claim {name!r} is allocated but no container lists it in resources.claims, "
                            "so no container gets the device")
            used.add(name)  # report a duplicated name once


def _other_namespace(m: Manifest, path: str, entry: dict[str, object], ctx: AuditContext) -> Iterator[Hit]:
    """A template that is not in the pod's namespace, while its file (at synth: the App) has it in another
    one. (A ResourceClaim of another namespace is DRA006's: sharing across namespaces.)"""
    ref = entry.get("resourceClaimTemplateName")
    if not isinstance(ref, str):
        return
    elsewhere = ctx.namespaces_elsewhere("ResourceClaimTemplate", m.namespace, ref, m.file)
    if elsewhere:
        yield Hit(field_path(path, "resourceClaimTemplateName"),
                  f"ResourceClaimTemplate {ref!r} is not in the pod's namespace {m.namespace!r} but in "
                  f"{', '.join(map(repr, elsewhere))}: a pod can only use templates of its own namespace "
                  "(it would stay Pending)",
                  fix=f"create the template in namespace {m.namespace!r}, or move the workload to its namespace")


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    for pod in m.pods:
        yield from _pod_hits(m, pod, ctx)


RULE = Rule(
    id="DRA005",
    name="container-claim-references",
    severity=Severity.ERROR,
    why="the kubelet exposes a claimed device only to containers listing the claim in resources.claims; "
        "unknown names are rejected and unused claims hold devices nobody uses",
    fix="for every spec.resourceClaims[].name add resources.claims: [{name: <claim>}] to the container "
        "that uses the device, and reference only declared claims",
    object_check=_check,
    # facets: reads its pods' claims and containers only
    fires_on=POD,
)
