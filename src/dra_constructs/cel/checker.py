"""``check()``: a DRA selector judged exactly as the API server validates it.

Order and categories follow ``validateCELSelector`` (kubernetes ``pkg/apis/resource/validation``):
``TooLong`` (more than 10,240 bytes, not compiled), ``Invalid`` (compile error), ``Forbidden``
(estimated cost above 1,000,000), else ``OK``. Compilation and type checking are cel-cpp's
(``cel_expr_python``) in the environment of ``_decls``/``_env``; the extra validators and the
cost estimate are ``_validate`` and ``cost``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Literal

from dra_constructs.cel import _astpb, _tree
from dra_constructs.cel._deep import compile_deep, declarations, error_blocks, error_location
from dra_constructs.cel._depth import cel_go_depth_error, deep_stack
from dra_constructs.cel._env import EnvKey, check_env, check_env_with, env_key
from dra_constructs.cel._fold import folding_issue, folds_conversions
from dra_constructs.cel._gotypes import go_types
from dra_constructs.cel._nesting import collapse_redundant_parens
from dra_constructs.cel._validate import (
    backtick_issue,
    backtick_offset,
    format_type,
    issue,
    might_need_validation,
    regex_constant_issues,
    regex_literal_ok,
    validate,
    validation_reads_types,
)
from dra_constructs.cel.cost import estimate_cost
from dra_constructs.cel.fixes import suggest_fix
from dra_constructs.errors import DraConstructsError
from dra_constructs.target import Target

__all__ = [
    "MAX_COST",
    "MAX_LENGTH",
    "CelCheck",
    "Compiled",
    "Verdict",
    "check",
    "check_many",
    "compile_selector",
    "parse_target",
    "shape",
]

Verdict = Literal["OK", "Invalid", "TooLong", "Forbidden"]

#: ``resource.CELSelectorExpressionMaxLength`` (bytes).
MAX_LENGTH = 10 * 1024
#: ``resource.CELSelectorExpressionMaxCost``.
MAX_COST = 1_000_000

_CACHE_LIMIT = 1 << 16
_HAS_DEVICE_MAP = re.compile(r"\bhas\s*\(\s*device\s*\.\s*(attributes|capacity)\s*\)")
_STATUS = re.compile(r"^[A-Z_]+: |\s*\[[A-Z_]+\]$")


@dataclass(frozen=True)
class CelCheck:
    """The API server's verdict on one selector expression for one Kubernetes version."""

    expression: str
    target: str
    verdict: Verdict
    error: str | None = None
    cost: int | None = None
    fix: str | None = None
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.verdict == "OK"


@dataclass(frozen=True)
class Compiled:
    """A compiled selector: its checked AST (serialized and decoded) and worst-case cost."""

    expression: str
    key: EnvKey
    serialized: bytes
    checked: Any
    cost: int


_lock = threading.Lock()
_shapes: dict[tuple[str, EnvKey, bool], int] = {}
_results: dict[tuple[str, EnvKey, bool], CelCheck] = {}
_compiled: dict[tuple[str, EnvKey, bool], Compiled] = {}
_targets: dict[str, Target] = {}


def parse_target(target: Target | str | None) -> Target:
    """``Target.parse`` with a small memo (``check`` is called for every selector)."""
    if isinstance(target, Target):
        return target
    key = str(target)
    found = _targets.get(key)
    if found is None:
        found = Target.parse(target, where="cel")
        _targets[key] = found
    return found


#: Calls that validate a literal's contents when the program is built or by an AST validator.
_CONTENT_CHECKED = ("duration", "timestamp", "format")
#: Calls whose literal patterns must be valid RE2 (their length is all the cost estimate sees).
_REGEX_CALLS = ("matches", "find")
#: A plain string literal, with the identifier character right before it (a prefix), if any.
_PLAIN_LITERAL = re.compile(r"""(\w?)('[^'\n\r]*'|"[^"\n\r]*")""")
_UNSHAREABLE_TEXT = ("\\", "'''", '"""', "//")


class _NotShareable(Exception):
    pass


