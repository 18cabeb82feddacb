#!/usr/bin/env python3
"""Write (or --check) src/dra_constructs/catalog/satisfiability.json.

For every request shape the catalog generates (each MIG profile of each model, each whole-GPU
model, all models), the best number of matching devices on one node of the catalog inventory,
computed with the CEL evaluator. Claims built from these shapes then skip evaluating 1,040
devices at first use (docs/performance.md). tests/core/test_catalog_satisfiability.py recomputes every
entry for every supported target.

    python scripts/catalog_satisfiability.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys

from dra_constructs.selector_checks import (
    CATALOG_TABLE_PATH,
    CatalogDevices,
    compute_best_pool,
    generated_catalog_requests,
)
from dra_constructs.target import Target


def render() -> str:
    devices = CatalogDevices()
    target = Target.parse("1.32")
    entries = []
    for device_class, selectors in generated_catalog_requests():
        best, detail = compute_best_pool(device_class, selectors, target, devices)
        entries.append({"class": device_class, "selectors": list(selectors), "best": best, "detail": detail})
    return json.dumps(entries, indent=1) + "\n"


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
    print(f"wrote {CATALOG_TABLE_PATH} ({len(json.loads(text))} entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
