"""Selectors against devices, the way the scheduler's allocator does it.

``structured/allocator.go`` (``isSelectable`` -> ``selectorsMatch``): the DeviceClass selectors
run first, then the request's, each in order; the first ``false`` excludes the device and the
first run-time error fails the allocation (reported here as ``"error: <message>"``, never as
a non-match). A request is allocated on one node, so satisfiability counts matches per pool.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from dra_constructs.cel._footprint import Read, footprint, reading
from dra_constructs.cel._runtime import CelRuntimeError, activation_for, program_for, run
from dra_constructs.cel.checker import CelCheck, Compiled, compile_selector, parse_target
from dra_constructs.cel.fixes import suggest_fix
from dra_constructs.cel.inventory import Device
from dra_constructs.errors import DraConstructsError
from dra_constructs.target import Target

__all__ = [
    "CelRuntimeError",
    "MatchResult",
    "best_pool",
    "evaluate",
    "explain_no_match",
    "match_devices",
    "matches_per_pool",
    "selector_matcher",
    "selector_reads",
    "split_conjuncts",
]

MatchResult = bool | str


def _compiled(expression: str, target: Target, where: str) -> Compiled:
    result = compile_selector(expression, target)
    if isinstance(result, CelCheck):
        raise DraConstructsError(where, "expression", expression, f"{result.verdict}: {result.error}",
                                 result.fix or "fix the selector so that `dra-constructs cel check` says OK")
    return result


_footprints: dict[int, tuple[Compiled, tuple[Read, ...], int]] = {}
_shared: dict[tuple[int, tuple[object, ...]], bool | str] = {}
_tokens = itertools.count()


def _eval_direct(compiled: Compiled, device: Device) -> bool:
    program = program_for(compiled.serialized, compiled.checked, compiled.key)
    return run(program, activation_for(device, compiled.key))


def _eval(compiled: Compiled, device: Device) -> bool:
    """Evaluate, sharing the result between devices whose read values are equal."""
    entry = _footprints.get(id(compiled))
    if entry is None or entry[0] is not compiled:
        entry = (compiled, footprint(compiled.checked), next(_tokens))
        _footprints[id(compiled)] = entry
    values = reading(device, entry[1])
    if values is None:
        return _eval_direct(compiled, device)
    cache_key = (entry[2], values)
    found = _shared.get(cache_key)
    if found is None:
        try:
            found = _eval_direct(compiled, device)
        except CelRuntimeError as error:
            found = str(error)
        if len(_shared) > 1 << 18:
            _shared.clear()
        _shared[cache_key] = found
    if isinstance(found, str):
        raise CelRuntimeError(found)
    return found


def selector_matcher(expression: str, target: Target | str | None = "1.32") -> Callable[[Device], bool]:
    """One compiled selector as a function of a device (raises :class:`CelRuntimeError` at run time)."""
    compiled = _compiled(expression, parse_target(target), "selector")
    return lambda device: _eval(compiled, device)


def selector_reads(expression: str, target: Target | str | None = "1.32") -> tuple[Read, ...]:
    """What a selector reads of a device (its footprint: equal readings give equal results)."""
    return footprint(_compiled(expression, parse_target(target), "selector").checked)


def evaluate(expression: str, device: Device, target: Target | str | None = "1.32") -> bool:
    """Evaluate one selector on one device; a run-time error raises :class:`CelRuntimeError`."""
    parsed = parse_target(target)
    compiled = _compiled(expression, parsed, "cel.evaluate")
    try:
        return _eval(compiled, device)
    except CelRuntimeError:
        raise
    except Exception as error:
        raise CelRuntimeError(f"{type(error).__name__}: {error}") from None


@dataclass(frozen=True)
class _Plan:
    compiled: tuple[Compiled, ...]
    kinds: tuple[str, ...]  # "class" or "request", per selector


def _plan(class_selectors: Sequence[str], request_selectors: Sequence[str], target: Target) -> _Plan:
    compiled = [_compiled(e, target, f"deviceClass.selectors[{i}]") for i, e in enumerate(class_selectors)]
    compiled += [_compiled(e, target, f"request.selectors[{i}]") for i, e in enumerate(request_selectors)]
    return _Plan(tuple(compiled), ("class",) * len(class_selectors) + ("request",) * len(request_selectors))


def _match_one(plan: _Plan, device: Device) -> MatchResult:
    for compiled in plan.compiled:
        try:
            if not _eval(compiled, device):
                return False
        except CelRuntimeError as error:
            return f"error: {error}"
        except Exception as error:
            return f"error: {type(error).__name__}: {error}"
    return True


def match_devices(class_selectors: Sequence[str], request_selectors: Sequence[str], devices: Iterable[Device],
                  target: Target | str | None = "1.32") -> dict[str, MatchResult]:
    """``"driver/pool/device"`` -> ``True`` / ``False`` / ``"error: <message>"`` for every device."""
    plan = _plan(class_selectors, request_selectors, parse_target(target))
    return {device.id: _match_one(plan, device) for device in devices}


def matches_per_pool(class_selectors: Sequence[str], request_selectors: Sequence[str], devices: Iterable[Device],
                     target: Target | str | None = "1.32") -> dict[str, int]:
    """How many devices match in each ``driver/pool`` (a request is allocated within one node)."""
    plan = _plan(class_selectors, request_selectors, parse_target(target))
    counts: Counter[str] = Counter()
    for device in devices:
        key = f"{device.driver}/{device.pool}"
        counts[key] += 0
        if _match_one(plan, device) is True:
            counts[key] += 1
    return dict(counts)


def best_pool(counts: dict[str, int]) -> tuple[str | None, int]:
    """The pool with the most matches (``(None, 0)`` when there is none)."""
    if not counts:
        return None, 0
    pool = max(sorted(counts), key=lambda k: counts[k])
    return pool, counts[pool]


def split_conjuncts(expression: str) -> list[str]:
    """Top-level ``&&`` operands of ``expression`` (outside parentheses and strings)."""
    parts, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(expression):
        char = expression[i]
        if quote:
            if char == "\\":
                i += 1
            elif expression.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif expression.startswith(("'''", '"""'), i):
            quote = expression[i:i + 3]
            i += 2
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0 and expression.startswith("&&", i):
            parts.append(expression[start:i].strip())
            start = i + 2
            i += 1
        elif depth == 0 and (expression.startswith("||", i) or char == "?"):
            return [expression.strip()]
        i += 1
    parts.append(expression[start:].strip())
    return [p for p in parts if p]


