#!/usr/bin/env python3
"""Write (or --check) src/dra_constructs/catalog/satisfiability.json.

For every request shape the catalog generates (each whole-GPU model, all models, each MIG
profile of each model) and every (MIG mode, target minor) a claim can be checked in against
the catalog: the largest count for which one request of that shape passes today's live check
(``check_requests`` with the catalog inventory: the CEL run-time check on every catalog device,
then the allocator in ``dra_constructs.fit`` with the target's gates), or ``null`` when the
selectors fail at run time on some catalog device. ``GpuClaimTemplate`` answers such claims
from the table without building the catalog inventory (docs/performance.md, issue 14);
tests/core/test_catalog_satisfiability.py recomputes the entries. Regenerate after changing the
catalog, the selector builder, the CEL evaluator or the allocator (about 2 minutes of CPU):

    PYTHONPATH=src .venv/bin/python scripts/catalog_satisfiability.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys

from dra_constructs.selector_checks import (
    CATALOG_TABLE_PATH,
    catalog_modes,
    generated_catalog_shapes,
    live_catalog_answer,
)


def render() -> str:
    shapes = list(generated_catalog_shapes())
    max_count = {f"{mode}/{minor}": [live_catalog_answer(mode, minor, shape) for shape in shapes]
                 for mode, minor in catalog_modes()}
    lines = ['{"shapes": [', ",\n".join(json.dumps([c, list(s)]) for c, s in shapes), "],", '"max_count": {',
             ",\n".join(f"{json.dumps(key)}: {json.dumps(counts)}" for key, counts in max_count.items()), "}}"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args()
    text = render()
    if args.check:
        current = CATALOG_TABLE_PATH.read_text() if CATALOG_TABLE_PATH.exists() else ""
        if current != text:
            print(f"{CATALOG_TABLE_PATH} is stale: run scripts/catalog_satisfiability.py", file=sys.stderr)
            return 1
        return 0
    CATALOG_TABLE_PATH.write_text(text)
    table = json.loads(text)
    print(f"wrote {CATALOG_TABLE_PATH} ({len(table['shapes'])} shapes x {len(table['max_count'])} modes/targets)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
