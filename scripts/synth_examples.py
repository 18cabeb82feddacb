#!/usr/bin/env python3
"""Synthesize examples/ into a folder (``--out dist``), or check a folder is up to date (``--check dist``).

Runs ``examples/main.py`` the way ``cdk8s synth`` does (``CDK8S_OUTDIR``) in a fresh output folder,
then either replaces the target folder or compares it byte for byte (exit 1 if stale).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def synth(outdir: Path) -> None:
    """Run the examples app into ``outdir``."""
    env = {**os.environ, "CDK8S_OUTDIR": str(outdir), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    subprocess.run([sys.executable, str(ROOT / "examples" / "main.py")], check=True, env=env, cwd=ROOT)


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", type=Path)
    group.add_argument("--check", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "dist"
        synth(fresh)
        if args.out is not None:
            target = (ROOT / args.out).resolve()
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(fresh, target)
            print(f"synthesized {len(_files(target))} files into {args.out}")
            return 0
        target = (ROOT / args.check).resolve()
        stale = sorted(_files(fresh) ^ _files(target) if target.exists() else _files(fresh))
        stale += sorted(
            f for f in _files(fresh) & (_files(target) if target.exists() else set())
            if not filecmp.cmp(fresh / f, target / f, shallow=False)
        )
        if stale:
            print(f"{args.check}/ is stale ({', '.join(stale)}): run `make synth` and commit it", file=sys.stderr)
            return 1
        print(f"{args.check}/ is up to date")
        return 0


if __name__ == "__main__":
    sys.exit(main())