def _summary(results: dict[str, MatchResult]) -> tuple[int, int, list[str]]:
    true = sum(1 for r in results.values() if r is True)
    errors = sorted({r for r in results.values() if isinstance(r, str)})
    return true, len(results), errors


def explain_no_match(class_selectors: Sequence[str], request_selectors: Sequence[str], devices: Iterable[Device],
                     target: Target | str | None = "1.32", count: int = 1, device_class: str | None = None) -> str:
    """Which clause excluded every device (or left fewer than ``count`` on every node).

    Walks the selectors in the allocator's order, then the ``&&`` sub-clauses of the first
    selector that leaves no device, and reports run-time errors with a suggested fix.
    """
    parsed = parse_target(target)
    remaining = list(devices)
    if not remaining:
        return "the inventory has no devices"
    labelled = [("DeviceClass selector", i, e) for i, e in enumerate(class_selectors)]
    labelled += [("request selector", i, e) for i, e in enumerate(request_selectors)]
    for label, index, expression in labelled:
        results = match_devices([], [expression], remaining, parsed)
        true, total, errors = _summary(results)
        if errors:
            fix = suggest_fix(expression, errors[0], device_class)
            failing = sum(isinstance(r, str) for r in results.values())
            return (f"{label} #{index} `{expression}` fails at run time on {failing}"
                    f" of {total} devices ({errors[0]}); the scheduler fails the allocation"
                    + (f". Fix: {fix}" if fix else ""))
        if true == 0:
            detail = ""
            conjuncts = split_conjuncts(expression)
            if len(conjuncts) > 1:
                counted: list[str] = []
                for part in conjuncts:
                    try:
                        part_results = match_devices([], [part], remaining, parsed)
                    except DraConstructsError:
                        continue
                    part_true, _, part_errors = _summary(part_results)
                    if part_true == 0 and not part_errors:
                        detail = f"; the sub-clause `{part}` is false for all of them"
                        break
                    counted.append(f"`{part}` matches {part_true}")
                else:
                    detail = "; no single sub-clause excludes them all, only together: " + ", ".join(counted)
            return f"{label} #{index} `{expression}` matches none of the {total} devices left{detail}"
        remaining = [d for d in remaining if results[d.id] is True]
    counts = Counter(f"{d.driver}/{d.pool}" for d in remaining)
    pool, most = best_pool(dict(counts))
    if most < count:
        return (f"the selectors match {len(remaining)} devices, but no single node has {count}: "
                f"the best pool {pool} has {most} (a request is allocated on one node)")
    return f"the selectors match {len(remaining)} devices; pool {pool} has {most}"