def _blank_literal(match: re.Match[str]) -> str:
    if match.group(1):  # r'...', b'...', or a quote glued to an identifier: not a plain literal
        raise _NotShareable
    literal = match.group(2)
    return literal[0] + "x" * (len(literal) - 2) + literal[0]


def shape(expression: str) -> str | None:
    """``expression`` with the contents of its plain string literals replaced by as many ``x``.

    Type checking and the cost estimate see a string literal only through its type and its
    length in code points, so two expressions of the same shape get the same ``OK`` verdict
    and cost. ``None`` (no sharing) when the text has an escape, a triple quote or a comment,
    when a literal has a prefix, when a call validates literal *contents* (``duration``,
    ``timestamp``, ``format``) or a type conversion may be folded (``int('12')``). With
    ``matches``/``find``/``findAll``, every literal must be a valid RE2 pattern.
    """
    if any(part in expression for part in _UNSHAREABLE_TEXT) \
            or any(name in expression for name in _CONTENT_CHECKED) or folds_conversions(expression):
        return None
    try:
        form = _PLAIN_LITERAL.sub(_blank_literal, expression)
    except _NotShareable:
        return None
    if any(name in expression for name in _REGEX_CALLS) and not all(
            regex_literal_ok(found.group(2)[1:-1]) for found in _PLAIN_LITERAL.finditer(expression)):
        return None
    return form


def _rename_exists_one(expression: str) -> str:
    """cel-go also accepts ``exists_one`` for the 3-argument (two-variable) macro; cel-cpp only
    ``existsOne``. Rename 3-argument calls, keeping every column (``existsOne (``)."""
    out, i = [], 0
    while True:
        j = expression.find(".exists_one(", i)
        if j < 0:
            out.append(expression[i:])
            return "".join(out)
        depth, commas, k, quote = 0, 0, j + len(".exists_one("), ""
        while k < len(expression):
            char = expression[k]
            if quote:
                if char == "\\":
                    k += 1
                elif char == quote:
                    quote = ""
            elif char in "'\"":
                quote = char
            elif char in "([{":
                depth += 1
            elif char in ")]}":
                if depth == 0:
                    break
                depth -= 1
            elif char == "," and depth == 0:
                commas += 1
            k += 1
        out.append(expression[i:j])
        out.append(".existsOne (" if commas == 2 else ".exists_one(")
        i = j + len(".exists_one(")


_UNDECLARED = re.compile(r"^ERROR: <input>:(\d+):(\d+): undeclared reference to '([\w.]+)' \(in container ''\)$")


def _engine_error(error: Exception, expression: str) -> str:
    """cel-cpp's message, in cel-go's words and order: cel-go names the undeclared *identifier* of
    a qualified name (``'devices'`` at its own column), cel-cpp the whole name."""
    lines = str(error).strip().splitlines()
    if lines:
        lines[0] = _STATUS.sub("", lines[0])
        lines[-1] = _STATUS.sub("", lines[-1])
    for index, line in enumerate(lines):
        found = _UNDECLARED.match(line)
        if not found or "." not in found.group(3):
            continue
        line_no, column, name = int(found.group(1)), int(found.group(2)), found.group(3)
        source = expression.split("\n")[line_no - 1] if line_no <= expression.count("\n") + 1 else ""
        start = source.rfind(name.split(".")[0], 0, column)
        if start < 0:
            continue
        head = name.split(".")[0]
        lines[index] = f"ERROR: <input>:{line_no}:{start + 1}: undeclared reference to '{head}' (in container '')"
        if index + 2 < len(lines) and lines[index + 2].lstrip().startswith("|"):
            lines[index + 2] = " | " + "." * start + "^"
    # cel-cpp lists a member call's argument errors before its receiver's; cel-go prints its
    # errors sorted by line, then column (``common.Errors.ToDisplayString``, a stable sort).
    return "\n".join(sorted(error_blocks("\n".join(lines)), key=error_location))


class _Serialized:
    """A checked AST spliced from pieces (``_deep``), serialized as cel-cpp serializes one."""

    def __init__(self, serialized: bytes) -> None:
        self.serialized = serialized

    def serialize(self) -> bytes:
        return self.serialized


