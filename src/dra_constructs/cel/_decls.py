"""Function declarations of the Kubernetes DRA CEL environment, per target version.

The Kubernetes API server compiles a DRA selector with cel-go, the standard library, cel-go's
extensions (strings v2, sets, bindings, optional types, two-variable comprehensions) and the
Kubernetes libraries (quantity, semver, URLs, IP, CIDR, regex, lists, format, authz).
``cel_expr_python`` (cel-cpp) brings the standard library and most cel-go extensions, but it
cannot add overloads to a function it already declares. So every function whose overload set
differs from cel-cpp's built-in one (ordering operators with cross-type numeric comparisons,
``string()`` with IP/CIDR, the strings extension merged with the Kubernetes list ``indexOf``)
is excluded from cel-cpp's standard library and declared here in full, with cel-go's overload
ids (the cost estimator keys on them). Sources: apiserver ``pkg/cel/library/*.go`` and
``pkg/cel/environment/base.go``; cel-go ``common/stdlib``, ``ext/strings.go``, ``cel/library.go``.

These are declarations (signatures) only: the type checker needs nothing else.
"""

from __future__ import annotations

import json
import re
from functools import cache

from dra_constructs.target import Target

__all__ = ["QUANTITY", "SEMVER", "env_yaml", "function_names"]

QUANTITY = "kubernetes.Quantity"
SEMVER = "kubernetes.Semver"
URL = "kubernetes.URL"
IP = "net.IP"
CIDR = "net.CIDR"
FORMAT = "kubernetes.NamedFormat"
_AUTHZ = "kubernetes.authorization."

# One overload per line: "<overload id>: [<target type>.]<function>(<arg types>) -> <result>".
# Single upper-case letters are type parameters.
_ORDERING = [
    ("less", "_<_"), ("less_equals", "_<=_"), ("greater", "_>_"), ("greater_equals", "_>=_"),
]
_ORDERED = [("bool", "bool"), ("int64", "int"), ("uint64", "uint"), ("double", "double"), ("string", "string"),
            ("bytes", "bytes"), ("timestamp", "google.protobuf.Timestamp"), ("duration", "google.protobuf.Duration")]
_CROSS = [("int64", "int", "uint64", "uint"), ("int64", "int", "double", "double"),
          ("uint64", "uint", "int64", "int"), ("uint64", "uint", "double", "double"),
          ("double", "double", "int64", "int"), ("double", "double", "uint64", "uint")]


def _ordering() -> list[str]:
    lines = []
    for prefix, op in _ORDERING:
        lines += [f"{prefix}_{oid}: {op}({t}, {t}) -> bool" for oid, t in _ORDERED]
        lines += [f"{prefix}_{a}_{b}: {op}({ta}, {tb}) -> bool" for a, ta, b, tb in _CROSS]
    return lines


_STRING_CONVERSIONS = [
    "string_to_string: string(string) -> string", "bool_to_string: string(bool) -> string",
    "int64_to_string: string(int) -> string", "uint64_to_string: string(uint) -> string",
    "double_to_string: string(double) -> string", "bytes_to_string: string(bytes) -> string",
    "timestamp_to_string: string(google.protobuf.Timestamp) -> string",
    "duration_to_string: string(google.protobuf.Duration) -> string",
]

# cel-go ext.Strings(version 2) (v0: charAt..upperAscii; v1: format, strings.quote; v2: join).
_STRINGS_EXT = [
    "string_char_at_int: string.charAt(int) -> string",
    "string_index_of_string: string.indexOf(string) -> int",
    "string_index_of_string_int: string.indexOf(string, int) -> int",
    "string_last_index_of_string: string.lastIndexOf(string) -> int",
    "string_last_index_of_string_int: string.lastIndexOf(string, int) -> int",
    "string_lower_ascii: string.lowerAscii() -> string",
    "string_replace_string_string: string.replace(string, string) -> string",
    "string_replace_string_string_int: string.replace(string, string, int) -> string",
    "string_split_string: string.split(string) -> list(string)",
    "string_split_string_int: string.split(string, int) -> list(string)",
    "string_substring_int: string.substring(int) -> string",
    "string_substring_int_int: string.substring(int, int) -> string",
    "string_trim: string.trim() -> string",
    "string_upper_ascii: string.upperAscii() -> string",
    "string_format: string.format(list(dyn)) -> string",
    "strings_quote: strings.quote(string) -> string",
    "list_join: list(string).join() -> string",
    "list_join_string: list(string).join(string) -> string",
]

