"""Run the rule pack over a manifest set and apply suppressions (pure Python)."""

from __future__ import annotations

import dataclasses
import heapq
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from dra_constructs._progress import Progress
from dra_constructs._safe_load import no_gc
from dra_constructs.guardrails.context import AuditContext, Group
from dra_constructs.guardrails.facets import facets
from dra_constructs.guardrails.manifest import Manifest, as_dict
from dra_constructs.guardrails.model import SAMPLE_SIZE, Finding, Hit, ObjectCheck, Rule, Severity, SuppressedFinding
from dra_constructs.guardrails.resources import parse_dra_extended_resources
from dra_constructs.guardrails.rules import RULES, RULES_BY_ID
from dra_constructs.guardrails.shape_key import shape_key
from dra_constructs.guardrails.suppressions import SUPPRESSIONS_ANNOTATION, UNSUPPRESSIBLE, parse_suppressions
from dra_constructs.target import Target

__all__ = ["AuditResult", "audit"]


@dataclass(frozen=True)
class AuditResult:
    """What an audit found: open findings (sorted) and the ones suppressions silenced."""

    objects_scanned: int
    findings: tuple[Finding, ...]
    suppressed: tuple[SuppressedFinding, ...]

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity is Severity.ERROR)

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity is Severity.WARNING)

    def to_dict(self) -> dict[str, Any]:
        """The audit's JSON document."""
        return {
            "objects_scanned": self.objects_scanned,
            "findings": [f.to_dict() for f in self.findings],
            "suppressed": [s.to_dict() for s in self.suppressed],
        }


def _suppressions(m: Manifest) -> dict[str, str]:
    """Valid suppressions of an object (its own annotation, plus its pod template's)."""
    merged: dict[str, str] = {}
    places = [m.metadata] + [pod.metadata for pod in m.pods if pod.metadata is not m.metadata]
    for metadata in places:
        value = as_dict(metadata.get("annotations")).get(SUPPRESSIONS_ANNOTATION)
        if value is not None:
            merged.update(parse_suppressions(value, RULES_BY_ID)[0])
    return merged


_SortKey = tuple[str, int, int, int, str, str]


def _sort_key(rule: Rule, m: Manifest, hit: Hit) -> _SortKey:
    """What findings are ordered by (:attr:`Finding.sort_key`)."""
    return m.file or "", m.line or 0, m.position, (hit.severity or rule.severity).rank, rule.id, hit.path


def _finding(rule: Rule, m: Manifest, hit: Hit) -> Finding:
    severity = hit.severity or rule.severity
    return Finding(
        sort_key=_sort_key(rule, m, hit),
        rule=rule.id,
        severity=severity,
        object=m.object_id,
        kind=m.kind,
        namespace=m.display_namespace,
        name=m.name,
        file=m.file,
        line=m.line,
        path=hit.path,
        message=hit.message,
        fix=hit.fix or rule.fix,
        details=hit.details,
    )


def _as_manifests(objects: Iterable[Manifest | dict[str, Any]]) -> list[Manifest]:
    given = list(objects)
    # The loaders' lists (Manifests with positions): a Python step only for an object without a position.
    odd = [i for i, m in enumerate(given) if type(m) is not Manifest or not m.position]
    if all(type(given[i]) is Manifest for i in odd):
        manifests = cast(list[Manifest], given)
        for position in odd:
            manifests[position].position = position
        return manifests
    manifests = []
    for position, obj in enumerate(given):
        if isinstance(obj, Manifest):
            obj.position = obj.position or position
            manifests.append(obj)
        else:
            manifests.append(Manifest(obj, position=position))
    return manifests