def _env_key_for(expression: str, key: EnvKey) -> EnvKey:
    return key if not _HAS_DEVICE_MAP.search(expression) else replace(key, qualified=False)


@lru_cache(maxsize=64)
def _piece_env(key: EnvKey, extra: tuple[tuple[str, bytes], ...]) -> Any:
    """The environment of one piece (placeholders of equal types repeat between deep expressions)."""
    return check_env_with(key, declarations(extra))


def _compile_deep(expression: str, key: EnvKey) -> tuple[Any, str | None] | None:
    """An expression past cel-cpp's depth limit (32): cel-go's own depth error past its limits
    (250), else the expression compiled in pieces (``_deep``); ``None`` when neither applies."""
    depth_error = cel_go_depth_error(expression)
    if depth_error is not None:
        return None, depth_error
    env_key_used = _env_key_for(expression, key)

    def compile_text(env: Any, text: str) -> tuple[Any, str | None]:
        try:
            return env.compile(text), None
        except Exception as error:
            if key.target.cel_has_two_var_comprehensions and "exists_one" in text:
                try:
                    return env.compile(_rename_exists_one(text)), None
                except Exception:
                    pass
            return None, _engine_error(error, text)

    try:
        result = compile_deep(expression, lambda extra: _piece_env(env_key_used, extra), compile_text)
    except Exception:  # a piece the engine or the splice cannot take: cel-cpp's own error stands
        result = None
    if result is None:
        return None
    serialized, error = result
    return (None, error) if serialized is None else (_Serialized(serialized), None)


def _compile(expression: str, key: EnvKey) -> tuple[Any, str | None]:
    """``(expression, None)`` or ``(None, error)`` from cel-cpp."""
    env = check_env(_env_key_for(expression, key))
    try:
        return env.compile(expression), None
    except Exception as error:  # cel-cpp reports compile errors as RuntimeError
        if "recursion" in str(error):  # cel-cpp's nesting limit is 32, cel-go's 250
            deep = _compile_deep(expression, key)
            if deep is not None:
                return deep
            collapsed = collapse_redundant_parens(expression)
            if collapsed != expression:
                program, retry_error = _compile(collapsed, key)
                if program is not None or retry_error is None or "recursion" in retry_error:
                    return program, retry_error
                # cel-go's error for this text: the same offsets, shown on the original lines
                for original, blanked in zip(expression.split("\n"), collapsed.split("\n"), strict=True):
                    retry_error = retry_error.replace(f" | {blanked}\n", f" | {original}\n")
                return None, retry_error
        if key.target.cel_has_two_var_comprehensions and "exists_one" in expression:
            renamed = _rename_exists_one(expression)
            if renamed != expression:
                try:
                    return env.compile(renamed), None
                except Exception:
                    pass
        return None, _engine_error(error, expression)


def compile_selector(expression: str, target: Target | str | None = None,
                     allow_multiple_allocations: bool | None = None) -> Compiled | CelCheck:
    """The compiled selector, or the failed :class:`CelCheck` when it is not ``OK``."""
    result = check(expression, target, allow_multiple_allocations=allow_multiple_allocations)
    if not result.ok:
        return result
    parsed = parse_target(target)
    key = env_key(parsed, allow_multiple_allocations)
    cache_key = (expression, key, parsed.cel_cost_estimator_bug)
    compiled = _compiled.get(cache_key)
    if compiled is None:  # the verdict came from an equal shape: compile this expression now
        _, compiled = _judge(expression, parsed, key)
        if compiled is None:  # pragma: no cover - a shape is only shared between OK verdicts
            raise DraConstructsError("cel", "expression", expression, "does not compile", "check it first")
        with _lock:
            _compiled[cache_key] = compiled
    return compiled


def _acceptable_result(output: Any, target: Target) -> bool:
    """``bool`` or ``any`` (an attribute value); ``dyn`` only with list-typed attributes (compile.go)."""
    kind = None if output is None else output.WhichOneof("kind")
    if kind == "primitive":
        return bool(output.primitive == 1)
    if kind == "well_known":
        return bool(output.well_known == 1)
    return kind == "dyn" and target.cel_list_type_attributes


