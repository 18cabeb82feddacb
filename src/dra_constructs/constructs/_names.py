"""cdk8s's generated ``metadata.name`` computed in Python (no jsii round trip).

Reading ``api_object.name`` costs one jsii call per object; a Pod needs its claim template's
name, so the library would pay it once per workload. This is a port of cdk8s 2.x
``Names.toDnsLabel`` (lib/names.ts) with the hash of constructs 10.x ``Node.addr``
(private/node-addr.ts: ``"c8" + sha1(id + "\\n" for every scope id but "Default")``, first 8
characters). Hand-written because cdk8s exposes no Python implementation;
tests/core/test_names.py compares it with cdk8s over many ids, and the construct layer checks
the first object of every scope against cdk8s before trusting it (see ``_scope.cdk8s_name``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

__all__ = ["node_addr", "to_dns_label"]

_MAX_LEN = 63
_HASH_LEN = 8
_VALIDATE = re.compile(r"^[0-9a-z-]+$")
_NOT_ALLOWED = re.compile(r"[^0-9a-zA-Z\-_.]")
_HIDDEN_ID = "Default"


def node_addr(scope_ids: Sequence[str]) -> str:
    """constructs' ``node.addr`` for a construct whose scopes (root first, itself last) have these ids."""
    digest = hashlib.sha1(usedforsecurity=False)
    for component in scope_ids:
        if component == _HIDDEN_ID:
            continue
        digest.update(component.encode())
        digest.update(b"\n")
    return "c8" + digest.hexdigest()


def _human_form(components: list[str], delim: str, max_len: int) -> str:
    reversed_ = components[::-1]
    deduplicated = [c for i, c in enumerate(reversed_) if i == 0 or c != reversed_[i - 1]]
    kept = "/".join(deduplicated)[:max_len].split("/")[::-1]
    parts = [part for part in delim.join(c for c in kept if c).split(delim) if part]
    return delim.join(part for part in parts if part.lower() not in ("resource", "default"))


def to_dns_label(path: str, scope_ids: Sequence[str], *, max_len: int = _MAX_LEN, include_hash: bool = True) -> str:
    """``Names.toDnsLabel`` of the construct at ``path`` (``scope_ids``: for its ``node.addr``).

    ASCII ids only: JavaScript's locale lower-casing and UTF-16 lengths differ from Python's
    beyond ASCII (callers fall back to cdk8s there).
    """
    components = path.split("/")
    if len(components) == 1 and _VALIDATE.match(components[0]) and len(components[0]) <= max_len:
        return components[0]
    normalized = [_NOT_ALLOWED.sub("", c.lower())[:max_len] for c in components]
    if include_hash:
        normalized.append(node_addr(scope_ids)[:_HASH_LEN])
    return _human_form(normalized, "-", max_len)
