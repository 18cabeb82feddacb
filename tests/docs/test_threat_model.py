"""The sanitizer's threat model is one page, linked from the README, with its three parts (issue 22 item 12)."""

from __future__ import annotations

from .markdown import ROOT


def test_threat_model_is_one_linked_page() -> None:
    text = (ROOT / "docs" / "threat-model.md").read_text()
    assert len(text.splitlines()) <= 80, "keep the threat model to one page"
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## Protects against", "## Does not protect against", "## What the operator must ensure"]
    assert "docs/threat-model.md" in (ROOT / "README.md").read_text()
    for must in ("scrub-on-free", "Behind Bars", "NVBleed", "CUDA 13.3", "only processes"):
        assert must.lower() in text.lower(), must