# apiserver pkg/cel/library/lists.go
_COMPARABLE = [("int", "int"), ("uint", "uint"), ("double", "double"), ("bool", "bool"),
               ("duration", "google.protobuf.Duration"), ("timestamp", "google.protobuf.Timestamp"),
               ("string", "string"), ("bytes", "bytes")]
_SUMMABLE = [("int", "int"), ("uint", "uint"), ("double", "double"), ("duration", "google.protobuf.Duration")]


def _k8s_lists() -> list[str]:
    lines = [f"list_{n}_is_sorted_bool: list({t}).isSorted() -> bool" for n, t in _COMPARABLE]
    lines += [f"list_{n}_sum_{n}: list({t}).sum() -> {t}" for n, t in _SUMMABLE]
    lines += [f"list_{n}_max_{n}: list({t}).max() -> {t}" for n, t in _COMPARABLE]
    lines += [f"list_{n}_min_{n}: list({t}).min() -> {t}" for n, t in _COMPARABLE]
    lines += ["list_a_index_of_int: list(A).indexOf(A) -> int",
              "list_a_last_index_of_int: list(A).lastIndexOf(A) -> int"]
    return lines


_QUANTITY_LIB = [
    f"string_to_quantity: quantity(string) -> {QUANTITY}",
    "is_quantity_string: isQuantity(string) -> bool",
    f"quantity_sign: sign({QUANTITY}) -> int",
    f"quantity_is_greater_than: {QUANTITY}.isGreaterThan({QUANTITY}) -> bool",
    f"quantity_is_less_than: {QUANTITY}.isLessThan({QUANTITY}) -> bool",
    f"quantity_compare_to: {QUANTITY}.compareTo({QUANTITY}) -> int",
    f"quantity_get_float: {QUANTITY}.asApproximateFloat() -> double",
    f"quantity_get_int: {QUANTITY}.asInteger() -> int",
    f"quantity_is_integer: {QUANTITY}.isInteger() -> bool",
    f"quantity_add: {QUANTITY}.add({QUANTITY}) -> {QUANTITY}",
    f"quantity_add_int: {QUANTITY}.add(int) -> {QUANTITY}",
    f"quantity_sub: {QUANTITY}.sub({QUANTITY}) -> {QUANTITY}",
    f"quantity_sub_int: {QUANTITY}.sub(int) -> {QUANTITY}",
]


def _semver_lib(normalize: bool) -> list[str]:
    lines = [
        f"string_to_semver: semver(string) -> {SEMVER}",
        "is_semver_string: isSemver(string) -> bool",
        f"semver_is_greater_than: {SEMVER}.isGreaterThan({SEMVER}) -> bool",
        f"semver_is_less_than: {SEMVER}.isLessThan({SEMVER}) -> bool",
        f"semver_compare_to: {SEMVER}.compareTo({SEMVER}) -> int",
        f"semver_major: {SEMVER}.major() -> int",
        f"semver_minor: {SEMVER}.minor() -> int",
        f"semver_patch: {SEMVER}.patch() -> int",
    ]
    if normalize:
        lines += [f"string_bool_to_semver: semver(string, bool) -> {SEMVER}",
                  "is_semver_string_bool: isSemver(string, bool) -> bool"]
    return lines


_URL_LIB = [
    f"string_to_url: url(string) -> {URL}",
    f"url_get_scheme: {URL}.getScheme() -> string",
    f"url_get_host: {URL}.getHost() -> string",
    f"url_get_hostname: {URL}.getHostname() -> string",
    f"url_get_port: {URL}.getPort() -> string",
    f"url_get_escaped_path: {URL}.getEscapedPath() -> string",
    f"url_get_query: {URL}.getQuery() -> map(string, list(string))",
    "is_url_string: isURL(string) -> bool",
]

_REGEX_LIB = [
    "string_find_string: string.find(string) -> string",
    "string_find_all_string: string.findAll(string) -> list(string)",
    "string_find_all_string_int: string.findAll(string, int) -> list(string)",
]

