"""Sizes the docs quote for the agent zipapp are the sizes this version builds (within 15%).

Any "N KB" / "N,NNN bytes" / "P% of the 1 MiB" in a paragraph that mentions the zipapp must be
within ``TOLERANCE`` of one of: the zipapp, its base64 text in the manifest, or (for a percentage)
either of them over the 1 MiB ConfigMap limit. Other helpers' changes to the agent move the size a
little; a doc that still says 66 KB when the archive is 118 KB fails here, naming the line.
"""

from __future__ import annotations

import base64
import re

from .markdown import doc_files, rel

TOLERANCE = 0.15
_SIZE = re.compile(r"(\d[\d,]*(?:\.\d+)?)\s*(KB|KiB|kB|bytes)\b")
_SHARE = re.compile(r"(\d+(?:\.\d+)?)\s*%\s*of the 1 MiB")


def _sizes() -> tuple[int, int]:
    from dra_constructs.agent.zipapp import build_zipapp

    archive = build_zipapp()
    return len(archive), len(base64.b64encode(archive))


def _paragraphs(text: str) -> list[tuple[int, str]]:
    out, start, lines = [], 1, []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            lines.append(line)
            continue
        if lines:
            out.append((start, " ".join(lines)))
        lines, start = [], number + 1
    if lines:
        out.append((start, " ".join(lines)))
    return out


def _close(value: float, targets: tuple[float, ...]) -> bool:
    return any(abs(value - t) <= TOLERANCE * t for t in targets)


def test_zipapp_sizes_quoted_in_the_docs_are_current() -> None:
    raw, encoded = _sizes()
    limit = 1024 * 1024
    wrong, quoted = [], 0
    for doc in doc_files():
        for line, paragraph in _paragraphs(doc.read_text()):
            if "zipapp" not in paragraph.lower():
                continue
            for number, unit in _SIZE.findall(paragraph):
                if unit == "bytes" and float(number.replace(",", "")) < 10_000:
                    continue  # small counts (a 2-byte key, 16-byte loads) are not sizes of the archive
                value = float(number.replace(",", "")) * (1 if unit == "bytes" else 1000 if unit != "KiB" else 1024)
                quoted += 1
                if not _close(value, (raw, encoded)):
                    wrong.append(f"{rel(doc)}:{line}: '{number} {unit}' (zipapp {raw:,} bytes, base64 {encoded:,})")
            for share in _SHARE.findall(paragraph):
                quoted += 1
                if not _close(float(share) / 100, (raw / limit, encoded / limit)):
                    wrong.append(f"{rel(doc)}:{line}: '{share}% of the 1 MiB' (zipapp {raw / limit:.1%}, "
                                 f"base64 {encoded / limit:.1%})")
    assert not wrong, "stale zipapp sizes in the docs:\n" + "\n".join(wrong)
    assert quoted, "no doc quotes the zipapp size any more: drop this test or the claim that it checks it"
