"""The Kubernetes library costs of the CEL cost estimate (``cost.py``), and cel-go's ``AstNode``.

Port of ``EstimateCallCost`` in ``k8s.io/apiserver/pkg/cel/library/cost.go``: the calls of the
Kubernetes CEL libraries (quantity, semver, lists, regex, URLs, IPs, ...) priced by the sizes of
their receiver and arguments.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from dra_constructs.cel._costmath import MAX_UINT64, ONE, ZERO, Est, same_type, type_kind, type_name

__all__ = ["ACCUMULATORS", "K8S_PRICED", "LIST_CREATE", "MAP_CREATE", "PRICED_OVERLOADS", "REGEX_LENGTH",
           "STRING_COMPARISONS", "STRING_TRAVERSAL", "STRUCT_CREATE", "AstNode", "Sizer", "k8s_call_cost",
           "list_element"]

_STRING_TRAVERSAL = STRING_TRAVERSAL = 0.1
_REGEX_LENGTH = REGEX_LENGTH = 0.25
_LIST_CREATE, _MAP_CREATE, _STRUCT_CREATE = LIST_CREATE, MAP_CREATE, STRUCT_CREATE = 10, 30, 40
ACCUMULATORS = ("@result", "__result__", "@__result__")


class Sizer(Protocol):
    """What an ``AstNode`` and the library prices ask of the estimator."""

    semver_costs: bool

    def get_path(self, e: Any) -> list[str]: ...

    def compute_size(self, e: Any) -> Est | None: ...

    def k8s_size(self, node: AstNode) -> Est: ...


class AstNode:
    """cel-go ``AstNode`` (path, type, derived size) of a tree node, computed when first asked for."""

    __slots__ = ("_coster", "_path", "_size", "_sized", "expr", "type")

    def __init__(self, coster: Sizer | None, expr: Any, type_: Any,
                 path: list[str] | None = None, size: Est | None = None) -> None:
        self._coster = coster
        self.expr = expr
        self.type = type_
        self._path = path
        self._size = size
        self._sized = coster is None

    @property
    def path(self) -> list[str] | None:
        if self._coster is not None and self._path is None:
            path: list[str] | None = self._coster.get_path(self.expr)
            if path and path[0] in ACCUMULATORS:
                path = None
            self._path = path if path is not None else []
        return self._path or None

    @property
    def size(self) -> Est | None:
        if not self._sized and self._coster is not None:
            self._size = self._coster.compute_size(self.expr)
            self._sized = True
        return self._size


def list_element(node: AstNode) -> AstNode | None:
    t = node.type
    if t is None or t.WhichOneof("kind") != "list_type":
        return None
    path = None if node.path is None else [*node.path, "@items"]
    return AstNode(None, None, t.list_type.elem_type, path, None)


def k8s_call_cost(coster: Sizer, function: str, overload: str, target: AstNode | None,
                  args: list[AstNode]) -> tuple[Est, Est | None] | None:
    if function not in K8S_PRICED:  # most calls: one set lookup instead of the chain below
        return None
    size = coster.k8s_size
    if function == "_==_":  # the most common priced call: first, and the type names before serializing
        return _equality_cost(args) if len(args) == 2 else None
    if function == "check":
        return Est(350000, 350000), None
    if function in _NOMINAL or (coster.semver_costs and function in ("major", "minor", "patch")):
        return ONE, None
    if function in ("fieldSelector", "labelSelector") and len(args) == 1:
        length = size(args[0])
        parse = length.factor(_STRING_TRAVERSAL)
        requirements = length.factor(0.5).factor(float(_LIST_CREATE + _STRUCT_CREATE))
        return Est(_LIST_CREATE, _LIST_CREATE).add(parse).add(requirements), None
    if function in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf") and target is not None:
        elem = list_element(target)
        if elem is not None:
            el_cost = ONE
            if type_kind(elem.type) in ("string", "bytes"):
                el_cost = el_cost.add(size(elem).factor(_STRING_TRAVERSAL))
            return size(target).mul(el_cost), None
        return size(target).factor(_STRING_TRAVERSAL), None
    if function == "url" and len(args) == 1:
        sz = size(args[0])
        return sz.factor(_STRING_TRAVERSAL), sz
    if function in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
        sz = size(target)
        return sz.factor(_STRING_TRAVERSAL), sz
    if function == "replace" and target is not None and len(args) >= 2:
        return replace_cost(size(target), size(args[0]), size(args[1]))
    if function == "split" and target is not None:
        sz = size(target)
        high = sz.max
        if len(args) > 1:
            limit: Any = args[1].expr
            if limit.kind == "const_expr" and limit.const_kind == "int64_value":
                high = limit.value % (1 << 64)
        return sz.factor(2 * _STRING_TRAVERSAL), Est(0, high)
    if function == "join" and target is not None:
        list_size = size(target)
        result = ZERO
        elem = list_element(target)
        if elem is not None:
            result = list_size.mul(size(elem))
        if args:
            separators = Est(max(list_size.min - 1, 0), max(list_size.max - 1, 0))
            result = result.add(size(args[0]).mul(separators))
        return result.factor(_STRING_TRAVERSAL), result
    if function in ("find", "findAll") and target is not None and args:
        sz = size(target)
        str_cost = sz.add(ONE).factor(_STRING_TRAVERSAL)
        regex_cost = size(args[0]).factor(_REGEX_LENGTH)
        return str_cost.mul(regex_cost), Est(0, sz.max)
    if function in ("cidr", "isIP", "isCIDR") and args:
        return size(args[0]).factor(_STRING_TRAVERSAL), None
    if function == "ip":
        if overload == "cidr_ip":
            return ONE, None
        if args:
            return size(args[0]).factor(_STRING_TRAVERSAL), None
    if function == "ip.isCanonical" and args:
        return size(args[0]).factor(2 * _STRING_TRAVERSAL), None
    if function in ("containsIP", "containsCIDR") and target is not None and args:
        ip_size = Est(4, 16)
        cost = ip_size.add(ip_size).factor(_STRING_TRAVERSAL)
        if function == "containsCIDR":
            cost = cost.add(ip_size.factor(_STRING_TRAVERSAL)).add(ONE)
        if overload in ("cidr_contains_ip_string", "cidr_contains_cidr_string"):
            cost = cost.add(size(args[0]).factor(_STRING_TRAVERSAL))
        return cost, None
    quantity_like = ("quantity", "isQuantity") + (("semver", "isSemver") if coster.semver_costs else ())
    if function in quantity_like and args:
        return size(args[0]).factor(_STRING_TRAVERSAL), None
    if function == "validate" and args:
        return size(args[0]).factor(_STRING_TRAVERSAL).factor(64 * _REGEX_LENGTH), None
    return None



_EQUALITY_PRICED = ("net.IP", "net.CIDR", "kubernetes.Quantity", "kubernetes.Semver", "kubernetes.NamedFormat",
                    "kubernetes.URL")


def _equality_cost(args: list[AstNode]) -> tuple[Est, Est | None] | None:
    """``_==_`` of two values of one Kubernetes type (``EstimateCallCost``); ``None``: cel-go's own."""
    lhs, rhs = args
    name = type_name(lhs.type)
    if not (name in _EQUALITY_PRICED or name.startswith("kubernetes.authorization.")) \
            or not same_type(lhs.type, rhs.type):
        return None
    if name == "kubernetes.NamedFormat":
        return Est(1, 64).factor(_STRING_TRAVERSAL), None
    if name == "kubernetes.URL":
        url_size = ONE
        if rhs.size is not None:
            url_size = rhs.size.union(rhs.size)
        return Est(1, url_size.max).factor(_STRING_TRAVERSAL), None
    return ONE, None


