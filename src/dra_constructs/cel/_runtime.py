"""Evaluate a checked selector against a device with cel-cpp, as the scheduler does with cel-go.

cel-cpp's evaluator cannot hold values of abstract types, so the Kubernetes types travel as
small protobuf *carrier* messages (``kubernetes.Quantity{v}`` ...) whose functions are
implemented here in Python (``quantity``, ``semver`` ...: the Kubernetes libraries are the part
no engine provides). The checked AST from the type checker is then rewritten where Kubernetes'
cel-go runtime behaves differently from plain CEL, and handed to cel-cpp's evaluator:

* ``==``, ``!=`` and ``in`` on values that may hold a Kubernetes type use Go's semantics (a
  Quantity or Semver ``==`` another type is a "no such overload" error, as in cel-go, and so
  ``!=`` is true: cel-go's ``evalNe`` is ``Equal(l, r) != True``; ``in`` and ``indexOf`` skip
  the error);
* reading an unknown domain of ``device.attributes`` / ``device.capacity`` gives an empty map
  (the DRA compiler's custom mapper); an unknown attribute name stays a "no such key" error.
"""

from __future__ import annotations

import datetime
import ipaddress
import math
import re
import threading
import urllib.parse
from collections.abc import Callable
from functools import cache
from typing import Any

from cel_expr_python import cel
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from dra_constructs.cel import _astpb
from dra_constructs.cel._env import EnvKey
from dra_constructs.cel._regex import compile_pattern, find, find_all
from dra_constructs.cel.inventory import Device
from dra_constructs.cel.quantity import Quantity, QuantityError, parse_quantity
from dra_constructs.cel.semver import Semver, SemverError, normalize_and_parse, parse_semver

__all__ = ["CelRuntimeError", "DeviceError", "activation_for", "program_for", "run"]


class CelRuntimeError(Exception):
    """A run-time error of a selector: the scheduler fails the allocation, it is not a no-match."""


class DeviceError(CelRuntimeError):
    """The device itself cannot be turned into CEL values (e.g. an unparsable version)."""


# --- carriers ----------------------------------------------------------------------------------

_CARRIERS = {"kubernetes": ("Quantity", "Semver", "URL", "NamedFormat"), "net": ("IP", "CIDR")}
_F = descriptor_pb2.FieldDescriptorProto


def _carrier_pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for package, names in _CARRIERS.items():
        file = descriptor_pb2.FileDescriptorProto(name=f"dra_constructs/{package}_carriers.proto",
                                                  package=package, syntax="proto3")
        for name in names:
            message = file.message_type.add(name=name)
            message.field.add(name="v", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
        pool.Add(file)
    return pool


POOL = _carrier_pool()
_CLASSES: dict[str, Any] = {f"{p}.{n}": message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"{p}.{n}"))
            for p, names in _CARRIERS.items() for n in names}
QuantityMsg = _CLASSES["kubernetes.Quantity"]
SemverMsg = _CLASSES["kubernetes.Semver"]
URLMsg = _CLASSES["kubernetes.URL"]
FormatMsg = _CLASSES["kubernetes.NamedFormat"]
IPMsg = _CLASSES["net.IP"]
CIDRMsg = _CLASSES["net.CIDR"]
_CARRIER_TYPES = tuple(_CLASSES.values())


_NO_VALUE: Any = object()


def _no_overload(*_: Any) -> ValueError:
    return ValueError("no such overload")


def _q(value: Any) -> Quantity:
    if not isinstance(value, QuantityMsg):
        raise _no_overload()
    return Quantity.decode(value.v)


def _s(value: Any) -> Semver:
    if not isinstance(value, SemverMsg):
        raise _no_overload()
    return _semver_cache(value.v)


@cache
def _semver_cache(text: str) -> Semver:
    return parse_semver(text)


def quantity_msg(q: Quantity) -> Any:
    return QuantityMsg(v=q.encode())


def semver_msg(v: Semver) -> Any:
    return SemverMsg(v=v.encode())


# --- Go equality -------------------------------------------------------------------------------

