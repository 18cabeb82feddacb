#!/usr/bin/env python3
"""Guardrails performance: ``dra-constructs audit`` over 10,000 objects, and the synth-time cost.

``audit``: writes N objects (default 10,000) as 100 multi-document YAML files of realistic
objects (per unit of five: a pinned MIG / whole-GPU ResourceClaimTemplate, a GPU Deployment
using it, a Service, a ConfigMap and a Helm-like web Deployment; one unit in ten is unsafe),
then times the whole command in a fresh process (``python -m dra_constructs.cli audit
--format json``: interpreter start, imports, CEL environment, YAML parsing, rules, JSON) and,
in-process, the load / rules / report phases. ``--unique-selectors`` gives every template its
own CEL expression, so no checker result is reused. Goal: <= 5 s for 10,000 objects.

``synth``: 5,000 GPU workloads (ResourceClaimTemplate + Deployment each) as cdk8s ApiObjects,
synthesized with ``app.synth_yaml()`` without and with ``ensure_guardrails``; every run is a
fresh process, routes alternate, the median of ``--repeat`` runs is kept. The ratio shows what
the guardrails add to a synth.

``large``: one multi-document YAML file per size (default 1, 5 and 10 MB; the same objects,
10% unsafe, so every size has findings): the whole command in a fresh process (wall and CPU time,
peak RSS) and the CPU time of the in-process load / rules / locate phases. Per-MB times against the first size
show whether a phase is linear (x1.0) or worse (issue 11: locating was quadratic, 10 MB 138 s).

``export`` (issue 25): a cluster export as ``kubectl get -A -o json`` / ``-o yaml`` prints it (one
``kind: List``, 4-space JSON; GPU Pods of 50 tenant namespaces with status, 10% unsafe, no
sanitizer: DRA009 fires), ``--objects`` of them; the whole command (``audit --quiet --format json``)
in a fresh child process: wall time and peak RSS (``/usr/bin/time -f %M``: ru_maxrss of the child).
``--src DIR`` runs the same command against another checkout's ``src`` as well, alternating, so
old and new come from one run. Goal: 100 MB / 200,000 objects in <= 10 s and <= 1 GB.

    python benchmarks/audit_bench.py [audit|large|synth|export|all] [--objects 10000] [--sizes 1,5,10] [--mix pods]
                                     [--workloads 5000] [--repeat 3] [--formats json,yaml] [--src DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

PROFILES = [("A100_80GB", "Ampere", p) for p in ("1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb")] + [
    ("H100_80GB", "Hopper", p) for p in ("1g.10gb", "3g.40gb")]
WHOLE = [("Hopper", "79113Mi"), ("Ampere", "40Gi"), ("Ampere", "80Gi"), ("Hopper", "140Gi")]


def _template(i: int, namespace: str, unique: bool) -> dict[str, Any]:
    if i % 2:
        _, arch, profile = PROFILES[i % len(PROFILES)]
        attrs = "device.attributes['gpu.nvidia.com']"
        expression = f"{attrs}.profile == '{profile}' && {attrs}.architecture == '{arch}'"
        request = {"name": "slice", "deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount", "count": 1,
                   "selectors": [{"cel": {"expression": expression}}]}
    else:
        arch, memory = WHOLE[i % len(WHOLE)]
        if unique:
            memory = f"{40000 + i}Mi"
        request = {"name": "slice", "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1,
                   "selectors": [{"cel": {"expression": f"device.attributes['gpu.nvidia.com'].architecture == '{arch}' "
                                                        f"&& device.capacity['gpu.nvidia.com'].memory.compareTo("
                                                        f"quantity('{memory}')) >= 0"}}]}
    if unique and i % 2:
        request["selectors"][0]["cel"]["expression"] += f" && device.attributes['gpu.nvidia.com'].uuid != 'GPU-{i}'"
    return {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": f"gpu-{i}", "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [request]}}}}


def _gpu_deployment(i: int, namespace: str, unsafe: bool) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "server", "image": "vllm/vllm-openai:v0.6.3", "args": ["--model", f"/models/m{i}"],
        "ports": [{"containerPort": 8000}], "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
        "resources": {"requests": {"cpu": "4", "memory": "32Gi"}, "claims": [{"name": "gpu"}]},
        "env": [{"name": "HF_HOME", "value": "/cache"}, {"name": "LOG_LEVEL", "value": "info"}],
    }
    if unsafe:
        container["resources"]["limits"] = {"nvidia.com/gpu": 1}
        container["env"].append({"name": "CUDA_VISIBLE_DEVICES", "value": "0"})
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"serve-{i}", "namespace": namespace, "labels": {"app": f"serve-{i}"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": f"serve-{i}"}},
                     "template": {"metadata": {"labels": {"app": f"serve-{i}"}},
                                  "spec": {"terminationGracePeriodSeconds": 60,
                                           "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": f"gpu-{i}"}],
                                           "containers": [container]}}}}


def _web(i: int, namespace: str) -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/name": f"web-{i}", "app.kubernetes.io/managed-by": "Helm"}
    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"web-{i}", "namespace": namespace,
                                                            "labels": labels},
         "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 8080}]}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"web-{i}", "namespace": namespace},
         "data": {"nginx.conf": "server { listen 8080; }", "LOG_LEVEL": "info"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"web-{i}", "namespace": namespace,
                                                                    "labels": labels},
         "spec": {"replicas": 3, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
                  "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                                           "envFrom": [{"configMapRef": {"name": f"web-{i}"}}],
                                           "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}}},
    ]


def write_manifests(directory: Path, objects: int, unique: bool) -> int:
    """``objects`` objects (plus one sanitizer DaemonSet) in 100 multi-document files."""
    docs: list[dict[str, Any]] = [{
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "sanitizer", "namespace": "dra-system",
                     "labels": {"dra-constructs.io/component": "sanitizer"}},
        "spec": {"selector": {"matchLabels": {"app": "s"}}, "template": {"metadata": {"labels": {"app": "s"}},
                 "spec": {"containers": [{"name": "s", "image": "sanitizer:1"}]}}}}]
    i = 0
    while len(docs) < objects:
        namespace = f"tenant-{i % 20}"
        unsafe = i % 10 == 9
        docs += [_template(i, namespace, unique), _gpu_deployment(i, namespace, unsafe), *_web(i, namespace)]
        i += 1
    docs = docs[:objects]
    per_file = max(1, len(docs) // 100)
    for n, start in enumerate(range(0, len(docs), per_file)):
        text = yaml.safe_dump_all(docs[start:start + per_file], sort_keys=False)
        (directory / f"part-{n:03d}.yaml").write_text(text)
    return len(docs)


def bench_audit(objects: int, repeat: int, unique: bool) -> dict[str, Any]:
    from dra_constructs.guardrails import audit, load_paths
    from dra_constructs.guardrails.report import to_json

    with tempfile.TemporaryDirectory() as tmp:
        count = write_manifests(Path(tmp), objects, unique)
        command = [sys.executable, "-m", "dra_constructs.cli", "audit", "--format", "json", "-o", os.devnull, tmp]
        process, cpu, phases = [], [], []
        for _ in range(repeat):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            rc = subprocess.run(command, check=False).returncode
            process.append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            assert rc == 1, f"expected findings (exit 1), got {rc}"
        for _ in range(repeat):
            t0 = time.perf_counter()
            manifests = load_paths([tmp])
            t1 = time.perf_counter()
            result = audit(manifests)
            t2 = time.perf_counter()
            to_json(result)
            t3 = time.perf_counter()
            phases.append((t1 - t0, t2 - t1, t3 - t2))
        findings = len(result.findings)
    return {
        "objects": count, "unique_selectors": unique, "findings": findings,
        "command_seconds_median": statistics.median(process), "command_seconds_all": process,
        "command_cpu_seconds_median": statistics.median(cpu),
        "in_process_median": {"load": statistics.median(p[0] for p in phases),
                              "rules": statistics.median(p[1] for p in phases),
                              "report": statistics.median(p[2] for p in phases)},
    }


def write_multidoc(path: Path, megabytes: float) -> int:
    """One multi-document YAML file of about ``megabytes`` MB (10% unsafe units: findings)."""
    parts: list[str] = []
    size = i = 0
    while size < megabytes * 1_000_000:
        namespace = f"tenant-{i % 20}"
        text = yaml.safe_dump_all([_template(i, namespace, False), _gpu_deployment(i, namespace, i % 10 == 9),
                                   *_web(i, namespace)], sort_keys=False)
        parts.append(text)
        size += len(text) + 4
        i += 1
    path.write_text("---\n".join(parts))
    return 5 * i


def bench_large_file(sizes: list[float], repeat: int) -> dict[str, Any]:
    """Whole command (fresh process) and in-process phases over one multi-document file per size."""
    import gc

    from dra_constructs.guardrails import audit, load_paths
    from dra_constructs.guardrails.locate import with_field_lines

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for megabytes in sizes:
            path = Path(tmp) / f"multi-{megabytes}.yaml"
            objects = write_multidoc(path, megabytes)
            command = [sys.executable, "-m", "dra_constructs.cli", "audit", "--format", "json", "-o", os.devnull,
                       str(path)]
            wall, cpu, rss = [], [], []
            for _ in range(repeat):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                done = subprocess.run(["/usr/bin/time", "-f", "%M", *command], check=False, capture_output=True,
                                      text=True)
                wall.append(time.perf_counter() - start)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
                rss.append(int(done.stderr.strip().splitlines()[-1]) / 1024)
                assert done.returncode == 1, done.stderr[-500:]
            phases = []
            for _ in range(repeat):
                texts: dict[str, str] = {}
                t0 = time.process_time()  # CPU time: the machine is shared, wall time is noisy
                manifests = load_paths([str(path)], texts=texts)
                gc.freeze()
                t1 = time.process_time()
                result = audit(manifests)
                t2 = time.process_time()
                located = with_field_lines(result, texts)
                t3 = time.process_time()
                gc.unfreeze()
                phases.append((t1 - t0, t2 - t1, t3 - t2))
                del manifests, result, texts
            rows.append({"megabytes": path.stat().st_size / 1e6, "objects": objects,
                         "findings": len(located.findings), "command_seconds_median": statistics.median(wall),
                         "command_cpu_seconds_median": statistics.median(cpu),
                         "peak_rss_mib_median": statistics.median(rss),
                         "load": statistics.median(p[0] for p in phases),
                         "rules": statistics.median(p[1] for p in phases),
                         "locate": statistics.median(p[2] for p in phases)})
    base = rows[0]
    for row in rows:
        scale = row["megabytes"] / base["megabytes"]
        row["locate_per_mb_vs_first"] = (row["locate"] / row["megabytes"]) / (base["locate"] / base["megabytes"])
        row["command_per_mb_vs_first"] = ((row["command_cpu_seconds_median"] / row["megabytes"])
                                          / (base["command_cpu_seconds_median"] / base["megabytes"]))
        row["size_ratio"] = scale
    return {"rows": rows}


def _export_pod(i: int) -> dict[str, Any]:
    namespace = f"tenant-{i % 50}"
    container: dict[str, Any] = {
        "name": "worker", "image": "registry.example/train:1.4.2",
        "resources": {"requests": {"cpu": "8"}, "claims": [{"name": "gpu"}]}}
    if i % 10 == 9:
        container["resources"]["limits"] = {"nvidia.com/gpu": 1}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"train-{i}", "namespace": namespace, "resourceVersion": str(100000 + i),
                     "labels": {"app": "train"}},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "nodeName": f"gpu-node-{i % 500}",
                 "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
                 "containers": [container]},
        "status": {"phase": "Running", "qosClass": "Burstable"},
    }


def _small_object(i: int) -> dict[str, Any]:
    """A ConfigMap or a Service of a tenant namespace (~300 / ~450 bytes as kubectl prints them)."""
    namespace = f"tenant-{i % 50}"
    metadata = {"name": f"app-{i}", "namespace": namespace, "uid": f"0000-{i:08d}", "resourceVersion": str(200000 + i)}
    if i % 8 < 5:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"LOG_LEVEL": "info"}}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {**metadata, "labels": {"app": f"app-{i}"}},
            "spec": {"selector": {"app": f"app-{i}"}, "ports": [{"port": 80, "targetPort": 8080}],
                     "clusterIP": f"10.96.{i // 256 % 256}.{i % 256}"}}


def write_export(path: Path, objects: int, fmt: str, mix: bool = False) -> None:
    """A ``kubectl get -A -o json|yaml`` List of ``objects`` GPU Pods (and one claim template per namespace);
    ``mix``: one object in five a GPU Pod, the others small ConfigMaps and Services (~110 MB for 200,000 in
    JSON: the goal's 100 MB / 200,000 objects; a Pod as kubectl prints it is ~1.4 kB)."""
    templates = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                  "metadata": {"name": "gpu", "namespace": f"tenant-{n}"},
                  "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                      "deviceClassName": "gpu.nvidia.com", "count": 1}}]}}}} for n in range(50)]
    items = templates + [_export_pod(i) if not mix or i % 5 == 0 else _small_object(i)
                         for i in range(objects - len(templates))]
    document = {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}
    with path.open("w") as out:
        if fmt == "json":
            json.dump(document, out, indent=4)
        else:
            yaml.dump(document, out, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)


def _measure(path: Path, src: str | None) -> tuple[float, float, float, int, str]:
    """Wall seconds, peak RSS (MiB), CPU seconds, exit code and the first error line of one audit."""
    env = {**os.environ, "PYTHONPATH": src} if src else dict(os.environ)
    command = ["/usr/bin/time", "-f", "%M", sys.executable, "-m", "dra_constructs.cli", "audit", "--format", "json",
               "-o", os.devnull, "--max-input-bytes", "none", str(path)]  # 200,000 Pods: 280 MB of JSON
    if not src:
        command[7:7] = ["--quiet"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, check=False, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    # 1: findings; 2: refused (a YAML List over the node limit before it was read item by item)
    assert done.returncode in (1, 2), done.stderr[-800:]
    lines = done.stderr.strip().splitlines()
    error = next((line for line in lines if line.startswith("dra-constructs: error")), "")
    return wall, int(lines[-1]) / 1024, cpu, done.returncode, error[:200]


def bench_export(objects: int, formats: list[str], repeat: int, src: str | None,
                 mix: bool = False) -> dict[str, Any]:
    """Whole-command wall time and peak RSS over one export per format (this tree, and ``src`` if given)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in formats:
            path = Path(tmp) / f"export.{fmt}"
            write_export(path, objects, fmt, mix)
            trees = {"this": None, **({"other": src} if src else {})}
            samples: dict[str, list[tuple[float, float, float, int, str]]] = {name: [] for name in trees}
            for _ in range(repeat):
                for name, tree in trees.items():  # alternating: same load for both
                    samples[name].append(_measure(path, tree))
            for name in trees:
                rows.append({"format": fmt, "tree": name, "mix": mix, "objects": objects,
                             "megabytes": path.stat().st_size / 1e6,
                             "seconds_median": statistics.median(s[0] for s in samples[name]),
                             "seconds_all": [round(s[0], 2) for s in samples[name]],
                             "cpu_seconds_median": statistics.median(s[2] for s in samples[name]),
                             "cpu_seconds_all": [round(s[2], 2) for s in samples[name]],
                             "load_average": os.getloadavg()[0],
                             "peak_rss_mib_median": statistics.median(s[1] for s in samples[name]),
                             "exit_codes": [s[3] for s in samples[name]],
                             "errors": sorted({s[4] for s in samples[name] if s[4]})})
    return {"rows": rows}


SYNTH_WORKER = r"""
import json, sys, time
import cdk8s
guarded, n = sys.argv[1] == "guarded", int(sys.argv[2])
app = cdk8s.App()
chart = cdk8s.Chart(app, "bench", namespace="serving")
if guarded:
    from dra_constructs.guardrails import ensure_guardrails
    ensure_guardrails(chart)
expr = ("device.attributes['gpu.nvidia.com'].architecture == 'Hopper' && "
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('79113Mi')) >= 0")
start = time.perf_counter()
for i in range(n):
    tmpl = cdk8s.ApiObject(chart, f"gpu{i}", api_version="resource.k8s.io/v1beta1", kind="ResourceClaimTemplate")
    tmpl.add_json_patch(cdk8s.JsonPatch.add("/spec", {"spec": {"devices": {"requests": [{
        "name": "gpu", "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1,
        "selectors": [{"cel": {"expression": expr}}]}]}}}))
    dep = cdk8s.ApiObject(chart, f"serve{i}", api_version="apps/v1", kind="Deployment")
    labels = {"app": f"serve{i}"}
    dep.add_json_patch(cdk8s.JsonPatch.add("/spec", {"replicas": 1, "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {
            "terminationGracePeriodSeconds": 60,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": tmpl.name}],
            "containers": [{"name": "app", "image": "registry.example/infer:1",
                            "resources": {"claims": [{"name": "gpu"}]},
                            "lifecycle": {"preStop": {"sleep": {"seconds": 5}}}}]}}}))
