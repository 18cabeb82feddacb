#!/usr/bin/env python3
"""YAML parsing: ``_safe_load.yaml_documents`` of this tree against an older tree's, in one run (issue 25).

Writes a cluster export as ``kubectl get -A -o yaml`` prints it (``audit_bench.write_export``:
one ``kind: List`` of ``--objects`` GPU Pods: 2,000 = 1.1 MB, 20,000 = 10.8 MB; over 4,000,000
characters a document's nodes are counted before it is composed) and parses it, in a fresh child
process per sample, with ``yaml_documents`` (limits, node count, construction: what ``audit``
and ``fit`` run) of this tree and of ``--rev`` (``git archive``; default: the commit before the
faster composer), and with plain ``yaml.load_all(..., CSafeLoader)`` (no limits, for scale). The
routes alternate; each child reports the CPU time (``time.process_time``) of the parse alone,
the garbage collector paused as the loaders pause it; the median of ``--repeat`` samples is kept.
The values of both trees are checked to be equal.

    python benchmarks/yaml_bench.py [--objects 2000,20000] [--repeat 3] [--rev 179dbc1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_bench import write_export

REPO = Path(__file__).resolve().parents[1]

_CHILD = """
import gc, hashlib, json, pickle, sys, time
import yaml
route, path = sys.argv[1], sys.argv[2]
text = open(path, encoding="utf-8").read()
gc.disable()
start = time.process_time()
if route == "pyyaml":
    values = list(yaml.load_all(text, Loader=yaml.CSafeLoader))
else:
    from dra_constructs._safe_load import yaml_documents
    values = [d.value for d in yaml_documents(text, path)]
cpu = time.process_time() - start
digest = hashlib.sha256(json.dumps(values, sort_keys=True, default=repr).encode()).hexdigest()
print(json.dumps({"cpu": cpu, "documents": len(values), "digest": digest}))
"""


def _old_src(rev: str, into: Path) -> Path:
    """``src/`` of ``rev`` (``git archive``) under ``into``."""
    archive = subprocess.run(["git", "archive", rev, "src"], cwd=REPO, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def _sample(route: str, src: Path | None, path: Path) -> dict[str, Any]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    done = subprocess.run([sys.executable, "-c", _CHILD, route, str(path)], check=True, capture_output=True,
                          text=True, env=env)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def bench(objects: int, repeat: int, rev: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "export.yaml"
        write_export(path, objects, "yaml")
        old = _old_src(rev, Path(tmp) / "old")
        routes: dict[str, tuple[str, Path | None]] = {
            "new": ("ours", REPO / "src"), "old": ("ours", old), "pyyaml": ("pyyaml", None)}
        samples: dict[str, list[dict[str, Any]]] = {name: [] for name in routes}
        for _ in range(repeat):
            for name, (route, src) in routes.items():
                samples[name].append(_sample(route, src, path))
        digests = {s["digest"] for name in ("new", "old", "pyyaml") for s in samples[name]}
        assert len(digests) == 1, "the trees read different values"
        cpu = {name: statistics.median(s["cpu"] for s in runs) for name, runs in samples.items()}
        return {"objects": objects, "megabytes": round(path.stat().st_size / 1e6, 1), "rev": rev, "repeat": repeat,
                "cpu_seconds_median": {k: round(v, 2) for k, v in cpu.items()},
                "cpu_seconds": {k: [round(s["cpu"], 2) for s in v] for k, v in samples.items()},
                "new_over_old": round(cpu["new"] / cpu["old"], 3),
                "new_over_plain_pyyaml": round(cpu["new"] / cpu["pyyaml"], 3),
                "load_average": os.getloadavg()[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", default="2000,20000", help="export sizes in objects (comma-separated)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rev", default="179dbc1", help="the older tree (a git revision of this repository)")
    args = parser.parse_args()
    rows = [bench(int(n), args.repeat, args.rev) for n in args.objects.split(",")]
    print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