def go_equal(lhs: Any, rhs: Any) -> bool:
    """cel-go ``types.Equal`` (raises ``ValueError`` where cel-go returns an error)."""
    if lhs is None or rhs is None:
        return lhs is None and rhs is None
    if isinstance(lhs, _CARRIER_TYPES):
        if type(lhs) is not type(rhs):
            raise _no_overload()
        if isinstance(lhs, QuantityMsg):
            return _q(lhs).cmp(_q(rhs)) == 0
        if isinstance(lhs, SemverMsg):
            return _s(lhs).compare(_s(rhs)) == 0
        return bool(lhs.v == rhs.v)
    if isinstance(lhs, bool) or isinstance(rhs, bool):
        return isinstance(lhs, bool) and isinstance(rhs, bool) and lhs == rhs
    if isinstance(lhs, int | float) and isinstance(rhs, int | float):
        if (isinstance(lhs, float) and math.isnan(lhs)) or (isinstance(rhs, float) and math.isnan(rhs)):
            return False
        return lhs == rhs
    if isinstance(lhs, str):
        return isinstance(rhs, str) and lhs == rhs
    if isinstance(lhs, bytes | bytearray):
        return isinstance(rhs, bytes | bytearray) and bytes(lhs) == bytes(rhs)
    if isinstance(lhs, list):
        if not isinstance(rhs, list) or len(lhs) != len(rhs):
            return False
        for a, b in zip(lhs, rhs, strict=True):
            try:
                if not go_equal(a, b):
                    return False
            except ValueError:  # cel-go's list equality only stops at False, not at errors
                continue
        return True
    if isinstance(lhs, dict):
        if not isinstance(rhs, dict) or len(lhs) != len(rhs):
            return False
        for key, value in lhs.items():
            found = [v for k, v in rhs.items() if _key_equal(k, key)]
            if not found:
                return False
            try:
                if not go_equal(value, found[0]):
                    return False
            except ValueError:
                continue
        return True
    if type(lhs) is type(rhs):
        return bool(lhs == rhs)
    return False


def _key_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b) and type(a) in (int, str) and type(b) in (int, str)


def _k8s_in(element: Any, container: Any) -> bool:
    """cel-go ``baseList.Contains``: ``element.Equal(item)``; errors are skipped."""
    if isinstance(container, list):
        for item in container:
            try:
                if go_equal(element, item):
                    return True
            except ValueError:
                continue
        return False
    if isinstance(container, dict):
        return any(_key_equal(element, key) for key in container)
    raise _no_overload()


def _k8s_in_set(element: Any, container: list[Any]) -> bool:
    """cel-go's ``OptOptimize`` set membership for ``x in [<primitive constants>]``.

    cel-go looks ``x`` up in a Go map: a Semver (a struct holding slices) or a list or map value
    is not hashable, and the evaluation fails with Go's panic message.
    """
    if isinstance(element, SemverMsg):
        raise ValueError("internal error: runtime error: hash of unhashable type cel.Semver")
    if isinstance(element, list | dict):
        kind = "types.baseList" if isinstance(element, list) else "types.baseMap"
        raise ValueError(f"internal error: runtime error: hash of unhashable type {kind}")
    return _k8s_in(element, container)


def _k8s_ne(lhs: Any, rhs: Any) -> bool:
    """cel-go ``evalNe``: ``types.Bool(types.Equal(lVal, rVal) != types.True)`` (interpreter/
    interpretable.go, v0.22-v0.27): an equality that is an error (a Quantity, Semver, URL, IP or
    CIDR against another type) makes ``!=`` true, where ``==`` stays the error."""
    try:
        return not go_equal(lhs, rhs)
    except ValueError:
        return True


def _domain(mapping: Any, key: Any) -> Any:
    """The DRA compiler's mapper: an unknown domain reads as an empty map."""
    if not isinstance(mapping, dict):
        raise _no_overload()
    return mapping.get(key, {})


# --- Kubernetes libraries ----------------------------------------------------------------------

def _quantity(text: str) -> Any:
    try:
        return quantity_msg(parse_quantity(text))
    except QuantityError as error:
        raise ValueError(str(error)) from None


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _semver(text: str, normalize: bool = False) -> Any:
    try:
        return semver_msg(normalize_and_parse(text) if normalize else parse_semver(text))
    except SemverError as error:
        raise ValueError(str(error)) from None


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        normalize_and_parse(text) if normalize else parse_semver(text)
    except SemverError:
        return False
    return True


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, QuantityMsg):
        return _q(a).cmp(_q(b))
    if isinstance(a, SemverMsg):
        return _s(a).compare(_s(b))
    raise _no_overload()


def _as_integer(q: Any) -> int:
    value = _q(q).as_int64()
    if value is None:
        raise ValueError("cannot convert value to integer")
    return value


def _add(a: Any, b: Any) -> Any:
    other = Quantity.from_int(b) if isinstance(b, int) and not isinstance(b, bool) else _q(b)
    return quantity_msg(_q(a).add(other))