def audit(
    objects: Iterable[Manifest | dict[str, Any]],
    *,
    kubernetes_version: str | Target | None = None,
    rules: Sequence[Rule] = RULES,
    tenant_scope: str = "set",
    dra_extended_resources: Mapping[str, str] | Iterable[str] | None = None,
    progress: Progress | None = None,
    memoize: bool = True,
) -> AuditResult:
    """Audit a manifest set (plain dicts or loaded :class:`Manifest`\\ s) against ``rules``.

    Cross-object rules see the whole set; DRA009 (tenant barrier) counts tenants in the whole set
    or, with ``tenant_scope="file"``, in each file (a sanitizer anywhere in the input covers all).
    A finding is moved to ``suppressed`` when its object carries a valid suppression of that rule;
    DRA000 (broken suppressions) is never suppressed. ``dra_extended_resources`` declares extended
    resources the cluster serves through DRA (``{"nvidia.com/gpu": "gpu.nvidia.com"}`` or
    ``["nvidia.com/gpu=gpu.nvidia.com"]``; Kubernetes 1.34+): DRA010 reports them instead of DRA001.
    ``progress`` (the command line's) is told how many objects the rules have checked.
    ``memoize`` checks workloads that differ only in identity fields once (:func:`shape_key`) and calls a
    rule only on objects with one of the facets it fires on (:mod:`~dra_constructs.guardrails.facets`);
    ``False`` checks every object on its own with every rule (same findings; the tests compare the two).
    """
    with no_gc():  # tuples by the hundred thousand, no cycles: the collector's passes would be wasted
        return _audit(objects, kubernetes_version, rules, tenant_scope, dra_extended_resources, progress, memoize)


#: Hits of one rule: ``(rule, hit, objects)``, the same hit for each of the objects (of a shape, or of a set).
_Batch = tuple[Rule, Hit, Sequence[Manifest]]
#: Open objects of a grouped hit (same rule, group, message), by batch: ``(rule, hit, objects)``.
_Open = list[tuple[Rule, Hit, Sequence[Manifest]]]


def _audit(objects: Iterable[Manifest | dict[str, Any]], kubernetes_version: str | Target | None,
           rules: Sequence[Rule], tenant_scope: str, dra_extended_resources: Mapping[str, str] | Iterable[str] | None,
           progress: Progress | None, memoize: bool) -> AuditResult:
    target = Target.parse(kubernetes_version, "audit")
    declared = parse_dra_extended_resources(dra_extended_resources, target)
    manifests = _as_manifests(objects)
    shapes, computed = _by_shape(manifests, memoize)
    # Set rules judge each shape once and report its members (``AuditContext.groups``), which changes the
    # order of hits within a rule; only the duplicate check (first hit wins) could see it, and two objects
    # are duplicates only where they share a file and line (an in-memory set, a one-line JSON list): there
    # every object is its own group and the hits come in input order, as before.
    distinct, in_order = _distinct_places(manifests)
    # Member lists of memoized shapes: a batch that is one of them is one shape's objects, each once.
    whole = {id(members) for first, members in shapes if memoize and first.shape is not None} if distinct else set()
    ctx = AuditContext(manifests, target, tenant_scope, declared, groups=shapes if distinct else None,
                       by_shape=memoize)
    for m, shape in computed:
        ctx.note_shape(m, shape)
    if progress is not None:
        progress.step("checking rules")
    batches = _object_hits(ctx, shapes, [rule for rule in rules if rule.object_check is not None], distinct,
                           progress, len(manifests), memoize)
    for rule in rules:
        if rule.set_check is not None:
            batches.extend(_set_hits(rule, ctx))
    findings: list[Finding] = []
    groups: dict[tuple[str, str, str], _Open] = {}
    suppressed: list[SuppressedFinding] = []
    # An object's suppressions read its annotations and its pods' (in its shape key): once per shape.
    cache: dict[int | bytes, dict[str, str]] = {}

    def suppressions_of(m: Manifest) -> dict[str, str]:
        slot = m.shape if memoize and m.shape is not None else id(m)
        found = cache.get(slot)
        if found is None:
            found = cache[slot] = _suppressions(m)
        return found

    seen: dict[tuple[str, str, str], _Given] = {}
    seen_named: set[tuple[str, str, str, str, str, int]] = set()
    for rule, hit, members in batches:
        # The same object in two files (or twice in one) is two places to fix: one finding each.
        if distinct:  # (objects on distinct lines are the same object only if they are one: no name to compare)
            given = seen.get((rule.id, hit.path, hit.message))
            if given is None:
                given = seen[rule.id, hit.path, hit.message] = _Given()
            fresh = given.fresh(members, id(members) in whole)
        else:
            fresh = [m for m in members if _first((rule.id, m.object_id, hit.path, hit.message, m.file or "",
                                                   m.line or 0), seen_named)]
        open_: list[Manifest] = []
        # a shape's objects (memoized), all new and unsuppressed: its suppressions are theirs, looked up once
        if fresh and fresh is members and hit.group is not None and id(members) in whole and (
                suppressions_of(fresh[0]).get(rule.id) is None or rule.id in UNSUPPRESSIBLE):
            groups.setdefault((rule.id, hit.group, hit.message), []).append((rule, hit, members))
            continue
        for m in fresh:
            reason = suppressions_of(m).get(rule.id)
            if reason is not None and rule.id not in UNSUPPRESSIBLE:
                suppressed.append(SuppressedFinding(_finding(rule, m, hit), reason))
            elif hit.group is None:
                findings.append(_finding(rule, m, hit))
            else:
                open_.append(m)
        if open_:  # a finding about the set: only its first objects become findings (``_grouped``)
            groups.setdefault((rule.id, hit.group or "", hit.message), []).append((rule, hit, open_))
    merged = findings + _grouped(groups, whole if in_order else set())
    merged.sort()
    suppressed.sort(key=lambda s: s.finding)
    return AuditResult(len(manifests), tuple(merged), tuple(suppressed))


