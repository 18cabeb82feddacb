"""Field checks the API server applies, done before output so errors name our construct, not a 422."""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from dra_constructs.errors import DraConstructsError

__all__ = [
    "DNS1123_LABEL_MAX",
    "DNS1123_SUBDOMAIN_MAX",
    "Where",
    "check_annotations",
    "check_dns_label",
    "check_dns_subdomain",
    "check_int",
    "check_label_value",
    "check_labels",
    "check_max_items",
    "check_quantity",
    "check_unique",
    "did_you_mean",
    "label_value",
    "object_metadata",
    "to_dns_label",
]

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Kubernetes resource.Quantity serialization: <signedNumber><suffix>, suffix binary | decimal | exponent.
_QUANTITY = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")

#: Where an error happened: a construct path, or a callable producing it only when needed
#: (construct paths cost a round trip to the jsii kernel, so they are built lazily).
Where = str | Callable[[], str]


def _where(where: Where) -> str:
    return where if isinstance(where, str) else where()


def check_dns_label(where: Where, field: str, value: Any) -> str:
    """RFC 1123 label: lowercase alphanumerics and '-', at most 63 characters."""
    if not isinstance(value, str) or len(value) > DNS1123_LABEL_MAX or not _LABEL.match(value):
        raise DraConstructsError(
            _where(where), field, value,
            "must be a DNS label (RFC 1123: lowercase letters, digits and '-', starting and ending "
            f"with a letter or digit, at most {DNS1123_LABEL_MAX} characters)",
            f"use a name like {to_dns_label(str(value)) or 'gpu'!r}",
        )
    return value


def check_dns_subdomain(where: Where, field: str, value: Any) -> str:
    """RFC 1123 subdomain: dot-separated labels, at most 253 characters."""
    if not isinstance(value, str) or len(value) > DNS1123_SUBDOMAIN_MAX or not _SUBDOMAIN.match(value):
        raise DraConstructsError(
            _where(where), field, value,
            "must be a DNS subdomain (RFC 1123: lowercase letters, digits, '-' and '.', at most "
            f"{DNS1123_SUBDOMAIN_MAX} characters)",
            f"use a name like {to_dns_label(str(value)) or 'gpu'!r}",
        )
    return value


def check_quantity(where: Where, field: str, value: Any) -> str:
    """A Kubernetes quantity string such as ``40Gi``, ``500M`` or ``1.5e9``."""
    if not isinstance(value, str) or not _QUANTITY.match(value):
        raise DraConstructsError(
            _where(where), field, value, "not a Kubernetes quantity",
            "write a number with an optional suffix, e.g. '40Gi' (binary) or '40G' (decimal)",
        )
    return value


def check_max_items(where: Where, field: str, items: list[Any], limit: int, what: str) -> None:
    """API list limits (32 requests per claim, 32 selectors per request, ...)."""
    if len(items) > limit:
        raise DraConstructsError(
            _where(where), field, f"{len(items)} {what}", f"the API allows at most {limit} {what}",
            f"split the work into several claims or combine {what}",
        )