def _sub(a: Any, b: Any) -> Any:
    other = Quantity.from_int(b) if isinstance(b, int) and not isinstance(b, bool) else _q(b)
    return quantity_msg(_q(a).sub(other))


def _major(v: Any) -> int:
    return _s(v).major


def _minor(v: Any) -> int:
    return _s(v).minor


def _patch(v: Any) -> int:
    return _s(v).patch


def _ordered(items: list[Any]) -> list[Any]:
    return [bytes(i) if isinstance(i, bytearray) else i for i in items]


def _is_sorted(items: list[Any]) -> bool:
    values = _ordered(items)
    return all(not values[i + 1] < values[i] for i in range(len(values) - 1))


_INT64 = (-(1 << 63), (1 << 63) - 1)
_UINT64_MAX = (1 << 64) - 1


def _sum_of(kind: str) -> Callable[[list[Any]], Any]:
    """``list(T).sum()``, ``T``'s zero for an empty list (apiserver ``lists.go``); Go overflow errors."""
    zero: Any = {"int": 0, "uint": 0, "double": 0.0, "duration": datetime.timedelta(0)}[kind]

    def total(items: list[Any]) -> Any:
        result = zero
        for item in items:
            result = result + item
            if kind == "int" and not _INT64[0] <= result <= _INT64[1]:
                raise ValueError("integer overflow")
            if kind == "uint" and result > _UINT64_MAX:
                raise ValueError("unsigned integer overflow")
        return result
    return total


def _extreme(name: str, pick: Callable[..., Any]) -> Callable[[list[Any]], Any]:
    def extreme(items: list[Any]) -> Any:
        if not items:
            raise ValueError(f"{name}(list) called on empty list")
        return pick(_ordered(items))
    return extreme


def _sum_dyn(items: list[Any]) -> Any:
    if not items:
        return 0
    return _sum_of("double" if isinstance(items[0], float) else "duration"
                   if isinstance(items[0], datetime.timedelta) else "int")(items)


def _equal_is_true(lhs: Any, rhs: Any) -> bool:
    """``lhs.Equal(rhs) == types.True``: an equality error counts as not equal."""
    try:
        return go_equal(lhs, rhs)
    except ValueError:
        return False


def _index_of(items: list[Any], element: Any) -> int:
    """Kubernetes ``indexOf`` (apiserver pkg/cel/library/lists.go): ``Get(i).Equal(item) == types.True``."""
    for index, item in enumerate(items):
        if _equal_is_true(item, element):
            return index
    return -1


def _last_index_of(items: list[Any], element: Any) -> int:
    for index in range(len(items) - 1, -1, -1):
        if _equal_is_true(items[index], element):
            return index
    return -1


def _sets_contains(items: list[Any], sublist: list[Any]) -> bool:
    """cel-go ``setsContains`` (ext/sets.go): every element of ``sublist`` by ``baseList.Contains``
    (``elem.Equal(item) == True``: a Quantity matches an equal Quantity however written, and an
    equality error skips the item)."""
    return all(_k8s_in(element, items) for element in sublist)


def _sets_equivalent(a: list[Any], b: list[Any]) -> bool:
    """cel-go ``setsEquivalent``: ``setsContains(a, b) && setsContains(b, a)``."""
    return _sets_contains(a, b) and _sets_contains(b, a)


def _sets_intersects(a: list[Any], b: list[Any]) -> bool:
    """cel-go ``setsIntersects``: some element of ``a`` is contained in ``b``."""
    return any(_k8s_in(element, b) for element in a)


def _distinct(items: list[Any]) -> list[Any]:
    """cel-go ``distinctList`` (ext/lists.go): first occurrences, by ``val.Equal(other) == True``."""
    unique: list[Any] = []
    for item in items:
        if not any(_equal_is_true(item, other) for other in unique):
            unique.append(item)
    return unique


def _substring(text: str, start: int, end: int) -> str:
    """cel-go ``strings`` ``substring(start, end)`` (cel-cpp rejects ``end == size()``)."""
    if start > end:
        raise ValueError(f"invalid substring range. start: {start}, end: {end}")
    if start < 0 or start > len(text):
        raise ValueError(f"index out of range: {start}")
    if end < 0 or end > len(text):
        raise ValueError(f"index out of range: {end}")
    return text[start:end]