def _object_hits(ctx: AuditContext, shapes: list[Group], object_rules: list[Rule], distinct: bool,
                 progress: Progress | None, total: int, memoize: bool) -> list[_Batch]:
    """The per-object rules' hits, checked once per shape: in batches of a shape's objects, or (where two
    objects share a line) object by object in input order. With ``memoize`` a rule is called only on objects
    with one of the facets it declares (``Rule.fires_on``); without, every rule on every object."""
    batches: list[_Batch] = []
    of_object: dict[int, list[tuple[Rule, Hit]]] = {}  # id(object) -> its shape's hits
    every = [(rule, rule.object_check) for rule in object_rules if rule.object_check is not None]
    plans: dict[int, list[tuple[Rule, ObjectCheck]]] = {}  # facets -> the rules that can fire on them
    done = 0
    for first, members in shapes:
        if progress is not None and (done + len(members)) >> 10 != done >> 10:
            progress.update(done, total)
        done += len(members)
        if memoize:  # only the rules that can fire on the object's facets (``Rule.fires_on``)
            mask = facets(first)
            plan = plans.get(mask)
            if plan is None:
                plan = plans[mask] = [(rule, check) for rule, check in every if rule.fires_on is None
                                      or rule.fires_on & mask]
            if not plan and distinct:  # (most of a cluster export: no rule can fire)
                continue
        else:
            plan = every
        hits = [(rule, hit) for rule, check in plan for hit in check(first, ctx)]
        if distinct:
            batches.extend((rule, hit, members) for rule, hit in hits)
            continue
        for m in members:
            of_object[id(m)] = hits
            if m is not first:
                m.share_listings(first)  # set rules ask each object: its listings are the first one's
    if not distinct:
        batches.extend((rule, hit, (m,)) for m in ctx.manifests for rule, hit in of_object[id(m)])
    return batches


def _set_hits(rule: Rule, ctx: AuditContext) -> Iterator[_Batch]:
    """A set rule's hits in batches: a sequence of objects it gives, or objects given one by one in a row
    with the same hit."""
    assert rule.set_check is not None
    batch: tuple[Hit, list[Manifest]] | None = None
    for target, hit in rule.set_check(ctx):
        if not isinstance(target, Manifest):
            if batch is not None:
                yield rule, batch[0], batch[1]
                batch = None
            if target:
                yield rule, hit, target
            continue
        if batch is not None and batch[0] is hit:
            batch[1].append(target)
            continue
        if batch is not None:
            yield rule, batch[0], batch[1]
        batch = hit, [target]
    if batch is not None:
        yield rule, batch[0], batch[1]


def _distinct_places(manifests: list[Manifest]) -> tuple[bool, bool]:
    """No two objects share a file and line; and the lines only grow (one file's objects in order: then they
    are distinct, without a tuple and a set entry each, and so are the lines of any objects taken in order)."""
    lines = [m.line for m in manifests]
    if _growing(lines):
        return True, True
    return len(set(zip([m.file for m in manifests], lines, strict=True))) == len(manifests), False


