"""Agreement check for CEL checker rewrites: every verdict, message and cost, before and after.

The expressions: 2,000 of ``cel_bench.py``'s (every kind, several salts) and every string literal
in ``tests/cel`` (most are selectors; the rest are judged ``Invalid`` either way), each judged
without any sharing (``_judge``) at several targets. ``dump OUT.json`` writes the results;
``compare OLD.json`` judges again and lists every difference (exit 1 if any).

Run: ``.venv/bin/python benchmarks/cel_agreement.py dump /tmp/old.json`` on the old code, then
``.venv/bin/python benchmarks/cel_agreement.py compare /tmp/old.json`` on the new.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

from cel_bench import expressions

from dra_constructs.cel._env import env_key
from dra_constructs.cel.checker import _judge
from dra_constructs.target import Target

TARGETS = ("1.32", "1.32.0", "1.33", "1.34", "1.36")
ROOT = Path(__file__).resolve().parent.parent


def corpus() -> list[str]:
    """The benchmark's expressions and every string literal of ``tests/cel`` (sorted, distinct)."""
    found = set(expressions(1000, "a")) | set(expressions(1000, "z"))
    for path in sorted((ROOT / "tests" / "cel").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and 0 < len(node.value) < 20_000:
                found.add(node.value)
    return sorted(found)


def judge_all() -> dict[str, list[object]]:
    out: dict[str, list[object]] = {}
    for name in TARGETS:
        target = Target.parse(name)
        key = env_key(target)
        for expression in corpus():
            try:
                result, _ = _judge(expression, target, key)
                row: list[object] = [result.verdict, result.error, result.cost, result.fix]
            except Exception as error:  # an engine failure must stay the same failure
                row = ["raised", f"{type(error).__name__}: {error}", None]
            out[f"{name}\0{expression}"] = row
    return out


def main() -> int:
    mode, path = sys.argv[1], Path(sys.argv[2])
    results = judge_all()
    if mode == "dump":
        path.write_text(json.dumps(results))
        print(f"{len(results)} results written to {path}")
        return 0
    old = json.loads(path.read_text())
    differ = [key for key in old.keys() | results.keys() if old.get(key) != results.get(key)]
    for key in sorted(differ)[:40]:
        target, expression = key.split("\0", 1)
        print(f"{target} {expression[:120]!r}\n  old {old.get(key)}\n  new {results.get(key)}")
    print(f"{len(results)} results, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