def _map_insert(mapping: Any, key: Any, value: Any = _NO_VALUE) -> dict[Any, Any]:
    """cel-go's ``cel.@mapInsert`` (the ``transformMap``/``transformMapEntry`` macros' step)."""
    if not isinstance(mapping, dict):
        raise _no_overload()
    entries = dict(mapping)
    if value is _NO_VALUE:  # @mapInsert(map, map): merge the entry map of transformMapEntry
        if not isinstance(key, dict):
            raise _no_overload()
        for k, v in key.items():
            if any(_key_equal(k, existing) for existing in entries):
                raise ValueError(f"insert failed: key {k} already exists")
            entries[k] = v
        return entries
    if any(_key_equal(key, existing) for existing in entries):
        raise ValueError(f"insert failed: key {key} already exists")
    entries[key] = value
    return entries


def _url(text: str) -> Any:
    parsed = urllib.parse.urlsplit(text)
    if not (parsed.scheme or text.startswith("/")):
        raise ValueError(f"URL {text!r} is not an absolute URI or an absolute path")
    return URLMsg(v=text)


def _is_url(text: str) -> bool:
    try:
        _url(text)
    except ValueError:
        return False
    return True


def _url_part(part: str) -> Callable[[Any], Any]:
    def get(u: Any) -> Any:
        if not isinstance(u, URLMsg):
            raise _no_overload()
        parsed = urllib.parse.urlsplit(u.v)
        if part == "scheme":
            return parsed.scheme
        if part == "host":
            return parsed.netloc.rpartition("@")[2]
        if part == "hostname":
            return parsed.hostname or ""
        if part == "port":
            return str(parsed.port or "")
        if part == "path":
            return parsed.path
        return {k: v for k, v in urllib.parse.parse_qs(parsed.query, keep_blank_values=True).items()}
    return get


def _ip(text: str) -> Any:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"IP Address {text!r} parse error during conversion from string") from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {text!r} is not allowed")
    return IPMsg(v=str(address))


def _is_ip(text: str) -> bool:
    try:
        _ip(text)
    except ValueError:
        return False
    return True


def _ip_value(value: Any) -> Any:
    if not isinstance(value, IPMsg):
        raise _no_overload()
    return ipaddress.ip_address(value.v)


def _cidr(text: str) -> Any:
    try:
        network = ipaddress.ip_interface(text)
    except ValueError:
        raise ValueError(f"network address parse error during conversion from string: {text}") from None
    return CIDRMsg(v=str(network))


def _is_cidr(text: str) -> bool:
    try:
        _cidr(text)
    except ValueError:
        return False
    return True


def _cidr_value(value: Any) -> Any:
    if not isinstance(value, CIDRMsg):
        raise _no_overload()
    return ipaddress.ip_interface(value.v)


def _contains_ip(cidr_value: Any, other: Any) -> bool:
    network = _cidr_value(cidr_value).network
    address = ipaddress.ip_address(other) if isinstance(other, str) else _ip_value(other)
    return address in network


def _contains_cidr(cidr_value: Any, other: Any) -> bool:
    network = _cidr_value(cidr_value).network
    inner = ipaddress.ip_interface(other).network if isinstance(other, str) else _cidr_value(other).network
    return bool(inner.version == network.version and inner.subnet_of(network))


def _to_string(value: Any) -> str:
    if isinstance(value, IPMsg | CIDRMsg):
        return str(value.v)
    raise _no_overload()


