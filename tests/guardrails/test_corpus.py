"""The real-world corpus (../shared/corpus/realworld, never copied here) against the hand-judged expectations.

Each of the 400+ files is audited on its own and must give what tests/guardrails/corpus_expectations.yaml
says: the judgement, or for a documented known miss the recorded ``audit:``. Without the corpus
(a checkout without ../shared) the test skips and says where it looked (under CI=true it fails);
set DRA_CORPUS_DIR to point elsewhere.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from shared_data import shared_path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "audit_corpus.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("audit_corpus", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("audit_corpus", module)
    spec.loader.exec_module(module)
    return module


def test_corpus_matches_the_expectations() -> None:
    script = _script()
    corpus = shared_path("corpus/realworld", "the real-world corpus", override="DRA_CORPUS_DIR")
    cmp = script.compare(corpus)
    assert cmp.files >= 400
    assert cmp.missing == [] and cmp.extra == [], "every corpus file needs exactly one expectation"
    assert cmp.mismatches == [], "\n".join(f"{rel}: expected {want}, audit gives {got}"
                                           for rel, want, got in cmp.mismatches)
    assert len(cmp.known_misses) <= 2 and cmp.judged_agree == cmp.files - len(cmp.known_misses)