def check_unique(where: Where, field: str, names: Iterable[str], fix: str) -> None:
    """Names that must be unique within a list (requests, pod claims, containers)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise DraConstructsError(_where(where), field, name, "duplicate name", fix)
        seen.add(name)


_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _check_qualified_key(where: Where, field: str, key: Any) -> None:
    prefix, _, name = key.rpartition("/") if isinstance(key, str) else ("", "", "")
    if (not isinstance(key, str) or not name or len(name) > 63 or not _QUALIFIED_NAME.match(name)
            or (prefix and (len(prefix) > DNS1123_SUBDOMAIN_MAX or not _SUBDOMAIN.match(prefix)))):
        raise DraConstructsError(
            _where(where), field, key,
            "not a qualified name (optional DNS-subdomain prefix and '/', then at most 63 alphanumerics, "
            "'-', '_' or '.', starting and ending alphanumeric)",
            "use a key like 'example.com/team' or 'team'",
        )


def check_labels(where: Where, field: str, labels: Mapping[str, str] | None) -> dict[str, str] | None:
    """Label keys are qualified names; values are empty or at most 63 name characters."""
    if not labels:
        return None
    if not isinstance(labels, Mapping):
        raise DraConstructsError(_where(where), field, labels, f"must be a mapping of label keys to values, "
                                 f"not {type(labels).__name__}", f"pass {field}={{'key': 'value'}}")
    for key, value in labels.items():
        _check_qualified_key(where, f"{field}[{key!r}]", key)
        check_label_value(where, f"{field}[{key!r}]", value)
    return dict(labels)


def check_annotations(where: Where, field: str, annotations: Mapping[str, str] | None) -> dict[str, str] | None:
    """Annotation keys are qualified names; values are strings (256 KiB in total)."""
    if not annotations:
        return None
    if not isinstance(annotations, Mapping):
        raise DraConstructsError(_where(where), field, annotations, f"must be a mapping of annotation keys to "
                                 f"values, not {type(annotations).__name__}", f"pass {field}={{'key': 'value'}}")
    for key, value in annotations.items():
        _check_qualified_key(where, f"{field}[{key!r}]", key)
        if not isinstance(value, str):
            raise DraConstructsError(_where(where), f"{field}[{key!r}]", value, "annotation values are strings",
                                     "convert the value with str() or json.dumps()")
    if sum(len(k) + len(v) for k, v in annotations.items()) > 256 * 1024:
        raise DraConstructsError(_where(where), field, f"{len(annotations)} annotations",
                                 "annotations exceed 256 KiB in total", "move large data to a ConfigMap")
    return dict(annotations)


def object_metadata(where: Where, name: str | None, namespace: str | None,
                    labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None) -> dict[str, Any] | None:
    """``metadata`` of an object we emit: name (DNS subdomain), namespace (DNS label), labels, annotations."""
    metadata: dict[str, Any] = {}
    if name is not None:
        metadata["name"] = check_dns_subdomain(where, "metadata.name", name)
    if namespace is not None:
        metadata["namespace"] = check_dns_label(where, "metadata.namespace", namespace)
    if labels:
        metadata["labels"] = check_labels(where, "metadata.labels", labels)
    if annotations:
        metadata["annotations"] = check_annotations(where, "metadata.annotations", annotations)
    return metadata or None


def to_dns_label(text: str) -> str:
    """Best-effort DNS label from free text (for suggestions and derived names)."""
    label = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return label[:DNS1123_LABEL_MAX].rstrip("-")


def check_int(where: Where, field: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    """An integer field (never a bool or a numeric string) within ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        fix = f"pass the number itself: {field}={value.strip()}" if isinstance(value, str) and value.strip().isdigit() \
            else f"pass an integer >= {minimum}"
        raise DraConstructsError(_where(where), field, value, f"must be an integer, not {type(value).__name__}", fix)
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise DraConstructsError(_where(where), field, value, f"must be {bound}", f"use a value {bound}")
    return value


def label_value(text: str) -> str:
    """``text`` as a valid label value: unchanged when it is one, else shortened with a stable hash."""
    if len(text) <= 63 and _QUALIFIED_NAME.match(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    head = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[: 63 - 9].strip("-_.")
    return f"{head}-{digest}" if head else digest


def check_label_value(where: Where, field: str, value: Any) -> str:
    """A label value: empty or at most 63 alphanumerics, '-', '_' or '.', alphanumeric at both ends."""
    if not isinstance(value, str) or len(value) > 63 or (value and not _QUALIFIED_NAME.match(value)):
        raise DraConstructsError(
            _where(where), field, value,
            "not a label value (at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric)",
            "shorten it or move it to an annotation",
        )
    return value


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest candidate, or an empty string."""
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
