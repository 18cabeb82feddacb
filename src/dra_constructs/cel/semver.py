"""Semantic versions as Kubernetes' CEL ``semver()`` library sees them.

Hand-written port of the rules of ``github.com/blang/semver/v4`` (``Parse``, ``Compare``,
prerelease precedence; build metadata is ignored by comparison and equality) and of
Kubernetes' ``normalizeAndParse`` (``semver(s, true)``, 1.34+: optional ``v`` prefix, leading
zeros dropped, missing minor/patch filled with 0). The maintained Python ``semver`` package
parses differently (it rejects or accepts other strings), so it is not used.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Semver", "SemverError", "normalize_and_parse", "parse_semver"]

_NUMBERS = "0123456789"
_ALPHANUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" + _NUMBERS + "-"
_UINT64_MAX = (1 << 64) - 1


class SemverError(ValueError):
    """A string blang/semver rejects; the message is blang/semver's."""


def _only(text: str, allowed: str) -> bool:
    return all(char in allowed for char in text)


def _leading_zero(text: str) -> bool:
    return len(text) > 1 and text[0] == "0"


def _uint(text: str, what: str) -> int:
    if not text or not _only(text, _NUMBERS):
        raise SemverError(f'strconv.ParseUint: parsing "{text}": invalid syntax')
    value = int(text)
    if value > _UINT64_MAX:
        raise SemverError(f'strconv.ParseUint: parsing "{text}": value out of range')
    del what
    return value


@dataclass(frozen=True)
class Semver:
    """A parsed version; ``pre`` items are ints (numeric) or strings."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()

    def compare(self, other: Semver) -> int:
        """``Version.Compare`` (-1, 0, 1); build metadata never takes part."""
        for mine, theirs in ((self.major, other.major), (self.minor, other.minor), (self.patch, other.patch)):
            if mine != theirs:
                return 1 if mine > theirs else -1
        if not self.pre and not other.pre:
            return 0
        if not self.pre:
            return 1
        if not other.pre:
            return -1
        for mine_pre, theirs_pre in zip(self.pre, other.pre, strict=False):
            result = _compare_pre(mine_pre, theirs_pre)
            if result:
                return result
        if len(self.pre) == len(other.pre):
            return 0
        return 1 if len(self.pre) > len(other.pre) else -1

    def encode(self) -> str:
        """Canonical text (without build metadata, so equal versions encode equally)."""
        core = f"{self.major}.{self.minor}.{self.patch}"
        return core + ("-" + ".".join(str(p) for p in self.pre) if self.pre else "")


def _compare_pre(a: int | str, b: int | str) -> int:
    if isinstance(a, int) and isinstance(b, int):
        return (a > b) - (a < b)
    if isinstance(a, int):
        return -1
    if isinstance(b, int):
        return 1
    return (a > b) - (a < b)


def parse_semver(text: str) -> Semver:
    """``semver.Parse`` (strict semver 2.0.0, as the ``semver()`` CEL function)."""
    if not text:
        raise SemverError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    for label, part in (("major", parts[0]), ("minor", parts[1])):
        if not _only(part, _NUMBERS):
            raise SemverError(f"Invalid character(s) found in {label} number {part!r}".replace("'", '"'))
        if _leading_zero(part):
            raise SemverError(f'{label.capitalize()} number must not contain leading zeroes "{part}"')
    major, minor = _uint(parts[0], "major"), _uint(parts[1], "minor")
    patch_text, build, pre = parts[2], None, None
    if "+" in patch_text:
        patch_text, build_text = patch_text.split("+", 1)
        build = build_text.split(".")
    if "-" in patch_text:
        patch_text, pre_text = patch_text.split("-", 1)
        pre = pre_text.split(".")
    if not _only(patch_text, _NUMBERS):
        raise SemverError(f'Invalid character(s) found in patch number "{patch_text}"')
    if _leading_zero(patch_text):
        raise SemverError(f'Patch number must not contain leading zeroes "{patch_text}"')
    patch = _uint(patch_text, "patch")
    parsed_pre: list[int | str] = []
    for item in pre or []:
        if not item:
            raise SemverError("Prerelease is empty")
        if _only(item, _NUMBERS):
            if _leading_zero(item):
                raise SemverError(f'Numeric PreRelease version must not contain leading zeroes "{item}"')
            parsed_pre.append(_uint(item, "prerelease"))
        elif _only(item, _ALPHANUM):
            parsed_pre.append(item)
        else:
            raise SemverError(f'Invalid character(s) found in prerelease "{item}"')
    for item in build or []:
        if not item:
            raise SemverError("Build meta data is empty")
        if not _only(item, _ALPHANUM):
            raise SemverError(f'Invalid character(s) found in build meta data "{item}"')
    return Semver(major, minor, patch, tuple(parsed_pre))


def normalize_and_parse(text: str) -> Semver:
    """Kubernetes' ``normalizeAndParse`` (``semver(s, true)``)."""
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for index, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or part[0] not in _NUMBERS:
                part = "0" + part
            parts[index] = part
    if len(parts) < 3:
        if any(char in parts[-1] for char in "+-"):
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse_semver(".".join(parts))