class _Given:
    """The objects that had one hit (rule, path, message) so far: shapes' member lists given whole, and
    objects given one by one (the first hit of an object wins; later ones are duplicates)."""

    def __init__(self) -> None:
        self.groups: set[int] = set()  # ids of member lists given whole
        self.pending: list[Sequence[Manifest]] = []  # those not yet in ``objects``
        self.objects: set[int] = set()

    def fresh(self, members: Sequence[Manifest], whole: bool) -> Sequence[Manifest]:
        """``members`` that did not have the hit before, each once (``whole``: a shape's member list)."""
        if whole:  # (member lists are disjoint: only the same list, or objects given one by one, repeat one)
            if id(members) in self.groups:
                return ()
            self.groups.add(id(members))
            if not self.objects or self.objects.isdisjoint(map(id, members)):
                self.pending.append(members)
                return members
            fresh = [m for m in members if id(m) not in self.objects]
            self.objects.update(map(id, members))
            return fresh
        for given in self.pending:
            self.objects.update(map(id, given))
        self.pending.clear()
        ids = self.objects
        if ids.isdisjoint(map(id, members)):
            count = len(ids)
            ids.update(map(id, members))
            if len(ids) - count == len(members):
                return members  # (all new, none twice: without a Python step per object)
            ids.difference_update(map(id, members))  # (all were new: ids is as it was)
        fresh = []
        for m in members:
            if id(m) not in ids:
                ids.add(id(m))
                fresh.append(m)
        return fresh


def _first(key: tuple[str, str, str, str, str, int], seen: set[tuple[str, str, str, str, str, int]]) -> bool:
    if key in seen:
        return False
    seen.add(key)
    return True


def _by_shape(manifests: list[Manifest], memoize: bool) -> tuple[list[Group], list[tuple[Manifest, bytes]]]:
    """The manifests by shape key (``Manifest.shape``, or ``shape_key``) in the order shapes first appear, an
    object without a key (``memoize=False``: every object) a group of its own; and the keys computed here."""
    groups: list[Group] = []
    computed: list[tuple[Manifest, bytes]] = []
    by_key: dict[bytes, list[Manifest]] = {}
    for m in manifests:
        shape = None
        if memoize:
            shape = m.shape
            if shape is None:
                shape = shape_key(m)
                if shape is not None:
                    computed.append((m, shape))
        if shape is None:
            groups.append((m, (m,)))
            continue
        members = by_key.get(shape)
        if members is None:
            members = by_key[shape] = [m]
            groups.append((m, members))
        else:
            members.append(m)
    return groups, computed


def _grouped(groups: dict[tuple[str, str, str], _Open], in_order: set[int]) -> list[Finding]:
    """Open hits of grouped rules (same rule, group, message) merged into one finding with count and sample.

    Suppressions apply per object before this: a suppressed object leaves the count. The finding
    is its first object's (in finding order); findings are built only for the sample: the first
    ones of each batch (whose sort keys differ only in the object's :func:`_place`), then the first of
    those (ties in hit order, as one stable sort of every hit would have them). A shape's member list
    in ``in_order`` (one file: the file is in the shape key; objects in input order, whose lines only
    grow) is in that order already.
    """
    out: list[Finding] = []
    for batches in groups.values():
        heads: list[tuple[_SortKey, int, int, Rule, Manifest, Hit]] = []
        for number, (rule, hit, members) in enumerate(batches):
            first = members[:SAMPLE_SIZE] if id(members) in in_order else \
                heapq.nsmallest(SAMPLE_SIZE, members, key=_place)  # (stable, as a sort)
            heads.extend((_sort_key(rule, m, hit), number, i, rule, m, hit) for i, m in enumerate(first))
        sample = heapq.nsmallest(SAMPLE_SIZE, heads, key=lambda head: head[:3])
        _, _, _, rule, m, hit = sample[0]
        out.append(dataclasses.replace(_finding(rule, m, hit), count=sum(len(b[2]) for b in batches),
                                       sample=tuple(head[4].object_id for head in sample)))
    return out


def _growing(lines: list[int | None]) -> bool:
    """Every line is known and greater than the one before (compared in C)."""
    if None in lines:
        return False
    known = cast(list[int], lines)
    return all(map(operator.lt, known, known[1:]))


def _place(m: Manifest) -> tuple[str, int, int]:
    """The object's part of :func:`_sort_key`."""
    return m.file or "", m.line or 0, m.position