def _judge(expression: str, target: Target, key: EnvKey) -> tuple[CelCheck, Compiled | None]:
    name = str(target)
    if len(expression.encode("utf-8", "surrogatepass")) > MAX_LENGTH:
        too_long = f"Too long: may not be more than {MAX_LENGTH} bytes"
        return CelCheck(expression, name, "TooLong", too_long), None
    program, error = _compile(expression, key)
    if program is None:
        message = f"compilation failed: {error}"
        return CelCheck(expression, name, "Invalid", message, fix=suggest_fix(expression, message)), None
    if isinstance(program, _Serialized):  # compiled in pieces: the passes below walk up to 250 levels
        with deep_stack():
            return _judge_compiled(expression, target, key, program)
    return _judge_compiled(expression, target, key, program)


def _backtick_check(expression: str, target: Target) -> CelCheck | None:
    backtick = backtick_offset(expression)
    if backtick is None:
        return None
    message = "compilation failed: " + backtick_issue(expression, backtick, target.cel_knows_ident_escape_syntax)
    return CelCheck(expression, str(target), "Invalid", message, fix=suggest_fix(expression, message))


def _judge_compiled(expression: str, target: Target, key: EnvKey, program: Any) -> tuple[CelCheck, Compiled | None]:
    refused = _backtick_check(expression, target)
    if refused is not None:
        return refused, None
    serialized = program.serialize()
    checked = _astpb.decode_checked(serialized)
    return _judge_decoded(expression, target, key, serialized, checked, _tree.decode(checked))


def _judge_decoded(expression: str, target: Target, key: EnvKey, serialized: bytes, checked: Any,
                   tree: _tree.Tree) -> tuple[CelCheck, Compiled | None]:
    """The passes after cel-cpp: cel-go types, AST validators, result type, folding, then the cost.

    ``tree`` is the light tree of ``checked``; the passes walk it, not the protobuf messages.
    """
    refused = _refusal(expression, target, checked, tree)
    if refused is not None:
        return refused, None
    return _costed(expression, target, key, serialized, checked, tree)


def _refusal(expression: str, target: Target, checked: Any, tree: _tree.Tree) -> CelCheck | None:
    """The ``Invalid`` verdict of a compiled expression (cel-go types, validators, result, program), if any."""
    name = str(target)
    needs_validation = might_need_validation(expression)
    go = go_types(tree, expression, needs_validation and validation_reads_types(expression))
    if go is not None and go.range_errors:  # cel-go's checker errors come before any validator runs
        ordered = sorted(go.range_errors, key=lambda error: checked.source_info.positions.get(error[0], 0))
        message = "compilation failed: " + "\n".join(issue(checked, i, expression, m) for i, m in ordered)
        return CelCheck(expression, name, "Invalid", message, fix=suggest_fix(expression, message))
    issues = validate(checked, tree, expression, go, needs_validation)
    if issues:
        message = "compilation failed: " + "\n".join(issues)
        return CelCheck(expression, name, "Invalid", message, fix=suggest_fix(expression, message))
    output = (go or tree.types).get(tree.root.id, None)
    if not _acceptable_result(output, target):
        message = f"must evaluate to bool or the unknown type, not {format_type(output)}"
        return CelCheck(expression, name, "Invalid", message, fix=suggest_fix(expression, message))
    folded = folding_issue(tree.root, expression)
    program_issues = [folded] if folded else regex_constant_issues(tree, expression)
    if program_issues:
        message = program_issues[0]
        return CelCheck(expression, name, "Invalid", message, fix=suggest_fix(expression, message))
    return None


def _costed(expression: str, target: Target, key: EnvKey, serialized: bytes, checked: Any,
            tree: _tree.Tree) -> tuple[CelCheck, Compiled | None]:
    """``Forbidden`` past the cost limit, else ``OK`` with the compiled selector."""
    name = str(target)
    cost = estimate_cost(checked, target, tree)
    if cost > MAX_COST:
        message = f"too complex, exceeds cost limit (estimated cost {cost} > {MAX_COST})"
        return CelCheck(expression, name, "Forbidden", message, cost, suggest_fix(expression, message)), None
    compiled = Compiled(expression, key, serialized, checked, cost)
    return CelCheck(expression, name, "OK", None, cost), compiled


