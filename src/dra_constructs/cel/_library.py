"""The Kubernetes CEL libraries at run time, in Python: quantity, semver, lists, sets, strings,
URLs, IP and CIDR, format (cel-cpp lacks them or differs).
"""

from __future__ import annotations

import datetime
import ipaddress
import urllib.parse
from collections.abc import Callable
from typing import Any

from dra_constructs.cel._regex import compile_pattern
from dra_constructs.cel._values import (
    _NO_VALUE,
    CIDRMsg,
    FormatMsg,
    IPMsg,
    QuantityMsg,
    SemverMsg,
    URLMsg,
    _k8s_in,
    _key_equal,
    _no_overload,
    _q,
    _s,
    go_equal,
    quantity_msg,
    semver_msg,
)
from dra_constructs.cel.quantity import Quantity, QuantityError, parse_quantity
from dra_constructs.cel.semver import SemverError, normalize_and_parse, parse_semver

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
