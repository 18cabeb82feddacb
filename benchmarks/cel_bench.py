"""CEL checker and evaluator benchmark (numbers recorded in docs/cel.md).

1. ``check``: 10,000 distinct selector expressions (a realistic mix: attribute equality,
   quantity and version comparisons, regular expressions, guards, comprehensions, binds),
   cold (nothing cached) and again (every expression cached). Baseline in the same process:
   cel-cpp's own compile of the same expressions (the floor the checker builds on).
   Also 10,000 unrelated expressions judged in full with no sharing, one by one (``_judge``) and
   in batches of 250 (``_judge_many``, the path of ``check_many``), interleaved with a bare compile,
   and 10 expressions nested past cel-cpp's 32 levels (compiled in pieces, ``_deep``).
2. ``match``: 100 selectors x 1,000 catalog devices, cold (devices prepared on first use)
   and again. Baseline: cel-cpp evaluating a trivial program on the same activations.

Times are this process's CPU time (``time.process_time``): the 2-core machine is shared, and wall
clock there mostly measures the other users. Run: ``.venv/bin/python benchmarks/cel_bench.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dra_constructs.catalog import DEVICE_CLASS_SELECTORS
from dra_constructs.cel import catalog_devices, check, match_devices
from dra_constructs.cel._env import check_env, env_key
from dra_constructs.cel.checker import _judge, _judge_many
from dra_constructs.target import Target

PRODUCTS = ["h100", "a100", "h200", "b200", "a30"]


def expressions(count: int, salt: str) -> list[str]:
    """``count`` distinct selectors; ``salt`` keeps runs from sharing cache entries."""
    out = []
    for i in range(count):
        k = i % 8
        tag = f"{salt}{i}"
        if k == 0:
            out.append(f"device.attributes['gpu.nvidia.com'].productName == 'NVIDIA {tag}'")
        elif k == 1:
            out.append(f"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('{i % 200 + 1}Gi')) >= 0")
        elif k == 2:
            product = PRODUCTS[i % 5]
            out.append(f"device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('.*{product}.*{tag}')")
        elif k == 3:
            out.append(f"'profile' in device.attributes['gpu.nvidia.com'] && "
                       f"device.attributes['gpu.nvidia.com'].profile == '{i % 7 + 1}g.{tag}gb'")
        elif k == 4:
            version = f"{i % 10}.{i % 7}.0"
            out.append(f"device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('{version}')) >= 0"
                       f" && device.driver == 'gpu.nvidia.com' && '{tag}' != ''")
        elif k == 5:
            out.append(f"device.attributes['gpu.nvidia.com'].architecture in ['Hopper', 'Ampere', '{tag}']")
        elif k == 6:
            out.append(f"cel.bind(g, device.attributes['gpu.nvidia.com'], g.type == 'mig' && g.uuid != '{tag}')")
        else:
            out.append(f"device.capacity['gpu.nvidia.com'].exists(k, k.startsWith('memorySlice{i % 8}'))"
                       f" || '{tag}' == ''")
    return out


def timed(label: str, fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    elapsed = time.process_time() - start
    print(f"{label:58s} {elapsed:7.3f} s")
    return elapsed


def interleaved(runs: list[tuple[Callable[[list[str]], object], list[str]]], batch: int = 250) -> list[float]:
    """Total seconds of each ``(fn, items)`` run over its items, timed in alternating batches.

    ``fn`` takes a batch of items. The machine is shared, so load drifts within seconds:
    alternating batches keeps the ratios of the runs fair even when their absolute times are not.
    """
    totals = [0.0] * len(runs)
    for start in range(0, max(len(items) for _, items in runs), batch):
        for index, (fn, items) in enumerate(runs):
            chunk = items[start:start + batch]
            began = time.process_time()
            fn(chunk)
            totals[index] += time.process_time() - began
    return totals


def main() -> None:
    target = "1.32"
    env = check_env(env_key(Target.parse(target)))
    baseline_exprs = expressions(10_000, "b")
    compile_s = timed("baseline: cel-cpp compile only, 10,000 expressions",
                      lambda: [env.compile(e) for e in baseline_exprs])
    exprs = expressions(10_000, "c")
    cold = timed("check(): 10,000 distinct expressions, cold", lambda: [check(e, target) for e in exprs])
    warm = timed("check(): the same 10,000 again (cached)", lambda: [check(e, target) for e in exprs])
    parsed = Target.parse(target)
    key = env_key(parsed)
    unshared = expressions(10_000, "u")
    bare, full, batched = interleaved([
        (lambda chunk: [env.compile(e) for e in chunk], expressions(10_000, "v")),
        (lambda chunk: [_judge(e, parsed, key) for e in chunk], unshared),
        (lambda chunk: _judge_many(chunk, parsed, key), expressions(10_000, "w")),
    ])
    print(f"{'unrelated: bare cel-cpp compile, 10,000 (interleaved)':58s} {bare:7.3f} s")
    print(f"{'unrelated: full check without any sharing (_judge), 10,000':58s} {full:7.3f} s")
    print(f"  without sharing: {full / len(unshared) * 1e6:.0f} us per expression, "
          f"{full / bare:.2f}x a bare compile measured in the same run")
    print(f"{'unrelated: the same in batches of 250 (_judge_many)':58s} {batched:7.3f} s")
    print(f"  batched (check_many's path): {batched / len(unshared) * 1e6:.0f} us per expression, "
          f"{batched / bare:.2f}x a bare compile measured in the same run")
    verdicts = {check(e, target).verdict for e in exprs}
    print(f"  verdicts seen: {sorted(verdicts)}; cold/baseline ratio {cold / compile_s:.2f}; "
          f"per check {cold / len(exprs) * 1e6:.0f} us cold, {warm / len(exprs) * 1e6:.1f} us cached")

    deep = [f"(device.driver == 'd{i}' || " * 60 + "device.attributes['gpu.nvidia.com'].index == 3"
            + ")" * 60 for i in range(10)]
    deep_s = timed("deep: 10 expressions 60 levels deep (compiled in pieces)",
                   lambda: [check(e, target) for e in deep])
    print(f"  per deep expression {deep_s / len(deep) * 1e3:.0f} ms; verdicts "
          f"{sorted({check(e, target).verdict for e in deep})}")

    devices = catalog_devices()[:1000]
    selectors = [e for e in expressions(100, "m") if check(e, target).ok]
    class_selector = [DEVICE_CLASS_SELECTORS["gpu.nvidia.com"]]
    match_cold = timed(f"match: {len(selectors)} selectors x {len(devices)} devices, cold",
                       lambda: [match_devices([], [s], devices, target) for s in selectors])
    match_warm = timed(f"match: {len(selectors)} selectors x {len(devices)} devices, again",
                       lambda: [match_devices([], [s], devices, target) for s in selectors])
    fresh = expressions(100, "n")
    match_new = timed("match: 100 new selectors x 1000 devices (devices prepared)",
                      lambda: [match_devices(class_selector, [s], devices, target) for s in fresh])
    print(f"  per (selector, device): cold {match_cold / (len(selectors) * len(devices)) * 1e6:.1f} us, "
          f"again {match_warm / (len(selectors) * len(devices)) * 1e6:.1f} us, "
          f"new selectors {match_new / (len(fresh) * len(devices)) * 1e6:.1f} us")


if __name__ == "__main__":
    main()
