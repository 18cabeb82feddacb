"""Audit the real-world corpus file by file and compare with the hand-judged expectations.

Usage: ``python scripts/audit_corpus.py [--corpus DIR] [--expectations FILE] [--quiet]``.
The corpus defaults to ``$DRA_CORPUS_DIR`` or ``../shared/corpus/realworld`` next to the repository
(never copied into it); the expectations to ``tests/guardrails/corpus_expectations.yaml``. Each file
is audited on its own (as ``dra-constructs audit FILE`` would, at the expectations' target); the
result is ``skipped``, ``malformed`` or the sets of error and warning rule ids. Exit 0 when every
file matches its entry (the judgement, or the recorded ``audit:`` of a known miss), 1 otherwise,
2 when the corpus is missing.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from dra_constructs.guardrails import audit, load_paths

if TYPE_CHECKING:
    from dra_constructs.errors import DraConstructsError
    from dra_constructs.guardrails.skipped import SkippedInput

REPO = Path(__file__).resolve().parent.parent
EXPECTATIONS = REPO / "tests" / "guardrails" / "corpus_expectations.yaml"


def default_corpus() -> Path:
    """``$DRA_CORPUS_DIR``, else ``../shared/corpus/realworld`` beside the repository."""
    return Path(os.environ.get("DRA_CORPUS_DIR") or REPO.parent / "shared" / "corpus" / "realworld")


Outcome = tuple[str, tuple[str, ...], tuple[str, ...]]  # (status, errors, warnings)


def audit_one(path: Path, target: str) -> Outcome:
    """``("skipped"|"malformed"|"audited", error rule ids, warning rule ids)`` of one file."""
    skipped: list[SkippedInput] = []
    errors: list[DraConstructsError] = []
    manifests = load_paths([str(path)], skipped=skipped, errors=errors)
    if skipped:
        return "skipped", (), ()
    if errors:
        return "malformed", (), ()
    result = audit(manifests, kubernetes_version=target, tenant_scope="file")
    return ("audited", tuple(sorted({f.rule for f in result.errors})),
            tuple(sorted({f.rule for f in result.warnings})))


def _outcome(entry: Any) -> Outcome:
    if isinstance(entry, str):
        entry = {"expect": entry}
    if "expect" in entry:
        status = entry["expect"]
        return ("audited", (), ()) if status == "clean" else (status, (), ())
    return "audited", tuple(sorted(entry.get("errors", []))), tuple(sorted(entry.get("warnings", [])))


@dataclass
class Comparison:
    """Per-file outcomes of the audit against the expectations."""

    files: int
    judged_agree: int
    error_agree: int
    known_misses: list[str]
    mismatches: list[tuple[str, Outcome, Outcome]]
    missing: list[str]
    extra: list[str]
    with_findings: int
    skipped: int
    malformed: int


def compare(corpus: Path, expectations_file: Path = EXPECTATIONS) -> Comparison:
    """Audit every ``*.yaml``/``*.yml`` of ``corpus`` and compare with ``expectations_file``."""
    data = yaml.safe_load(expectations_file.read_text())
    target, entries = str(data["target"]), data["files"]
    files = sorted(str(p.relative_to(corpus)) for p in corpus.rglob("*") if p.suffix in (".yaml", ".yml"))
    cmp = Comparison(len(files), 0, 0, [], [], [], sorted(set(entries) - set(files)), 0, 0, 0)
    for rel in files:
        if rel not in entries:
            cmp.missing.append(rel)
            continue
        got = audit_one(corpus / rel, target)
        entry = entries[rel]
        judged = _outcome(entry)
        recorded = _outcome(entry["audit"]) if isinstance(entry, dict) and "audit" in entry else judged
        cmp.skipped += got[0] == "skipped"
        cmp.malformed += got[0] == "malformed"
        cmp.with_findings += bool(got[1])
        cmp.judged_agree += got == judged
        cmp.error_agree += got[:2] == judged[:2]
        if recorded != judged:
            cmp.known_misses.append(rel)
        if got != recorded:
            cmp.mismatches.append((rel, recorded, got))
    return cmp


def _show(outcome: Outcome) -> str:
    status, errors, warnings = outcome
    return status if status != "audited" else f"errors={list(errors)} warnings={list(warnings)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--corpus", type=Path, default=default_corpus())
    parser.add_argument("--expectations", type=Path, default=EXPECTATIONS)
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    args = parser.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"audit_corpus: no corpus at {args.corpus} (set DRA_CORPUS_DIR)", file=sys.stderr)
        return 2
    cmp = compare(args.corpus, args.expectations)
    if not args.quiet:
        for rel, want, got in cmp.mismatches:
            print(f"MISMATCH {rel}: expected {_show(want)}, audit gives {_show(got)}")
        for rel in cmp.missing:
            print(f"NO EXPECTATION {rel}")
        for rel in cmp.extra:
            print(f"NO SUCH FILE {rel}")
    print(f"{cmp.files} files: {cmp.skipped} skipped, {cmp.malformed} malformed, {cmp.with_findings} with "
          f"error findings; agreement with the judgement {cmp.judged_agree}/{cmp.files} (errors only "
          f"{cmp.error_agree}/{cmp.files}); {len(cmp.known_misses)} known misses; {len(cmp.mismatches)} "
          f"unexpected mismatches")
    return 0 if not (cmp.mismatches or cmp.missing or cmp.extra) else 1


if __name__ == "__main__":
    sys.exit(main())