def _judge_or_internal_error(expression: str, target: Target, key: EnvKey) -> tuple[CelCheck, Compiled | None]:
    try:
        return _judge(expression, target, key)
    except Exception as error:  # an engine failure is this expression's verdict, never a crash
        return CelCheck(expression, str(target), "Invalid", f"internal error: {type(error).__name__}: {error}"), None


def _judge_many(expressions: list[str], target: Target, key: EnvKey) -> list[tuple[CelCheck, Compiled | None]]:
    """``[_judge(e, target, key) for e in expressions]``, done stage by stage over the whole list.

    The same functions in another order: first every cel-cpp compile and ``serialize()``, then
    every protobuf decode and light tree, then the checks that can refuse, then the cost
    estimates. Each stage then runs with its own code and data warm in the CPU caches instead of
    evicted by the stage before (a cel-cpp compile between two Python passes slows both), which
    takes about a fifth off a long list (docs/performance.md). An expression whose stage raises
    is judged again alone by ``_judge``, so a failure stays that expression's ``Invalid``
    (``internal error: ...``), as in ``check``.
    """
    out: list[tuple[CelCheck, Compiled | None] | None] = [None] * len(expressions)
    pending: list[tuple[int, bytes]] = []
    alone: list[int] = []
    for index, expression in enumerate(expressions):
        try:
            if len(expression.encode("utf-8", "surrogatepass")) > MAX_LENGTH:
                alone.append(index)  # TooLong: nothing to compile
                continue
            program, error = _compile(expression, key)
            if program is None:
                message = f"compilation failed: {error}"
                out[index] = CelCheck(expression, str(target), "Invalid", message,
                                      fix=suggest_fix(expression, message)), None
            elif isinstance(program, _Serialized):
                with deep_stack():
                    out[index] = _judge_compiled(expression, target, key, program)
            else:
                refused = _backtick_check(expression, target)
                if refused is not None:
                    out[index] = refused, None
                else:
                    pending.append((index, program.serialize()))
        except Exception:
            alone.append(index)
    decoded: list[tuple[int, bytes, Any, _tree.Tree]] = []
    for index, serialized in pending:
        try:
            checked = _astpb.decode_checked(serialized)
            decoded.append((index, serialized, checked, _tree.decode(checked)))
        except Exception:
            alone.append(index)
    passed: list[tuple[int, bytes, Any, _tree.Tree]] = []
    for index, serialized, checked, tree in decoded:
        try:
            refused = _refusal(expressions[index], target, checked, tree)
        except Exception:
            alone.append(index)
            continue
        if refused is None:
            passed.append((index, serialized, checked, tree))
        else:
            out[index] = refused, None
    for index, serialized, checked, tree in passed:
        try:
            out[index] = _costed(expressions[index], target, key, serialized, checked, tree)
        except Exception:
            alone.append(index)
    for index in alone:  # too long, and any expression a stage failed on: the usual path, alone
        out[index] = _judge_or_internal_error(expressions[index], target, key)
    return [result for result in out if result is not None]


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def check(expression: str, target: Target | str | None = "1.32", *,
          allow_multiple_allocations: bool | None = None) -> CelCheck:
    """Judge ``expression`` as the API server of ``target`` judges a new selector.

    Never raises for any string. ``allow_multiple_allocations`` overrides whether
    ``device.allowMultipleAllocations`` is declared (default: the target's, 1.34+; in the real
    API server it needs the alpha DRAConsumableCapacity gate). Repeated expressions are served
    from a cache (``CelCheck.cached``).
    """
    expression = _normalized(expression)
    parsed = parse_target(target)
    key = env_key(parsed, allow_multiple_allocations)
    cache_key, shape_key, found = _lookup(expression, parsed, key)
    if found is not None:
        return found
    result, compiled = _judge_or_internal_error(expression, parsed, key)
    _store(cache_key, shape_key, result, compiled)
    return result