_DNS1123_LABEL = compile_pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = compile_pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1035_LABEL = compile_pattern(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED = compile_pattern(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = compile_pattern(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_UUID = compile_pattern(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_BASE64 = compile_pattern(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$")


def _format_errors(name: str, text: str) -> list[str]:
    """apimachinery name validators behind ``format.<name>().validate(s)`` (the common rules)."""
    prefix = name.endswith("Prefix")
    base = name.removesuffix("Prefix")
    if prefix:
        text = text[:-1] if text.endswith("-") else text
    checks: dict[str, tuple[Any, int]] = {
        "dns1123Label": (_DNS1123_LABEL, 63), "dns1123Subdomain": (_DNS1123_SUBDOMAIN, 253),
        "dns1035Label": (_DNS1035_LABEL, 63), "labelValue": (_LABEL_VALUE, 63), "uuid": (_UUID, 36),
        "byte": (_BASE64, 1 << 30),
    }
    if base in checks:
        pattern, limit = checks[base]
        errors = []
        if len(text) > limit:
            errors.append(f"must be no more than {limit} characters")
        if not pattern.match(text):
            errors.append(f"must match the {base} format")
        return errors
    if base == "qualifiedName":
        domain, _, local = text.rpartition("/")
        errors = []
        if not _QUALIFIED.match(local) or len(local) > 63:
            errors.append("name part must consist of alphanumeric characters, '-', '_' or '.'")
        if domain and not _DNS1123_SUBDOMAIN.match(domain):
            errors.append("prefix part must be a DNS subdomain")
        return errors
    if base == "date":
        try:
            datetime.date.fromisoformat(text)
        except ValueError:
            return ["must be a date in the format YYYY-MM-DD"]
        return []
    if base == "datetime":
        try:
            datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return ["must be a RFC3339 date-time"]
        return []
    if base == "uri":
        return [] if _is_url(text) else ["must be a URI"]
    return []


def _format_constant(name: str) -> Callable[[], Any]:
    return lambda: FormatMsg(v=name)


def _format_problems(fmt: Any, text: str) -> list[str]:
    """The errors of ``fmt.validate(text)``; the rewriter wraps them into the optional result."""
    if not isinstance(fmt, FormatMsg):
        raise _no_overload()
    return _format_errors(fmt.v, text)


def _format_ok(fmt: Any, text: str) -> bool:
    return not _format_problems(fmt, text)


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


# --- AST rewriting -----------------------------------------------------------------------------

def _is_simple(t: Any) -> bool:
    """A type whose plain-CEL equality equals cel-go's (no Kubernetes type can hide in it)."""
    if t is None:
        return False
    kind = t.WhichOneof("kind")
    if kind in ("primitive", "null", "well_known", "wrapper", "type"):
        return bool(kind != "well_known" or t.well_known != 1)
    if kind == "list_type":
        return _is_simple(t.list_type.elem_type)
    if kind == "map_type":
        return _is_simple(t.map_type.key_type) and _is_simple(t.map_type.value_type)
    return False


_PRIMITIVE_CONSTANTS = frozenset({"bool_value", "double_value", "int64_value", "string_value", "uint64_value"})


def _constant_primitive_list(e: Any) -> bool:
    """A non-empty list literal of bool/int/uint/double/string constants (cel-go makes it a set)."""
    elements = e.list_expr.elements if e.WhichOneof("kind") == "list_expr" else []
    return bool(elements) and not e.list_expr.optional_indices and all(
        el.WhichOneof("kind") == "const_expr" and el.const_expr.WhichOneof("kind") in _PRIMITIVE_CONSTANTS
        for el in elements)


#: Calls whose result is an optional (then possibly seen through ``dyn``).
_OPTIONAL_SOURCES = frozenset({"_[?_]", "_?._", "optional.of", "optional.ofNonZeroValue", "optional.none", "or",
                               "first", "last", "optMap", "optFlatMap"})


def _holds_optional(t: Any) -> bool:
    """Can a value of checked type ``t`` be, or contain, an optional?"""
    if t is None:
        return False
    kind = t.WhichOneof("kind")
    if kind == "abstract_type":
        return t.abstract_type.name == "optional_type" or any(_holds_optional(p)
                                                               for p in t.abstract_type.parameter_types)
    if kind == "list_type":
        return _holds_optional(t.list_type.elem_type)
    if kind == "map_type":
        return _holds_optional(t.map_type.key_type) or _holds_optional(t.map_type.value_type)
    return False


def _kind(t: Any) -> str | None:
    return None if t is None else t.WhichOneof("kind")


def _is_device_map(t: Any) -> bool:
    """``map(string, map(string, dyn|Quantity))``: the type of ``device.attributes``/``capacity``."""
    if t is None or t.WhichOneof("kind") != "map_type":
        return False
    inner = t.map_type.value_type
    if inner.WhichOneof("kind") != "map_type":
        return False
    value = inner.map_type.value_type
    return bool(value.WhichOneof("kind") == "dyn" or (
        value.WhichOneof("kind") == "abstract_type" and value.abstract_type.name == "kubernetes.Quantity"))


class _Rewriter:
    def __init__(self, checked: Any) -> None:
        self.checked = checked
        self.types = checked.type_map
        self.next_id: int = max([0, *checked.type_map.keys(), *checked.reference_map.keys(),
                                 *checked.source_info.positions.keys()]) + 1

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def type_of(self, e: Any) -> Any:
        return self.types.get(e.id, None)

    def rename(self, e: Any, function: str) -> None:
        e.call_expr.function = function
        if e.id in self.checked.reference_map:
            del self.checked.reference_map[e.id]

    def fresh(self, e: Any) -> Any:
        """A copy of subtree ``e`` with new node ids (ids must stay unique)."""
        copy = _astpb.Expr()
        copy.CopyFrom(e)
        stack = [copy]
        while stack:
            node = stack.pop()
            node.id = self.new_id()
            kind = node.WhichOneof("kind")
            if kind == "select_expr":
                stack.append(node.select_expr.operand)
            elif kind == "call_expr":
                if node.call_expr.HasField("target"):
                    stack.append(node.call_expr.target)
                stack.extend(node.call_expr.args)
            elif kind == "list_expr":
                stack.extend(node.list_expr.elements)
            elif kind == "struct_expr":
                for entry in node.struct_expr.entries:
                    entry.id = self.new_id()
                    if entry.HasField("map_key"):
                        stack.append(entry.map_key)
                    stack.append(entry.value)
            elif kind == "comprehension_expr":
                c = node.comprehension_expr
                stack.extend([c.iter_range, c.accu_init, c.loop_condition, c.loop_step, c.result])
        return copy

    def domain_lookup(self, operand: Any, key: Any) -> Any:
        """``key in operand ? operand[key] : {}`` (the DRA mapper, in plain CEL: no callback)."""
        test = _astpb.Expr()
        test.id = self.new_id()
        test.call_expr.function = "@in"
        test.call_expr.args.add().CopyFrom(self.fresh(key))
        test.call_expr.args.add().CopyFrom(self.fresh(operand))
        index = _astpb.Expr()
        index.id = self.new_id()
        index.call_expr.function = "_[_]"
        index.call_expr.args.add().CopyFrom(self.fresh(operand))
        index.call_expr.args.add().CopyFrom(self.fresh(key))
        empty = _astpb.Expr()
        empty.id = self.new_id()
        empty.struct_expr.SetInParent()
        node = _astpb.Expr()
        node.id = self.new_id()
        node.call_expr.function = "_?_:_"
        for part in (test, index, empty):
            node.call_expr.args.add().CopyFrom(part)
        return node

    def domain_call(self, e: Any, operand: Any, key: Any) -> None:
        """Turn node ``e`` into the mapper lookup ``operand[key]`` with an empty-map default."""
        node_id = e.id
        replacement = self.domain_lookup(operand, key)
        e.CopyFrom(replacement)
        e.id = node_id
        if node_id in self.checked.reference_map:
            del self.checked.reference_map[node_id]

    def const_string(self, text: str) -> Any:
        node = _astpb.Expr()
        node.id = self.new_id()
        node.const_expr.string_value = text
        return node

    def may_be_optional(self, e: Any) -> bool:
        """Can ``e`` be, or hold, an optional at run time? (Passing one to Python crashes cel_expr_python.)

        By its type, or, for a ``dyn`` value, by an optional-producing call inside it.
        """
        if _holds_optional(self.type_of(e)):
            return True
        stack = [e]
        while stack:
            node = stack.pop()
            kind = node.WhichOneof("kind")
            if kind == "call_expr":
                if node.call_expr.function in _OPTIONAL_SOURCES:
                    return True
                if node.call_expr.HasField("target"):
                    stack.append(node.call_expr.target)
                stack.extend(node.call_expr.args)
            elif kind == "select_expr":
                stack.append(node.select_expr.operand)
            elif kind == "list_expr":
                stack.extend(node.list_expr.elements)
            elif kind == "struct_expr":
                stack.extend(entry.value for entry in node.struct_expr.entries)
            elif kind == "comprehension_expr":
                comp = node.comprehension_expr
                stack.extend((comp.iter_range, comp.accu_init, comp.loop_step, comp.result))
        return False

    def overloads(self, e: Any) -> list[str]:
        ref = self.checked.reference_map.get(e.id)
        return list(ref.overload_id) if ref is not None else []

    def call(self, function: str, *args: Any) -> Any:
        node = _astpb.Expr()
        node.id = self.new_id()
        node.call_expr.function = function
        for arg in args:
            node.call_expr.args.add().CopyFrom(arg)
        return node

    def rename_library_call(self, e: Any) -> bool:
        """Library calls that run as Python functions here (cel-cpp lacks or differs from them)."""
        call = e.call_expr
        ids = self.overloads(e)
        if call.function == "validate" and ids == ["format-validate"]:
            # fmt.validate(s) -> k8s_format_ok(fmt, s) ? optional.none() : optional.of(k8s_format_errors(fmt, s))
            fmt, text = call.target, call.args[0]
            test = self.call("k8s_format_ok", self.fresh(fmt), self.fresh(text))
            errors = self.call("optional.of", self.call("k8s_format_errors", self.fresh(fmt), self.fresh(text)))
            node_id = e.id
            e.CopyFrom(self.call("_?_:_", test, self.call("optional.none"), errors))
            e.id = node_id
            self.checked.reference_map.pop(node_id, None)
            return True
        operands = ([call.target] if call.HasField("target") else []) + list(call.args)
        if any(self.may_be_optional(operand) for operand in operands):
            return False  # cel_expr_python crashes on an optional passed to Python: leave it to cel-cpp
        if call.function == _MAP_INSERT:
            self.rename(e, "k8s_map_insert")
            return True
        renamed = {RENAMED_OVERLOADS.get(i, "") for i in ids}
        if len(renamed) == 1 and "" not in renamed:
            self.rename(e, renamed.pop())
            return True
        if call.function in RENAMED_FUNCTIONS and call.HasField("target"):
            self.rename(e, RENAMED_FUNCTIONS[call.function])
            return True
        return False

    def visit(self, e: Any) -> None:
        kind = e.WhichOneof("kind")
        if kind == "select_expr":
            self.visit(e.select_expr.operand)
            operand = e.select_expr.operand
            if _is_device_map(self.type_of(operand)):
                if e.select_expr.test_only:
                    e.ClearField("select_expr")
                    e.const_expr.bool_value = True
                else:
                    operand_copy = _astpb.Expr()
                    operand_copy.CopyFrom(operand)
                    self.domain_call(e, operand_copy, self.const_string(e.select_expr.field))
        elif kind == "call_expr":
            call = e.call_expr
            if call.HasField("target"):
                self.visit(call.target)
            for arg in call.args:
                self.visit(arg)
            function, args = call.function, call.args
            if self.rename_library_call(e):
                return
            if any(self.may_be_optional(arg) for arg in args):
                pass  # optionals never go to Python (cel_expr_python crashes): cel-cpp's own semantics
            elif function in ("_==_", "_!=_") and len(args) == 2 and not (
                    _is_simple(self.type_of(args[0])) and _is_simple(self.type_of(args[1]))):
                self.rename(e, "k8s.eq" if function == "_==_" else "k8s.ne")
            elif function == "@in" and len(args) == 2 and not _is_simple(self.type_of(args[0])) \
                    and _constant_primitive_list(args[1]):
                self.rename(e, "k8s.in_set")
            elif function == "@in" and len(args) == 2 and not _is_simple(self.type_of(args[1])) \
                    and _kind(self.type_of(args[1])) != "map_type":  # map membership is by key: unchanged
                self.rename(e, "k8s.in")
            elif function == "_[_]" and len(args) == 2 and _is_device_map(self.type_of(args[0])):
                operand, key = _astpb.Expr(), _astpb.Expr()
                operand.CopyFrom(args[0])
                key.CopyFrom(args[1])
                self.domain_call(e, operand, key)
            elif function in ("_[?_]", "_?._") and len(args) == 2 and _is_device_map(self.type_of(args[0])):
                inner = self.domain_lookup(args[0], args[1])
                wrapper = _astpb.Expr()
                wrapper.id = e.id
                wrapper.call_expr.function = "optional.of"
                wrapper.call_expr.args.add().CopyFrom(inner)
                e.CopyFrom(wrapper)
                if e.id in self.checked.reference_map:
                    del self.checked.reference_map[e.id]
        elif kind == "list_expr":
            for element in e.list_expr.elements:
                self.visit(element)
        elif kind == "struct_expr":
            for entry in e.struct_expr.entries:
                if entry.HasField("map_key"):
                    self.visit(entry.map_key)
                self.visit(entry.value)
        elif kind == "comprehension_expr":
            comp = e.comprehension_expr
            for part in (comp.iter_range, comp.accu_init, comp.loop_condition, comp.loop_step, comp.result):
                self.visit(part)


def rewrite(checked: Any) -> Any:
    """A copy of ``checked`` with the Kubernetes runtime semantics wired in."""
    copy = _astpb.CheckedExpr()
    copy.CopyFrom(checked)
    _Rewriter(copy).visit(copy.expr)
    return copy


_programs: dict[tuple[bytes, EnvKey], Any] = {}


def program_for(serialized: bytes, checked: Any, key: EnvKey) -> Any:
    """The cel-cpp program of a checked selector (cached per expression and environment)."""
    cache_key = (serialized, key)
    program = _programs.get(cache_key)
    if program is None:
        try:
            program = runtime_env(key).deserialize(_astpb.encode_checked(rewrite(checked)))
        except Exception as error:  # an engine refusal is this selector's run-time error, never a crash
            if "Cannot parse serialized" in str(error):  # C++ protobuf's depth limit of 100 messages
                raise CelRuntimeError("not evaluated here: the checked AST nests deeper than cel-cpp can load "
                                      "(protobuf depth limit 100; the API server evaluates it)") from None
            raise CelRuntimeError(go_message(str(error))) from None
        if len(_programs) > 1 << 14:
            _programs.clear()
        _programs[cache_key] = program
    return program


# --- devices -----------------------------------------------------------------------------------

def _attribute_value(name: str, value: Any) -> Any:
    kinds = [k for k in ("int", "bool", "string", "version") if k in value]
    if not kinds:
        raise DeviceError(f"attribute {name}: unsupported attribute value")
    kind = kinds[0]
    raw = value[kind]
    if kind == "version":
        try:
            return semver_msg(parse_semver(str(raw)))
        except SemverError as error:
            raise DeviceError(f"attribute {name}: parse semantic version: {error}") from None
    if kind == "int":
        return int(raw)
    if kind == "bool":
        return bool(raw)
    return str(raw)


def device_values(device: Device, with_multi: bool) -> dict[str, Any]:
    """The activation data of ``device`` (``compile.go``'s ``DeviceMatches``)."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in device.attributes.items():
        domain, _, ident = name.rpartition("/")
        attributes.setdefault(domain or device.driver, {})[ident] = _attribute_value(name, value)
    capacity: dict[str, dict[str, Any]] = {}
    for name, text in device.capacity.items():
        domain, _, ident = name.rpartition("/")
        try:
            capacity.setdefault(domain or device.driver, {})[ident] = quantity_msg(parse_quantity(text))
        except QuantityError as error:
            raise DeviceError(f"capacity {name}: {error}") from None
    record: dict[str, Any] = {"driver": device.driver, "attributes": attributes, "capacity": capacity}
    if with_multi:
        record["allowMultipleAllocations"] = bool(device.allow_multiple_allocations)
    return {"device": record, "device.attributes": attributes, "device.capacity": capacity}


_activations: dict[tuple[int, EnvKey], tuple[Device, Any]] = {}


def activation_for(device: Device, key: EnvKey) -> Any:
    """A reusable cel-cpp activation for ``device`` (or raises :class:`DeviceError`)."""
    cache_key = (id(device), key)
    found = _activations.get(cache_key)
    if found is not None and found[0] is device:
        return found[1]
    values = device_values(device, key.allow_multiple_allocations)
    try:
        activation = runtime_env(key).Activation(values)
    except Exception as error:  # a value cel-cpp cannot hold: this device's error, not a crash
        raise DeviceError(f"device {device.id}: {go_message(str(error))}") from None
    if len(_activations) > 1 << 15:
        _activations.clear()
    _activations[cache_key] = (device, activation)
    return activation


_STATUS = re.compile(r"^[A-Z_]+: |\s*\[[A-Z_]+\]$")
_NO_KEY = re.compile(r'Key not found in map\s*:\s*"?(.*?)"?$')


def go_message(message: str) -> str:
    """cel-cpp error text in cel-go's words where they differ."""
    message = _STATUS.sub("", str(message).strip())
    found = _NO_KEY.search(message)
    if found:
        return f"no such key: {found.group(1)}"
    if message.startswith("No matching overloads found"):
        return "no such overload: " + message.split(":", 1)[-1].strip()
    if message == "divide by zero":
        return "division by zero"
    return message


def run(program: Any, activation: Any) -> bool:
    """Evaluate; ``True``/``False`` or :class:`CelRuntimeError` (for any engine failure too)."""
    try:
        value = program.eval(activation)
        kind = value.type()
    except Exception as error:  # cel-cpp raises RuntimeError (UNIMPLEMENTED, INVALID_ARGUMENT...)
        raise CelRuntimeError(go_message(str(error))) from None
    if kind == cel.Type.BOOL:
        return bool(value.value())
    if kind == cel.Type.ERROR:
        raise CelRuntimeError(go_message(value.value()))
    raise CelRuntimeError(f"CEL result of type {kind.name().lower()} could not be converted to bool")
