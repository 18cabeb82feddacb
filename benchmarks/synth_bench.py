#!/usr/bin/env python3
"""Synthesis cost of the library vs plain cdk8s ApiObjects, for 100 / 1,000 / 5,000 (or 10,000) GPU workloads.

Each workload is one ResourceClaimTemplate (a MIG slice) plus one Pod that uses it. Two routes
build the same manifests:

- ``plain``: ``cdk8s.ApiObject`` + one ``JsonPatch.add("/spec", ...)`` per object, dicts written by hand;
- ``library``: ``GpuClaimTemplate.mig`` + ``GpuPod``, including all validation (names, limits, CEL
  check of every selector, satisfiability against the catalog inventory, and the App-wide
  guardrail rules at synth);
- ``library-no-guardrails`` (diagnostic, ``--diagnostic``): the same without the synth-time rules,
  to show where the time goes;
- ``library-no-fit`` (``--fit-check``): the library with the construct-time allocator check off
  (``set_inventory(app, None)``), so ``library / library-no-fit`` is what the check adds.

Every measurement runs in a fresh Python process (jsii kernel state never leaks between routes);
the routes alternate, each (route, N) is repeated and the median is kept (the table also shows the
range and median of the ratios of the alternating pairs; the JSON also has the CPU ratio of each
pair, ``cpu_pair_ratios``). Times cover building the objects and
``app.synth_yaml()``; process start and imports are excluded. Peak memory: the largest peak
resident set (VmHWM) of the Python process plus jsii's node processes over the repeats. CPU
ratio: median user+system CPU seconds of Python plus Node over the same span (less disturbed
than wall time on a shared machine). ``--together`` starts the routes of each repeat at the same
time instead of one after another, so that each pair runs under the same load (on a loaded
2-core machine a sequential pair's CPU moves by +-15%; docs/performance.md, third pass). Output:
a table and JSON.

    python benchmarks/synth_bench.py [--sizes 100 1000 5000] [--repeat 3]
    python benchmarks/synth_bench.py --sizes 1000 10000 --repeat 2   # repo scale (docs/performance.md)
    python benchmarks/synth_bench.py --sizes 1000 --repeat 9 --together  # pairs under the same load
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import cast

WORKER = r"""
import json, sys, time
import cdk8s
route, n = sys.argv[1], int(sys.argv[2])
if route.startswith("library"):
    from dra_constructs import Container, GpuClaimTemplate, GpuPod
if route == "library-no-guardrails":  # diagnostic only: what the App-wide synth-time rules cost
    import dra_constructs.constructs.scope
    dra_constructs.constructs.scope.guard = lambda scope: None
    import dra_constructs.constructs.claims, dra_constructs.constructs.workloads
    dra_constructs.constructs.claims.guard = dra_constructs.constructs.workloads.guard = lambda scope: None
import os
def tree(pid):  # the process and its descendants (jsii's node launcher and the node runtime it starts)
    kids = [c for t in os.listdir(f"/proc/{pid}/task") for c in open(f"/proc/{pid}/task/{t}/children").read().split()]
    return [pid] + [d for c in kids for d in tree(c)]
def cpu_seconds():  # user + system CPU time of Python and Node so far
    total = 0
    for pid in tree(str(os.getpid())):
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")
app = cdk8s.App()
if route == "library-no-fit":  # the construct-time satisfiability check (the allocator) off
    from dra_constructs import set_inventory
    set_inventory(app, None)
chart = cdk8s.Chart(app, "bench")
cpu_start = cpu_seconds()
start = time.perf_counter()
for i in range(n):
    if route == "plain":
        tmpl = cdk8s.ApiObject(chart, f"slice{i}", api_version="resource.k8s.io/v1beta1", kind="ResourceClaimTemplate")
        tmpl.add_json_patch(cdk8s.JsonPatch.add("/spec", {"spec": {"devices": {"requests": [{
            "name": "mig", "deviceClassName": "mig.nvidia.com",
            "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"}},
                          {"cel": {"expression": "device.attributes['gpu.nvidia.com'].architecture == 'Ampere'"}}],
            "allocationMode": "ExactCount", "count": 1}]}}}))
        pod = cdk8s.ApiObject(chart, f"pod{i}", api_version="v1", kind="Pod")
        pod.add_json_patch(cdk8s.JsonPatch.add("/spec", {
            "containers": [{"name": "app", "image": "registry.example/infer:1",
                            "resources": {"claims": [{"name": f"slice{i}"}]},
                            "lifecycle": {"preStop": {"sleep": {"seconds": 5}}}}],
            "resourceClaims": [{"name": f"slice{i}", "resourceClaimTemplateName": tmpl.name}],
            "terminationGracePeriodSeconds": 60}))
    else:
        tmpl = GpuClaimTemplate.mig(chart, f"slice{i}", gpu="A100_80GB", profile="3g.40gb")
        GpuPod(chart, f"pod{i}", containers=[Container(name="app", image="registry.example/infer:1",
                                                       claims=(tmpl.use(),))])