def replace_cost(sz: Est, to_replace: Est, replace_with: Est) -> tuple[Est, Est]:
    count_max = count_min = retained_max = retained_min = 0
    if to_replace.min == 0:
        count_max = sz.max + 1 if sz.max < MAX_UINT64 else sz.max
        retained_max = sz.max
    elif replace_with.max <= to_replace.min:
        retained_max = sz.max
    else:
        count_max = math.ceil(sz.max / to_replace.min)
    if to_replace.max == 0:
        count_min = sz.min + 1 if sz.min < MAX_UINT64 else sz.min
        retained_min = sz.min
    elif to_replace.max <= replace_with.min:
        retained_min = sz.min
    else:
        count_min = math.ceil(sz.min / to_replace.max)
    result = Est(count_min, count_max).mul(replace_with).add(Est(retained_min, retained_max))
    return sz.factor(2 * _STRING_TRAVERSAL), result


_NOMINAL = {
    "serviceAccount", "path", "group", "resource", "subresource", "namespace", "name", "allowed", "reason",
    "error", "errored", "masked", "prefixLength", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
    "isLinkLocalUnicast", "isGlobalUnicast", "format.named", "sign", "asInteger", "isInteger", "asApproximateFloat",
    "isGreaterThan", "isLessThan", "compareTo", "add", "sub", "getScheme", "getHostname", "getHost", "getPort",
    "getEscapedPath", "getQuery",
}
#: Every overload ``function_cost`` prices specially (all others cost 1 plus their arguments).
PRICED_OVERLOADS = frozenset({
    "string_format", "string_to_bytes", "bytes_to_string", "strings_quote", "starts_with_string",
    "ends_with_string", "in_list", "matches_string", "contains_string", "logical_or", "logical_and", "conditional",
    "add_string", "add_bytes", "add_list",
}) | frozenset({
    "less_string", "greater_string", "less_equals_string", "greater_equals_string", "less_bytes", "greater_bytes",
    "less_equals_bytes", "greater_equals_bytes", "equals", "not_equals",
})
#: Every function ``k8s_call_cost`` prices (anything else falls through to cel-go's own costs).
K8S_PRICED = frozenset(_NOMINAL | {
    "check", "major", "minor", "patch", "fieldSelector", "labelSelector", "isSorted", "sum", "max", "min",
    "indexOf", "lastIndexOf", "url", "lowerAscii", "upperAscii", "substring", "trim", "replace", "split", "join",
    "find", "findAll", "cidr", "isIP", "isCIDR", "ip", "ip.isCanonical", "containsIP", "containsCIDR", "quantity",
    "isQuantity", "semver", "isSemver", "validate", "_==_",
})
STRING_COMPARISONS = {
    "less_string", "greater_string", "less_equals_string", "greater_equals_string", "less_bytes", "greater_bytes",
    "less_equals_bytes", "greater_equals_bytes", "equals", "not_equals",
}