_IP_CIDR_LIB = [
    f"string_to_ip: ip(string) -> {IP}",
    f"ip_family: {IP}.family() -> int",
    "ip_is_canonical: ip.isCanonical(string) -> bool",
    f"ip_is_unspecified: {IP}.isUnspecified() -> bool",
    f"ip_is_loopback: {IP}.isLoopback() -> bool",
    f"ip_is_link_local_multicast: {IP}.isLinkLocalMulticast() -> bool",
    f"ip_is_link_local_unicast: {IP}.isLinkLocalUnicast() -> bool",
    f"ip_is_global_unicast: {IP}.isGlobalUnicast() -> bool",
    "is_ip: isIP(string) -> bool",
    f"ip_to_string: string({IP}) -> string",
    f"string_to_cidr: cidr(string) -> {CIDR}",
    f"cidr_contains_ip_string: {CIDR}.containsIP(string) -> bool",
    f"cidr_contains_ip_ip: {CIDR}.containsIP({IP}) -> bool",
    f"cidr_contains_cidr_string: {CIDR}.containsCIDR(string) -> bool",
    f"cidr_contains_cidr: {CIDR}.containsCIDR({CIDR}) -> bool",
    f"cidr_ip: {CIDR}.ip() -> {IP}",
    f"cidr_prefix_length: {CIDR}.prefixLength() -> int",
    f"cidr_masked: {CIDR}.masked() -> {CIDR}",
    "is_cidr: isCIDR(string) -> bool",
    f"cidr_to_string: string({CIDR}) -> string",
]

#: Names of the constant formats of the Kubernetes format library (``format.<name>()``).
FORMAT_NAMES = ("dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName", "dns1123LabelPrefix",
                "dns1123SubdomainPrefix", "dns1035LabelPrefix", "labelValue", "uri", "uuid", "byte", "date",
                "datetime")

_FORMAT_LIB = [f"format.{name}: format.{name}() -> {FORMAT}" for name in FORMAT_NAMES] + [
    f"format-validate: {FORMAT}.validate(string) -> optional_type(list(string))",
    f"format-named: format.named(string) -> optional_type({FORMAT})",
]

_AUTHZ_LIB = [
    f"authorizer_path: {_AUTHZ}Authorizer.path(string) -> {_AUTHZ}PathCheck",
    f"authorizer_group: {_AUTHZ}Authorizer.group(string) -> {_AUTHZ}GroupCheck",
    f"authorizer_serviceaccount: {_AUTHZ}Authorizer.serviceAccount(string, string) -> {_AUTHZ}Authorizer",
    f"groupcheck_resource: {_AUTHZ}GroupCheck.resource(string) -> {_AUTHZ}ResourceCheck",
    f"resourcecheck_subresource: {_AUTHZ}ResourceCheck.subresource(string) -> {_AUTHZ}ResourceCheck",
    f"resourcecheck_namespace: {_AUTHZ}ResourceCheck.namespace(string) -> {_AUTHZ}ResourceCheck",
    f"resourcecheck_name: {_AUTHZ}ResourceCheck.name(string) -> {_AUTHZ}ResourceCheck",
    f"pathcheck_check: {_AUTHZ}PathCheck.check(string) -> {_AUTHZ}Decision",
    f"resourcecheck_check: {_AUTHZ}ResourceCheck.check(string) -> {_AUTHZ}Decision",
    f"decision_errored: {_AUTHZ}Decision.errored() -> bool",
    f"decision_error: {_AUTHZ}Decision.error() -> string",
    f"decision_allowed: {_AUTHZ}Decision.allowed() -> bool",
    f"decision_reason: {_AUTHZ}Decision.reason() -> string",
    # AuthzSelectors (feature gate AuthorizeWithSelectors, beta and on from 1.32)
    f"authorizer_fieldselector: {_AUTHZ}ResourceCheck.fieldSelector(string) -> {_AUTHZ}ResourceCheck",
    f"authorizer_labelselector: {_AUTHZ}ResourceCheck.labelSelector(string) -> {_AUTHZ}ResourceCheck",
]

# cel-go optional library v2 functions that cel-cpp's optional extension lacks.
_OPTIONAL_V2_EXTRA = [
    "optional_unwrap: optional.unwrap(list(optional_type(V))) -> list(V)",
    "optional_unwrapOpt: list(optional_type(V)).unwrapOpt() -> list(V)",
]

#: Functions excluded from cel-cpp's standard library because they are declared here in full.
_EXCLUDED_STDLIB = ("_<_", "_<=_", "_>_", "_>=_", "string")