built = time.perf_counter()
text = app.synth_yaml()
done = time.perf_counter()
print(json.dumps({"build": built - start, "synth": done - built, "total": done - start}))
"""


def bench_synth(workloads: int, repeat: int) -> dict[str, Any]:
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    samples: dict[str, list[dict[str, float]]] = {"plain": [], "guarded": []}
    cpu: dict[str, list[float]] = {"plain": [], "guarded": []}
    for _ in range(repeat):
        for route in samples:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            out = subprocess.run([sys.executable, "-c", SYNTH_WORKER, route, str(workloads)], check=True,
                                 capture_output=True, text=True, env=env)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[route].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            samples[route].append(json.loads(out.stdout.strip().splitlines()[-1]))
    median = {route: {k: statistics.median(s[k] for s in runs) for k in ("build", "synth", "total")}
              for route, runs in samples.items()}
    # ensure_guardrails() runs before the timed build, so the guardrails' cost is all in the synth
    # phase; build times differ only by noise (other jobs on the machine).
    added = median["guarded"]["synth"] - median["plain"]["synth"]
    return {"workloads": workloads, "objects": 2 * workloads, "median_seconds": median,
            "cpu_seconds_median": {route: statistics.median(cpu[route]) for route in cpu},
            "synth_phase_ratio": median["guarded"]["synth"] / median["plain"]["synth"],
            "added_seconds": added, "added_vs_plain_total": added / median["plain"]["total"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", choices=("audit", "large", "synth", "export", "all"), default="all")
    parser.add_argument("--formats", default="json,yaml", help="export formats for `export` (comma-separated)")
    parser.add_argument("--src", default=None, help="`export`: also run this checkout's src (PYTHONPATH)")
    parser.add_argument("--sizes", default="1,5,10", help="MB per file for `large` (comma-separated)")
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--workloads", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mix", choices=("pods", "mixed", "both"), default="pods",
                        help="`export`: GPU Pods only (1.4 kB each), a mix of one Pod in five with small "
                             "ConfigMaps and Services (~0.55 kB each: the goal's 100 MB / 200,000), or both")
    args = parser.parse_args()
    report: dict[str, Any] = {}
    if args.what in ("audit", "all"):
        report["audit"] = bench_audit(args.objects, args.repeat, unique=False)
        report["audit_unique_selectors"] = bench_audit(args.objects, args.repeat, unique=True)
        for key in ("audit", "audit_unique_selectors"):
            r = report[key]
            phases = {k: round(v, 3) for k, v in r["in_process_median"].items()}
            print(f"{key}: {r['objects']} objects, command {r['command_seconds_median']:.2f} s wall, "
                  f"{r['command_cpu_seconds_median']:.2f} s CPU (goal <= 5 s), in-process {json.dumps(phases)}")
    if args.what in ("large", "all"):
        report["large_file"] = large = bench_large_file([float(x) for x in args.sizes.split(",")], args.repeat)
        for row in large["rows"]:
            print(f"large: {row['megabytes']:.1f} MB, {row['objects']} objects, {row['findings']} findings: command "
                  f"{row['command_seconds_median']:.2f} s wall, {row['command_cpu_seconds_median']:.2f} s CPU "
                  f"({row['peak_rss_mib_median']:.0f} MiB peak); in-process CPU: load "
                  f"{row['load']:.2f} s, rules {row['rules']:.2f} s, locate {row['locate']:.2f} s; per MB vs the "
                  f"first size: locate x{row['locate_per_mb_vs_first']:.2f}, "
                  f"command x{row['command_per_mb_vs_first']:.2f}")
    if args.what in ("export", "all"):
        objects = args.objects if args.what == "export" else 200_000
        mixes = {"pods": [False], "mixed": [True], "both": [False, True]}[args.mix]
        rows = [row for mix in mixes
                for row in bench_export(objects, args.formats.split(","), args.repeat, args.src, mix)["rows"]]
        report["export"] = {"rows": rows}
        for row in rows:
            print(f"export ({row['tree']}, {'mixed' if row['mix'] else 'pods'}): {row['format']}, "
                  f"{row['megabytes']:.1f} MB, {row['objects']} objects: "
                  f"{row['seconds_median']:.2f} s wall (all {row['seconds_all']}), "
                  f"{row['cpu_seconds_median']:.2f} s CPU (all {row['cpu_seconds_all']}), "
                  f"load {row['load_average']:.1f}, "
                  f"{row['peak_rss_mib_median']:.0f} MiB peak RSS (goal: 100 MB in <= 10 s, <= 1 GB)")
    if args.what in ("synth", "all"):
        report["synth"] = s = bench_synth(args.workloads, args.repeat)
        m = s["median_seconds"]
        print(f"synth: {s['workloads']} GPU workloads, plain build {m['plain']['build']:.2f} s + synth "
              f"{m['plain']['synth']:.2f} s; guarded synth {m['guarded']['synth']:.2f} s: +{s['added_seconds']:.2f} s "
              f"= {100 * s['added_vs_plain_total']:.1f}% of the plain total; process CPU "
              f"{s['cpu_seconds_median']['plain']:.1f} s vs {s['cpu_seconds_median']['guarded']:.1f} s")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
