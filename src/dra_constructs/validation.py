"""Field checks the API server applies, done before output so errors name our construct, not a 422."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from .errors import DraConstructsError

__all__ = [
    "DNS1123_LABEL_MAX",
    "DNS1123_SUBDOMAIN_MAX",
    "Where",
    "check_dns_label",
    "check_dns_subdomain",
    "check_max_items",
    "check_quantity",
    "check_unique",
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


def to_dns_label(text: str) -> str:
    """Best-effort DNS label from free text (for suggestions and derived names)."""
    label = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return label[:DNS1123_LABEL_MAX].rstrip("-")