def _split_types(text: str) -> list[str]:
    """Split ``"a, map(b, c)"`` at top-level commas."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        depth += char == "("
        depth -= char == ")"
        current += char
    if current.strip():
        parts.append(current.strip())
    return parts


def _type_yaml(spec: str) -> dict[str, object]:
    match = re.match(r"^([A-Za-z_.]+)\((.*)\)$", spec)
    if match:
        return {"type_name": match.group(1), "params": [_type_yaml(p) for p in _split_types(match.group(2))]}
    if re.fullmatch(r"[A-Z]", spec):
        return {"type_name": spec, "is_type_param": True}
    return {"type_name": spec}


def _parse(line: str) -> tuple[str, str, str | None, list[str], str]:
    """``(overload id, function name, target type or None, arg types, result type)``."""
    overload_id, rest = line.split(": ", 1)
    signature, result = rest.rsplit(" -> ", 1)
    depth, open_at = 0, len(signature) - 1
    for open_at in range(len(signature) - 1, -1, -1):  # the "(" matching the final ")"
        depth += {")": 1, "(": -1}.get(signature[open_at], 0)
        if depth == 0:
            break
    call, args = signature[:open_at], signature[open_at + 1:-1]
    target: str | None = None
    name = call
    # A member call is "<type>.<name>" where <type> is a known type spelling; a global function
    # may itself contain dots ("strings.quote", "format.named", "ip.isCanonical").
    for type_prefix in _MEMBER_TARGETS:
        if call.startswith(type_prefix + ".") and call[len(type_prefix) + 1:].isidentifier():
            target, name = type_prefix, call[len(type_prefix) + 1:]
            break
    return overload_id, name, target, _split_types(args), result


_MEMBER_TARGETS = sorted(
    {"string", "list(string)", "list(A)", "list(optional_type(V))", QUANTITY, SEMVER, URL, IP, CIDR, FORMAT}
    | {f"list({t})" for _, t in _COMPARABLE}
    | {f"{_AUTHZ}{n}" for n in ("Authorizer", "GroupCheck", "ResourceCheck", "PathCheck", "Decision")},
    key=len, reverse=True,
)


def _lines(target: Target) -> list[str]:
    lines = _ordering() + _STRING_CONVERSIONS + _STRINGS_EXT + _k8s_lists() + _QUANTITY_LIB
    lines += _semver_lib(target.cel_semver_normalize) + _URL_LIB + _REGEX_LIB + _IP_CIDR_LIB + _FORMAT_LIB + _AUTHZ_LIB
    if target.cel_optional_library_version >= 2:
        lines += _OPTIONAL_V2_EXTRA
    return lines


@cache
def function_names(target: Target) -> frozenset[str]:
    """Every function name this module declares for ``target``."""
    return frozenset(_parse(line)[1] for line in _lines(target))


@cache
def env_yaml(target: Target) -> str:
    """The cel-cpp environment config (YAML) of the DRA selector environment of ``target``."""
    functions: dict[str, list[dict[str, object]]] = {}
    for line in _lines(target):
        overload_id, name, member_of, args, result = _parse(line)
        overload: dict[str, object] = {"id": overload_id}
        if member_of is not None:
            overload["target"] = _type_yaml(member_of)
        if args:
            overload["args"] = [_type_yaml(a) for a in args]
        overload["return"] = _type_yaml(result)
        functions.setdefault(name, []).append(overload)
    extensions: list[tuple[str, int | None]] = [
        ("optional", target.cel_optional_library_version), ("bindings", None), ("sets", None),
    ]
    if target.cel_has_two_var_comprehensions:
        extensions.append(("two-var-comprehensions", None))
    if target.cel_has_ext_lists:
        extensions.append(("lists", 2))  # cel-go v3 = v2 functions + cost estimators
    out = ["name: dra-selector", "stdlib:", "  exclude_functions:"]
    out += [f"    - name: {json.dumps(name)}" for name in _EXCLUDED_STDLIB]
    out.append("extensions:")
    for ext_name, version in extensions:
        out.append(f"  - name: {json.dumps(ext_name)}")
        if version is not None:
            out.append(f"    version: {version}")
    out.append("functions:")
    for name, overloads in functions.items():
        out.append(f"  - name: {json.dumps(name)}")
        out.append("    overloads:")
        for overload in overloads:
            out.append("      - " + json.dumps(overload))
    return "\n".join(out) + "\n"

