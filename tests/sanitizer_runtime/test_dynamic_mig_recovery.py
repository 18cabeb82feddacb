"""DynamicMIG: finishing a release after a crash takes the per-GPU lock, like a barrier.

Deterministic interleavings (threads + events, no sleeps deciding the outcome): the recovery
of a release cut off after its verify (its transient instance still exists) is held at its
first step while another placement of the same GPU is sanitized or allocated. A spy on the
per-GPU lock tells "the other barrier is waiting for the recovery" apart from "it went ahead".
"""

from __future__ import annotations

import contextlib
import random
import threading
from pathlib import Path
from typing import Any

from dra_constructs.agent.backends.simulated import SimulatedCrash
from dra_constructs.agent.config import SimulatedBackendSettings
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.evidence import EvidenceRecord
from dra_constructs.agent.kube import Tenant
from dra_constructs.agent.state import Phase

from .conftest import SimEnv

TENANT = Tenant("team-a/claim-1", "team-a", "uid-1")
OTHER = Tenant("team-b/claim-2", "team-b", "uid-2")
ONE_G = "gpu-0-mig-1g10gb-19-{}"
TIMEOUT = 20.0  # safety only: every wait below ends on an event


class _Hooks:
    """The crash hook of the restarted agent: holds the recovery, records the other barrier's steps."""

    def __init__(self) -> None:
        self.hold: str | None = None  # the device whose recovery is held at "releasing"
        self.held = threading.Event()
        self.go = threading.Event()
        self.reached: dict[str, threading.Event] = {}

    def __call__(self, device: str, point: str) -> None:
        self.reached.setdefault(f"{device}:{point}", threading.Event()).set()
        if device == self.hold and point == "releasing" and not self.go.is_set():
            self.held.set()
            assert self.go.wait(TIMEOUT)

    def event(self, device: str, point: str) -> threading.Event:
        return self.reached.setdefault(f"{device}:{point}", threading.Event())


class _LockSpy:
    """Wraps the per-GPU lock: ``waiting`` is set when a thread finds it held by another."""

    def __init__(self, lock: Any, waiting: threading.Event) -> None:
        self._lock, self._waiting = lock, waiting

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=False):
            self._waiting.set()
            self._lock.acquire()

    def __exit__(self, *_exc: object) -> None:
        self._lock.release()


def _cut_off_release(tmp_path: Path) -> tuple[SimEnv, _Hooks, DeviceInfo]:
    """A placement freed by the driver, sanitized through a transient instance, killed at ``releasing``."""
    hooks = _Hooks()
    crashing = {"on": False}

    def hook(device: str, point: str) -> None:
        if crashing["on"] and point == "releasing":
            raise SimulatedCrash(point)
        hooks(device, point)

    env = SimEnv(tmp_path, simulated=SimulatedBackendSettings(gpus=1, dynamic_mig=True, memory_bytes=1024),
                 crash_hook=hook)
    for device in env.rt.devices:  # agent start: every placement proven clean
        assert env.rt.barrier.run(device, "startup-unknown").result == "released"
    a = env.rt.barrier.deps.inventory[ONE_G.format(3)]
    env.rt.barrier.mark_allocated(a, TENANT)
    env.node.prepare(a.name)
    env.node.start_tenant(a.name, [], random.Random(1))
    env.node.unprepare(a.name)
    crashing["on"] = True
    with contextlib.suppress(SimulatedCrash):
        env.rt.barrier.run(a, "deallocated", TENANT)
    crashing["on"] = False
    assert env.rt.barrier.deps.store.load(a.name).phase is Phase.RELEASING
    assert env.node.instance_exists(a.name)  # the transient instance outlived the agent
    env.restart()
    hooks.reached.clear()  # the setup's own barriers passed every point already
    return env, hooks, env.rt.barrier.deps.inventory[a.name]


def _spy_lock(env: SimEnv, waiting: threading.Event) -> None:
    barrier = env.rt.barrier
    real = barrier._parent_lock

    def spied(device: DeviceInfo) -> Any:
        lock = real(device)
        return None if lock is None else _LockSpy(lock, waiting)

    barrier._parent_lock = spied  # type: ignore[method-assign]


def _instances(env: SimEnv) -> list[str]:
    return sorted(d.name for d in env.rt.barrier.deps.inventory.values() if env.node.instance_exists(d.name))


