#!/usr/bin/env python3
"""Cost of the SanitizerDaemonSet: synthesis vs plain ApiObjects, zipapp build, ConfigMap headroom.

- ``construct``: ``SanitizerDaemonSet(...)`` (config validation, MIG mode and privilege, zipapp
  build, RBAC, hashes) plus ``app.synth_yaml()``;
- ``plain``: the same 9 manifests, pre-rendered dicts written as ``cdk8s.ApiObject`` + one
  ``JsonPatch.add`` each (the cheapest cdk8s route; nothing is validated or computed);
- ``zipapp``: ``build_zipapp()`` alone (it runs inside ``construct``);
- the ConfigMap payload against the 1 MiB API limit, and one offline checkov scan.

Each timing runs in a fresh Python process (imports and jsii start excluded), routes alternate,
the median of ``--repeat`` runs is kept. Output: a table and JSON.

    python benchmarks/sanitizer_construct.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKER = r"""
import json, sys, time
import cdk8s
from dra_constructs import set_kubernetes_version
from dra_constructs.constructs.sanitizer.construct import SanitizerDaemonSet
from dra_constructs.agent.zipapp import build_zipapp

route, version = sys.argv[1], sys.argv[2]
IMAGE = "registry.example.com/dra-sanitizer-base:0.1.0"
DIGEST = "sha256:" + "ab" * 32

def construct(chart):
    SanitizerDaemonSet(chart, "sanitizer", image=IMAGE, image_digest=DIGEST)

app = cdk8s.App()
set_kubernetes_version(app, version)
if route == "plain":
    reference = cdk8s.Chart(cdk8s.App(), "ref")
    construct(reference)
    docs = reference.to_json()
chart = cdk8s.Chart(app, "bench")
start = time.perf_counter()
if route == "construct":
    construct(chart)
elif route == "plain":
    for i, doc in enumerate(docs):
        obj = cdk8s.ApiObject(chart, f"o{i}", api_version=doc["apiVersion"], kind=doc["kind"],
                              metadata=doc["metadata"])
        for key in [k for k in doc if k not in ("apiVersion", "kind", "metadata")]:
            obj.add_json_patch(cdk8s.JsonPatch.add("/" + key, doc[key]))
elif route == "zipapp":
    size = len(build_zipapp())
built = time.perf_counter()
text = app.synth_yaml() if route != "zipapp" else ""
done = time.perf_counter()
print(json.dumps({"build": built - start, "synth": done - built, "total": done - start,
                  "documents": text.count("kind: ")}))
"""


def measure(route: str, version: str) -> dict[str, float]:
    """One fresh process for one route."""
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    out = subprocess.run([sys.executable, "-c", WORKER, route, version], check=True, capture_output=True,
                         text=True, env=env)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def configmap_and_checkov() -> dict[str, float]:
    """ConfigMap payload size, and the wall time of one offline checkov scan of the manifests."""
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    import cdk8s

    from dra_constructs.constructs.sanitizer._bundle import CONFIG_MAP_MAX_BYTES
    from dra_constructs.constructs.sanitizer.construct import SanitizerDaemonSet

    chart = cdk8s.Chart(cdk8s.App(), "bench")
    sanitizer = SanitizerDaemonSet(chart, "sanitizer", image="registry.example.com/x:1",
                                   image_digest="sha256:" + "ab" * 32)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "sanitizer.yaml").write_text(cdk8s.App.of(chart).synth_yaml())
        checkov = Path(sys.executable).parent / "checkov"
        start = time.perf_counter()
        subprocess.run([str(checkov), "-d", tmp, "--framework", "kubernetes", "--skip-download", "--quiet",
                        "--compact"], check=True, capture_output=True, env={**os.environ, "BC_SKIP_MAPPING": "TRUE"})
        checkov_s = time.perf_counter() - start
    return {"zipapp_bytes": len(sanitizer.bundle.zipapp), "configmap_bytes": sanitizer.bundle.size,
            "configmap_fraction_of_limit": sanitizer.bundle.size / CONFIG_MAP_MAX_BYTES, "checkov_s": checkov_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--version", default="1.34")
    args = parser.parse_args()
    samples: dict[str, list[dict[str, float]]] = {"construct": [], "plain": [], "zipapp": []}
    for _ in range(args.repeat):
        for route in samples:
            samples[route].append(measure(route, args.version))
    medians = {route: {k: statistics.median(s[k] for s in runs) for k in ("build", "synth", "total")}
               for route, runs in samples.items()}
    extra = configmap_and_checkov()
    ratio = medians["construct"]["total"] / medians["plain"]["total"]
    print(f"{'route':<10} {'build s':>9} {'synth s':>9} {'total s':>9}")
    for route, m in medians.items():
        print(f"{route:<10} {m['build']:>9.3f} {m['synth']:>9.3f} {m['total']:>9.3f}")
    print(f"construct / plain: {ratio:.2f}x; zipapp {extra['zipapp_bytes']} B; ConfigMap "
          f"{extra['configmap_bytes']} B ({extra['configmap_fraction_of_limit']:.1%} of 1 MiB); "
          f"checkov {extra['checkov_s']:.2f} s")
    print(json.dumps({"medians": medians, "ratio_construct_over_plain": ratio, **extra,
                      "repeat": args.repeat, "version": args.version}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