#: How many expressions ``check_many`` judges stage by stage at once (bounded memory).
_BATCH = 256


def check_many(expressions: Iterable[str], target: Target | str | None = "1.32", *,
               allow_multiple_allocations: bool | None = None) -> list[CelCheck]:
    """``[check(e, target) for e in expressions]``, the same results, faster for long lists.

    Expressions not served from the cache are judged in batches stage by stage (every cel-cpp
    compile, then every decode, then the Python passes: ``_judge_many``). An expression whose
    shape or text repeats one earlier in the list waits for that one's verdict, as ``check``
    called in order would share it.
    """
    texts = [_normalized(expression) for expression in expressions]
    parsed = parse_target(target)
    key = env_key(parsed, allow_multiple_allocations)
    results: list[CelCheck | None] = [None] * len(texts)
    todo: list[tuple[int, tuple[str, EnvKey, bool], tuple[str, EnvKey, bool] | None]] = []
    later: list[int] = []
    seen: set[tuple[str, EnvKey, bool] | None] = set()
    for index, expression in enumerate(texts):
        cache_key, shape_key, found = _lookup(expression, parsed, key)
        if found is not None:
            results[index] = found
        elif cache_key in seen or (shape_key is not None and shape_key in seen):
            later.append(index)  # the same text or shape earlier in this list: its verdict first
        else:
            seen.update((cache_key, shape_key))
            todo.append((index, cache_key, shape_key))
    for start in range(0, len(todo), _BATCH):
        batch = todo[start:start + _BATCH]
        judged = _judge_many([texts[index] for index, _, _ in batch], parsed, key)
        for (index, cache_key, shape_key), (result, compiled) in zip(batch, judged, strict=True):
            _store(cache_key, shape_key, result, compiled)
            results[index] = result
    for index in later:
        results[index] = check(texts[index], parsed, allow_multiple_allocations=allow_multiple_allocations)
    return [result for result in results if result is not None]


def _normalized(expression: str) -> str:
    if not isinstance(expression, str):
        raise DraConstructsError("cel", "expression", expression, "a CEL selector must be a string",
                                 "pass the expression text, e.g. \"device.driver == 'gpu.nvidia.com'\"")
    if not expression.isascii() and _LONE_SURROGATE.search(expression):
        # What the API server compiles: Go's JSON decoder turns a lone surrogate escape into U+FFFD
        # (the CLI's readers do the same); cel-cpp cannot take one at all.
        expression = _LONE_SURROGATE.sub("\ufffd", expression)
    return expression


_Key = tuple[str, EnvKey, bool]


def _lookup(expression: str, parsed: Target, key: EnvKey) -> tuple[_Key, _Key | None, CelCheck | None]:
    """The cache key, the shape key (``None``: not shareable) and the cached or shared verdict."""
    cache_key = (expression, key, parsed.cel_cost_estimator_bug)
    found = _results.get(cache_key)
    if found is not None:
        if found.target == str(parsed) and found.cached:
            return cache_key, None, found
        return cache_key, None, replace(found, target=str(parsed), cached=True)
    too_long = len(expression.encode("utf-8", "surrogatepass")) > MAX_LENGTH  # bytes: not shape-invariant
    form = None if too_long else shape(expression)
    shape_key = (form, key, parsed.cel_cost_estimator_bug) if form is not None else None
    if shape_key is not None and shape_key in _shapes:
        shared = CelCheck(expression, str(parsed), "OK", None, _shapes[shape_key])
        _store(cache_key, None, shared, None)
        return cache_key, shape_key, shared
    return cache_key, shape_key, None


def _store(cache_key: _Key, shape_key: _Key | None, result: CelCheck, compiled: Compiled | None) -> None:
    with _lock:
        if shape_key is not None and result.ok:
            _shapes[shape_key] = result.cost or 0
        if len(_results) >= _CACHE_LIMIT:
            _results.clear()
            _compiled.clear()
            _shapes.clear()
        _results[cache_key] = result
        if compiled is not None:
            _compiled[cache_key] = compiled