def _unguarded(env: SimEnv) -> list[str]:
    """Placements that are held or overlap a held one, and have no DeviceTaintRule."""
    inventory = env.rt.barrier.deps.inventory
    ruled = {r["metadata"]["annotations"]["sanitizer.dra-constructs.io/device"] for r in env.kube.rules.values()}
    held = [n for n in inventory if env.rt.guard.held(n)]
    need = set(held) | {o for n in held for o in env.rt.guard.overlaps(n)}
    return sorted(need - ruled)


def _run(target: Any, *args: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(target(*args)), daemon=True)
    thread.start()
    return thread, out


def test_dynamic_mig_recovery_and_a_barrier_on_the_same_gpu_never_hold_two_transient_instances(
        tmp_path: Path) -> None:
    """The other placement's barrier waits for the recovery: one transient instance per GPU at a time."""
    env, hooks, a = _cut_off_release(tmp_path)
    b = env.rt.barrier.deps.inventory[ONE_G.format(5)]  # shares no memory slice with 1g@3
    env.rt.barrier.mark_allocated(b, OTHER)
    env.node.prepare(b.name)
    env.node.start_tenant(b.name, [], random.Random(2))
    env.node.unprepare(b.name)
    parts = env.rt.barrier.deps.partitions
    assert parts is not None
    at_create: list[list[str]] = []
    real_create = parts.create

    def create(device: DeviceInfo) -> DeviceInfo:
        at_create.append(_instances(env))  # what already exists on this GPU when one more is made
        return real_create(device)

    parts.create = create  # type: ignore[method-assign]
    waiting, b_created = threading.Event(), hooks.event(b.name, "transient-created")
    _spy_lock(env, waiting)
    hooks.hold = a.name
    recovery, recovered = _run(env.rt.barrier.recover, a)
    assert hooks.held.wait(TIMEOUT)
    barrier, ran = _run(env.rt.barrier.run, b, "deallocated", OTHER)
    decided = threading.Event()
    for event in (waiting, b_created):  # whichever comes first: B waits, or B made a second instance
        threading.Thread(target=lambda e=event: e.wait(TIMEOUT) and decided.set(), daemon=True).start()
    assert decided.wait(TIMEOUT)
    second_during_recovery = b_created.is_set()
    hooks.go.set()
    recovery.join(TIMEOUT)
    barrier.join(TIMEOUT)
    assert not second_during_recovery, f"{b.name}'s transient instance was created beside {a.name}'s"
    assert waiting.is_set()
    assert at_create == [[]], at_create  # B's transient was the only instance on the GPU when created
    record_a, record_b = recovered[0], ran[0]
    assert isinstance(record_a, EvidenceRecord) and record_a.trigger == "recovery-release"
    assert record_a.result == "released" and record_a.coverage_of_free >= 0.99
    assert record_b.result == "released", record_b.reason
    assert _instances(env) == [] and env.kube.rules == {} and _unguarded(env) == []
    for name in env.rt.barrier.deps.inventory:
        assert env.node.audit(name).clean, name


def test_dynamic_mig_allocation_racing_a_recovery_release_keeps_every_overlap_guarded(tmp_path: Path) -> None:
    """A neighbour allocated while the recovery removes guards: 2g@2 (over both) keeps its taint."""
    env, _hooks, a = _cut_off_release(tmp_path)
    c = env.rt.barrier.deps.inventory[ONE_G.format(2)]  # 1g@2 and 1g@3 share the overlap 2g@2
    guard = env.rt.guard
    original_held, original_untaint = guard.held, guard.untaint
    allocation: list[threading.Thread] = []
    releasing = threading.Event()

    def held(name: str) -> bool:
        answer = original_held(name)
        if releasing.is_set() and name == c.name and not allocation:
            allocation.append(threading.Thread(target=env.rt.barrier.mark_allocated, args=(c, OTHER)))
            allocation[0].start()
            allocation[0].join(timeout=0.5)  # runs right here, or waits for the guard's lock
        return answer

    def untaint(device: str, clock: object) -> bool:
        releasing.set()
        try:
            return original_untaint(device, clock)  # type: ignore[arg-type]
        finally:
            releasing.clear()

    guard.held, guard.untaint = held, untaint  # type: ignore[method-assign]
    record = env.rt.barrier.recover(a)
    assert record is not None and record.result == "released"
    assert allocation
    allocation[0].join(TIMEOUT)
    assert _unguarded(env) == []
    ruled = {r["metadata"]["annotations"]["sanitizer.dra-constructs.io/device"]: r["spec"]["taint"]["value"]
             for r in env.kube.rules.values()}
    assert ruled.get("gpu-0-mig-2g20gb-14-2") == "overlap" and ruled[c.name] == "in-use"
    assert _instances(env) == []