built = time.perf_counter()
yaml_text = app.synth_yaml()
done = time.perf_counter()
cpu = cpu_seconds() - cpu_start
def peak_mib(pid):  # VmHWM: the process's peak resident set
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 1024
print(json.dumps({"build": built - start, "synth": done - built, "total": done - start, "cpu": cpu,
                  "documents": yaml_text.count("\nkind: ") + 1,
                  "peak_mib": sum(peak_mib(p) for p in tree(str(os.getpid())))}))
"""


def _start(route: str, n: int) -> subprocess.Popen[str]:
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    return subprocess.Popen([sys.executable, "-c", WORKER, route, str(n)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _result(process: subprocess.Popen[str]) -> dict[str, float]:
    out, err = process.communicate()
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, process.args, out, err)
    return cast(dict[str, float], json.loads(out.strip().splitlines()[-1]))


def measure(route: str, n: int) -> dict[str, float]:
    """One fresh process: build ``n`` workloads by ``route`` and synthesize them."""
    return _result(_start(route, n))


def measure_together(routes: list[str], n: int) -> dict[str, dict[str, float]]:
    """One fresh process per route, all started at once: each repeat runs under the same load."""
    processes = {route: _start(route, n) for route in routes}
    return {route: _result(process) for route, process in processes.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--diagnostic", action="store_true", help="also run library-no-guardrails")
    parser.add_argument("--fit-check", action="store_true",
                        help="also run library-no-fit: what the construct-time allocator check adds")
    parser.add_argument("--together", action="store_true",
                        help="start the routes of each repeat at once (same load on a shared machine; the start "
                             "order rotates) instead of one after another")
    args = parser.parse_args()
    routes = (["plain", "library"] + (["library-no-guardrails"] if args.diagnostic else [])
              + (["library-no-fit"] if args.fit_check else []))
    results: dict[str, dict[int, float]] = {route: {} for route in routes}
    memory: dict[str, dict[int, float]] = {route: {} for route in routes}
    cpu: dict[str, dict[int, float]] = {route: {} for route in routes}
    ratios: dict[int, list[float]] = {}
    cpu_ratios: dict[int, list[float]] = {}
    started = time.perf_counter()
    for n in args.sizes:
        samples: dict[str, list[float]] = {route: [] for route in routes}
        peaks: dict[str, list[float]] = {route: [] for route in routes}
        cpu_samples: dict[str, list[float]] = {route: [] for route in routes}
        for repeat in range(args.repeat):
            order = routes[repeat % len(routes):] + routes[:repeat % len(routes)]
            together = measure_together(order, n) if args.together else {}
            for route in routes:
                sample = together[route] if args.together else measure(route, n)
                samples[route].append(sample["total"])
                cpu_samples[route].append(sample["cpu"])
                peaks[route].append(sample["peak_mib"])
        for route in samples:
            results[route][n] = statistics.median(samples[route])
            memory[route][n] = max(peaks[route])
            cpu[route][n] = statistics.median(cpu_samples[route])
        # ratio of each alternating pair (same moment on a shared machine), to show the spread
        ratios[n] = sorted(lib / plain for lib, plain in zip(samples["library"], samples["plain"], strict=True))
        cpu_ratios[n] = sorted(lib / plain for lib, plain in zip(cpu_samples["library"], cpu_samples["plain"],
                                                                 strict=True))
    print(f"{'N':>6} {'plain s':>9} {'library s':>10} {'ratio':>6} {'pair min-med-max':>18} {'lib ms/workload':>16}"
          f" {'peak MiB plain/lib':>19} {'CPU ratio':>9}"
          + (f" {'no-guardrails s':>16} {'ratio':>6}" if args.diagnostic else ""))
    for n in args.sizes:
        plain, library = results["plain"][n], results["library"][n]
        spread = f"{ratios[n][0]:.2f}-{statistics.median(ratios[n]):.2f}-{ratios[n][-1]:.2f}"
        line = (f"{n:>6} {plain:>9.3f} {library:>10.3f} {library / plain:>6.2f} {spread:>18}"
                f" {1000 * library / n:>16.3f}"
                f" {memory['plain'][n]:>9.0f}/{memory['library'][n]:<9.0f}"
                f" {cpu['library'][n] / cpu['plain'][n]:>9.2f}")
        if args.diagnostic:
            bare = results["library-no-guardrails"][n]
            line += f" {bare:>16.3f} {bare / plain:>6.2f}"
        print(line)
    summary = {
        "sizes": args.sizes, "repeat": args.repeat, "median_seconds": results,
        "ratio": {n: results["library"][n] / results["plain"][n] for n in args.sizes},
        "pair_ratios": ratios, "peak_mib_python_plus_node": memory, "median_cpu_seconds_python_plus_node": cpu,
        "cpu_pair_ratios": cpu_ratios, "together": args.together,
        "wall_seconds": time.perf_counter() - started,
    }
    if args.fit_check:
        summary["fit_check_ratio"] = {n: results["library"][n] / results["library-no-fit"][n] for n in args.sizes}
        for n in args.sizes:
            print(f"fit check at N={n}: library {results['library'][n]:.3f} s / without it "
                  f"{results['library-no-fit'][n]:.3f} s = {summary['fit_check_ratio'][n]:.3f}")
    if len(args.sizes) >= 2:
        small, large = args.sizes[-2], args.sizes[-1]
        summary["growth_per_workload_ratio"] = (
            (results["library"][large] / large) / (results["library"][small] / small)
        )
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
