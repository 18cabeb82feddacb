#!/usr/bin/env python3
"""Start-up cost: ``import dra_constructs`` and ``dra-constructs --help``, against a bare interpreter.

Each sample is a fresh process; the three commands alternate; the median of ``--repeat`` samples
is kept. Reported: the median wall time of each, and the time above the bare interpreter
(``python -c pass``), which is what the package adds. Goals (issue 14): import <= 0.1 s and
``--help`` <= 0.12 s of wall time.

    python benchmarks/import_bench.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "bare": [sys.executable, "-c", "pass"],
    "import": [sys.executable, "-c", "import dra_constructs"],
    "help": [sys.executable, "-c", "import sys; from dra_constructs.cli import main; sys.argv[0] = 'dra-constructs';"
             " sys.exit(main(['--help']))"],
}


def sample(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=os.environ)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeat):
        for name, command in COMMANDS.items():
            samples[name].append(sample(command))
    median = {name: statistics.median(values) for name, values in samples.items()}
    for name in ("import", "help"):
        print(f"{name:>7}: {median[name]:.3f} s ({median[name] - median['bare']:+.3f} s over a bare interpreter, "
              f"range {min(samples[name]):.3f}-{max(samples[name]):.3f} s)")
    print(f"   bare: {median['bare']:.3f} s")
    print(json.dumps({"median_seconds": median, "repeat": args.repeat}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
