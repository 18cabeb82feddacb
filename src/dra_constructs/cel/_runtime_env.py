"""The cel-cpp runtime environment of a target: the library functions declared with their
overload ids and bound to their Python implementations.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Callable
from functools import cache
from typing import Any

from cel_expr_python import cel

from dra_constructs.cel._env import EnvKey
from dra_constructs.cel._library import (
    _add,
    _as_integer,
    _cidr,
    _cidr_value,
    _compare,
    _contains_cidr,
    _contains_ip,
    _distinct,
    _extreme,
    _format_constant,
    _format_ok,
    _format_problems,
    _index_of,
    _ip,
    _ip_value,
    _is_cidr,
    _is_ip,
    _is_quantity,
    _is_semver,
    _is_sorted,
    _is_url,
    _last_index_of,
    _major,
    _map_insert,
    _minor,
    _patch,
    _quantity,
    _semver,
    _sets_contains,
    _sets_equivalent,
    _sets_intersects,
    _sub,
    _substring,
    _sum_dyn,
    _sum_of,
    _to_string,
    _url,
    _url_part,
)
from dra_constructs.cel._regex import find, find_all
from dra_constructs.cel._values import POOL, CIDRMsg, IPMsg, _domain, _k8s_in, _k8s_in_set, _k8s_ne, _q, go_equal

# --- environments ------------------------------------------------------------------------------

_ANY = "google.protobuf.Any"


def _type(spec: str) -> Any:
    """``cel.Type`` of ``"int"``, ``"list(string)"``, ``"map(string, list(string))"``, a message name...

    (``cel.Type("list(dyn)")`` would name a *message* type ``list(dyn)``.)
    """
    if spec.startswith("list(") and spec.endswith(")"):
        return cel.Type.List(_type(spec[5:-1]))
    if spec.startswith("map(") and spec.endswith(")"):
        key, _, value = spec[4:-1].partition(", ")
        return cel.Type.Map(_type(key), _type(value))
    return cel.Type(spec)


def _fn(name: str, impl: Callable[..., Any], args: list[str], result: str, member: bool = False,
        overload: str | None = None) -> Any:
    types = [_type(t) for t in args]
    return cel.FunctionDecl(name, [cel.Overload(overload or f"dra_{name}_{len(args)}_{'m' if member else 'g'}",
                                                _type(result), types, is_member=member, impl=impl)])


#: Kubernetes list library overloads (checked overload id -> runtime function), one runtime
#: function per element kind so that the result has the declared type (``uint``, ``duration``...).
_LIST_KINDS = {"int": "int", "uint": "uint", "double": "double", "bool": "bool", "string": "string",
               "bytes": "bytes", "duration": "google.protobuf.Duration", "timestamp": "google.protobuf.Timestamp"}
_SUMMABLE_KINDS = ("int", "uint", "double", "duration")
#: Checked overload ids whose call is renamed to a runtime function of this module.
RENAMED_OVERLOADS = {
    **{f"list_{n}_sum_{n}": f"k8s_sum_{n}" for n in _SUMMABLE_KINDS},
    **{f"list_{n}_max_{n}": f"k8s_max_{n}" for n in _LIST_KINDS},
    **{f"list_{n}_min_{n}": f"k8s_min_{n}" for n in _LIST_KINDS},
    **{f"list_{n}_is_sorted_bool": "k8s_is_sorted" for n in _LIST_KINDS},
    "list_a_index_of_int": "k8s_index_of",
    # cel-cpp's sets and distinct compare carriers as protobuf messages: quantity('1') and
    # quantity('1000m') differ there, cel-go's Quantity.Equal has them equal
    "list_sets_contains_list": "k8s_sets_contains",
    "list_sets_equivalent_list": "k8s_sets_equivalent",
    "list_sets_intersects_list": "k8s_sets_intersects",
    "list_distinct": "k8s_distinct",
    "list_a_last_index_of_int": "k8s_last_index_of",
    "string_substring_int_int": "k8s_substring",
    "string_find_string": "k8s_find",
    "string_find_all_string": "k8s_find_all",
    "string_find_all_string_int": "k8s_find_all",
}
#: cel-go's ``cel.@mapInsert`` (``transformMap``, ``transformMapEntry``), which cel-cpp's runtime lacks.
_MAP_INSERT = "cel.@mapInsert"
#: Function names renamed when the overload is ambiguous (a ``dyn`` receiver).
RENAMED_FUNCTIONS = {"sum": "k8s_sum_dyn", "max": "k8s_max_dyn", "min": "k8s_min_dyn", "isSorted": "k8s_is_sorted",
                     "find": "k8s_find", "findAll": "k8s_find_all"}


def _list_functions() -> list[Any]:
    fns = [_fn(f"k8s_sum_{n}", _sum_of(n), [f"list({_LIST_KINDS[n]})"], _LIST_KINDS[n], True)
           for n in _SUMMABLE_KINDS]
    fns.append(_fn("k8s_sum_dyn", _sum_dyn, ["list(dyn)"], "dyn", True))
    for name, pick in (("max", max), ("min", min)):
        fns += [_fn(f"k8s_{name}_{n}", _extreme(name, pick), [f"list({t})"], t, True) for n, t in _LIST_KINDS.items()]
        fns.append(_fn(f"k8s_{name}_dyn", _extreme(name, pick), ["list(dyn)"], "dyn", True))
    fns += [
        _fn("k8s_is_sorted", _is_sorted, ["list(dyn)"], "bool", True),
        _fn("k8s_index_of", _index_of, ["list(dyn)", _ANY], "int", True),
        _fn("k8s_last_index_of", _last_index_of, ["list(dyn)", _ANY], "int", True),
        _fn("k8s_sets_contains", _sets_contains, ["list(dyn)", "list(dyn)"], "bool"),
        _fn("k8s_sets_equivalent", _sets_equivalent, ["list(dyn)", "list(dyn)"], "bool"),
        _fn("k8s_sets_intersects", _sets_intersects, ["list(dyn)", "list(dyn)"], "bool"),
        _fn("k8s_distinct", _distinct, ["list(dyn)"], "list(dyn)", True),
        _fn("k8s_substring", _substring, ["string", "int", "int"], "string", True),
        _fn("k8s_find", find, ["string", "string"], "string", True),
        cel.FunctionDecl("k8s_find_all", [
            cel.Overload("dra_find_all", _type("list(string)"), [cel.Type.STRING, cel.Type.STRING],
                         is_member=True, impl=find_all),
            cel.Overload("dra_find_all_n", _type("list(string)"), [cel.Type.STRING, cel.Type.STRING, cel.Type.INT],
                         is_member=True, impl=find_all)]),
        cel.FunctionDecl("k8s_map_insert", [
            cel.Overload("dra_map_insert_kv", _type("map(dyn, dyn)"), [cel.Type(_ANY)] * 3, impl=_map_insert),
            cel.Overload("dra_map_insert_map", _type("map(dyn, dyn)"), [cel.Type(_ANY)] * 2, impl=_map_insert)]),
    ]
    return fns


def _functions(key: EnvKey) -> list[Any]:
    q, s = "kubernetes.Quantity", "kubernetes.Semver"
    fns = [
        _fn("k8s.eq", go_equal, [_ANY, _ANY], "bool"),
        _fn("k8s.ne", _k8s_ne, [_ANY, _ANY], "bool"),
        _fn("k8s.in", _k8s_in, [_ANY, _ANY], "bool"),
        _fn("k8s.in_set", _k8s_in_set, [_ANY, _ANY], "bool"),
        _fn("k8s.domain", _domain, [_ANY, _ANY], "dyn"),
        _fn("quantity", _quantity, ["string"], q),
        _fn("isQuantity", _is_quantity, ["string"], "bool"),
        _fn("sign", lambda v: _q(v).sign(), [_ANY], "int"),
        _fn("isGreaterThan", lambda a, b: _compare(a, b) == 1, [_ANY, _ANY], "bool", True),
        _fn("isLessThan", lambda a, b: _compare(a, b) == -1, [_ANY, _ANY], "bool", True),
        _fn("compareTo", _compare, [_ANY, _ANY], "int", True),
        _fn("asApproximateFloat", lambda v: _q(v).as_approximate_float(), [_ANY], "double", True),
        _fn("asInteger", _as_integer, [_ANY], "int", True),
        _fn("isInteger", lambda v: _q(v).as_int64() is not None, [_ANY], "bool", True),
        _fn("add", _add, [_ANY, _ANY], q, True),
        _fn("sub", _sub, [_ANY, _ANY], q, True),
        cel.FunctionDecl("semver", [
            cel.Overload("dra_semver_1", cel.Type(s), [cel.Type.STRING], impl=_semver),
            cel.Overload("dra_semver_2", cel.Type(s), [cel.Type.STRING, cel.Type.BOOL], impl=_semver)]),
        cel.FunctionDecl("isSemver", [
            cel.Overload("dra_is_semver_1", cel.Type.BOOL, [cel.Type.STRING], impl=_is_semver),
            cel.Overload("dra_is_semver_2", cel.Type.BOOL, [cel.Type.STRING, cel.Type.BOOL], impl=_is_semver)]),
        _fn("major", _major, [_ANY], "int", True),
        _fn("minor", _minor, [_ANY], "int", True),
        _fn("patch", _patch, [_ANY], "int", True),
        _fn("url", _url, ["string"], "kubernetes.URL"),
        _fn("isURL", _is_url, ["string"], "bool"),
        _fn("getScheme", _url_part("scheme"), [_ANY], "string", True),
        _fn("getHost", _url_part("host"), [_ANY], "string", True),
        _fn("getHostname", _url_part("hostname"), [_ANY], "string", True),
        _fn("getPort", _url_part("port"), [_ANY], "string", True),
        _fn("getEscapedPath", _url_part("path"), [_ANY], "string", True),
        _fn("getQuery", _url_part("query"), [_ANY], "map(string, list(string))", True),
        cel.FunctionDecl("ip", [
            cel.Overload("dra_ip", cel.Type("net.IP"), [cel.Type.STRING], impl=_ip),
            cel.Overload("dra_cidr_ip", cel.Type("net.IP"), [cel.Type("net.CIDR")], is_member=True,
                         impl=lambda c: IPMsg(v=str(_cidr_value(c).ip)))]),
        _fn("isIP", _is_ip, ["string"], "bool"),
        _fn("ip.isCanonical", lambda t: _is_ip(t) and str(ipaddress.ip_address(t)) == t, ["string"], "bool"),
        _fn("family", lambda v: _ip_value(v).version, [_ANY], "int", True),
        _fn("isUnspecified", lambda v: _ip_value(v).is_unspecified, [_ANY], "bool", True),
        _fn("isLoopback", lambda v: _ip_value(v).is_loopback, [_ANY], "bool", True),
        _fn("isLinkLocalMulticast", lambda v: _ip_value(v).is_multicast and _ip_value(v).is_link_local,
            [_ANY], "bool", True),
        _fn("isLinkLocalUnicast", lambda v: _ip_value(v).is_link_local and not _ip_value(v).is_multicast,
            [_ANY], "bool", True),
        _fn("isGlobalUnicast", lambda v: _ip_value(v).is_global, [_ANY], "bool", True),
        _fn("cidr", _cidr, ["string"], "net.CIDR"),
        _fn("isCIDR", _is_cidr, ["string"], "bool"),
        _fn("containsIP", _contains_ip, [_ANY, _ANY], "bool", True),
        _fn("containsCIDR", _contains_cidr, [_ANY, _ANY], "bool", True),
        _fn("prefixLength", lambda c: _cidr_value(c).network.prefixlen, [_ANY], "int", True),
        _fn("masked", lambda c: CIDRMsg(v=str(_cidr_value(c).network)), [_ANY], "net.CIDR", True),
        # one overload for both carriers: cel-cpp dispatches on the value kind (message)
        cel.FunctionDecl("string", [
            cel.Overload("dra_ip_cidr_to_string", cel.Type.STRING, [cel.Type("net.IP")], impl=_to_string)]),
        _fn("k8s_format_ok", _format_ok, [_ANY, "string"], "bool"),
        _fn("k8s_format_errors", _format_problems, [_ANY, "string"], "list(string)"),
    ]
    from dra_constructs.cel._decls import FORMAT_NAMES

    fns += [_fn(f"format.{name}", _format_constant(name), [], "kubernetes.NamedFormat") for name in FORMAT_NAMES]
    fns += _list_functions()
    del key
    return fns


_LOCK = threading.Lock()


@cache
def runtime_env(key: EnvKey) -> Any:
    """The evaluation environment of ``key`` (cel-cpp runtime + Kubernetes library impls)."""
    target = key.target
    extensions = [("strings", 2), ("optional", target.cel_optional_library_version), ("bindings", None),
                  ("sets", None)]
    if target.cel_has_two_var_comprehensions:
        extensions.append(("two-var-comprehensions", None))
    if target.cel_has_ext_lists:
        extensions.append(("lists", 2))  # cel-go v3 = v2 functions + cost estimators
    lines = ["name: dra-runtime", "extensions:"]
    for name, version in extensions:
        lines.append(f'  - name: "{name}"')
        if version is not None:
            lines.append(f"    version: {version}")
    with _LOCK:
        return cel.NewEnv(descriptor_pool=POOL, config=cel.NewEnvConfigFromYaml("\n".join(lines) + "\n"),
                          functions=_functions(key))
