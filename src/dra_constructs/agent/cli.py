"""``dra-sanitizer``: the node agent and its operator commands.

``run`` (the agent), ``once --device ID`` (one barrier cycle by hand), ``release --device ID
--reason TEXT`` (operator release of a quarantined device: logged, then a full barrier),
``selftest [--device ID]`` (the residue canary, :mod:`.canary`), ``status`` (the persisted state
of every device), ``evidence [--device ID] [--html FILE]``
(the evidence file as a table / an HTML report) and ``simulate`` (the real barrier on the
simulated backend under random faults). Exit codes: 0 success, 1 a failed check (a device
quarantined by ``once``/``release``, residue or an inconclusive ``selftest``, a dirty release in
``simulate``), 2 bad input.
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import Any

from dra_constructs._cli_runner import run_parser
from dra_constructs.agent.config import AgentConfig, load_config
from dra_constructs.errors import DraConstructsError

__all__ = ["build_parser", "main"]

_PROG = "dra-sanitizer"


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")


def _config(args: argparse.Namespace) -> AgentConfig:
    overrides: dict[str, Any] = {}
    if getattr(args, "node", None):
        overrides["node_name"] = args.node
    if getattr(args, "backend", None):
        overrides["backend"] = args.backend
    config = load_config(args.config, **overrides)
    if not config.node_name and os.environ.get("NODE_NAME"):
        config = config.model_copy(update={"node_name": os.environ["NODE_NAME"]})
    _setup_logging(config.log_level)
    return config


def _cmd_run(args: argparse.Namespace) -> int:
    from dra_constructs.agent.agent import Agent
    from dra_constructs.agent.runtime import build_runtime

    agent = Agent(build_runtime(_config(args)))

    def stop(signum: int, _frame: FrameType | None) -> None:
        logging.getLogger("dra_sanitizer").info("signal %d: stopping", signum)
        agent.stop.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return agent.run()


def _print(record: Any) -> None:
    print(record.model_dump_json(indent=2) if hasattr(record, "model_dump_json") else json.dumps(record, indent=2))


def _cmd_once(args: argparse.Namespace) -> int:
    from dra_constructs.agent.runtime import build_runtime

    rt = build_runtime(_config(args))
    record = rt.barrier.run(rt.device(args.device), "once")
    _print(record)
    return 0 if record.result == "released" else 1


def _cmd_release(args: argparse.Namespace) -> int:
    from dra_constructs.agent.runtime import build_runtime
    from dra_constructs.agent.state import Phase

    if not args.reason.strip():
        raise DraConstructsError("release", "--reason", args.reason, "an operator release needs a reason",
                                 "say why the device may go back into service")
    rt = build_runtime(_config(args))
    device = rt.device(args.device)
    state = rt.barrier.deps.store.load(device.name, device.uuid)
    if state.phase is not Phase.QUARANTINED and not args.force:
        raise DraConstructsError("release", "--device", args.device, f"the device is {state.phase.value}, "
                                 "not quarantined", "release only quarantined devices (or pass --force)")
    record = rt.barrier.operator_release(device, args.reason, args.operator or getpass.getuser())
    _print(record)
    return 0 if record.result == "released" else 1


def _cmd_selftest(args: argparse.Namespace) -> int:
    from dra_constructs.agent import canary
    from dra_constructs.agent.runtime import build_runtime

    rt = build_runtime(_config(args))
    if args.device:
        device = rt.device(args.device)
        records = [canary.run_selftest(rt.barrier.deps, device, "selftest", sanitized=True)]
        canary.finish(rt.barrier, device)
    else:
        records = canary.on_demand(rt.barrier, rt.devices)
    for record in records:
        _print(record)
    return 0 if all(r.result == "clean" for r in records) else 1


def _cmd_status(args: argparse.Namespace) -> int:
    from dra_constructs.agent.state import StateStore, dump_states

    config = _config(args)
    print(dump_states(StateStore(config.state_dir, fsync=False).all()))
    return 0


def _cmd_evidence(args: argparse.Namespace) -> int:
    from dra_constructs._io import write_output
    from dra_constructs.agent.evidence_html import render_html
    from dra_constructs.agent.evidence_read import read_evidence
    from dra_constructs.agent.evidence_table import render_table

    if args.last is not None and args.last < 1:
        raise DraConstructsError("evidence", "--last", args.last, "out of range", "pass --last N with N >= 1")
    path = args.file or _config(args).evidence_file
    evidence = read_evidence(path, device=args.device, skip_bad=args.skip_bad_lines)
    if args.device and not evidence.rows:
        raise DraConstructsError(str(path), "--device", args.device, "no record names this device or UUID",
                                 "pass a device name (gpu-0, gpu-0-mig-...) or UUID from the table without --device")
    rows = evidence.rows[-args.last:] if args.last else evidence.rows
    if args.html:
        nodes = sorted({r.node for r in evidence.rows})
        title = f"dra-sanitizer evidence: {', '.join(nodes) or 'no records'}" + (
            f", device {args.device}" if args.device else "")
        write_output(None if args.html == "-" else args.html, render_html(evidence, title), "--html")
        if args.html == "-":  # the page alone on stdout: kubectl exec ... --html - > report.html
            return 0
    write_output(None, render_table(evidence, rows))
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    from dra_constructs.agent.simscenarios import TURNOVER_FAILURES
    from dra_constructs.agent.simulate import simulate

    if not 0.0 <= args.fault_rate <= 1.0:
        raise DraConstructsError("simulate", "--fault-rate", args.fault_rate, "not a probability",
                                 "pass a number between 0 and 1")
    if args.turnover_rounds is not None and args.turnover_rounds < 0:
        raise DraConstructsError("simulate", "--turnover-rounds", args.turnover_rounds, "out of range",
                                 "pass --turnover-rounds >= 0")
    if args.devices < 1 or args.cycles < 0:
        raise DraConstructsError("simulate", "--devices/--cycles", (args.devices, args.cycles),
                                 "out of range", "pass --devices >= 1 and --cycles >= 0")
    logging.basicConfig(level=logging.CRITICAL if not args.verbose else logging.INFO, stream=sys.stderr)
    summary = simulate(devices=args.devices, cycles=args.cycles, fault_rate=args.fault_rate, seed=args.seed,
                       records=args.records, kubernetes_version=args.kubernetes_version,
                       crash_rate=args.crash_rate, memory_bytes=args.memory_bytes,
                       partition_reset=args.partition_reset, dynamic_mig=args.dynamic_mig,
                       turnover_rounds=args.turnover_rounds)
    print(json.dumps(summary.as_dict(), indent=2, sort_keys=True))
    turnovers = summary.turnovers
    bad = (summary.dirty_releases or summary.failures_without_reason or summary.stuck_tenants_released
           or summary.released_without_proof or any(turnovers.get(k) for k in TURNOVER_FAILURES))
    return 1 if bad else 0


def build_parser() -> argparse.ArgumentParser:
    """The ``dra-sanitizer`` argument parser."""
    from dra_constructs import __version__

    parser = argparse.ArgumentParser(
        prog=_PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The GPU node agent: when a device leaves a tenant it is guarded, drained, zero-filled "
                    "and verified before it is handed out again (or quarantined with the reason).",
        epilog="exit codes: 0 success, 1 a failed check (a device quarantined by once/release, residue or an "
               "inconclusive selftest, a dirty release in simulate), 2 bad input.\n"
               "examples:\n"
               "  dra-sanitizer status --config /etc/dra-sanitizer/config.yaml\n"
               "  dra-sanitizer release --device gpu-0 --reason 'memory test passed (ticket 123)'\n"
               "  dra-sanitizer evidence --config /etc/dra-sanitizer/config.yaml --device gpu-0 --html gpu-0.html\n"
               "  dra-sanitizer simulate --devices 8 --cycles 3",
    )
    parser.add_argument("--version", action="version", version=f"{_PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def agent_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", metavar="PATH", help="AgentConfig as JSON or YAML (default: defaults)")
        p.add_argument("--node", "--node-name", dest="node",
                       help="node name (overrides node_name; default: $NODE_NAME if node_name is empty)")
        p.add_argument("--backend", choices=("nvml", "amd", "simulated"), help="override the backend")

    run = sub.add_parser("run", help="run the agent", description="Run the node agent: watch this node's "
                         "devices and put every device that leaves a tenant through the barrier (guard, drain, "
                         "zero-fill, verify, release or quarantine). Runs until SIGTERM.")
    agent_args(run)
    run.set_defaults(func=_cmd_run)
    once = sub.add_parser("once", help="run one barrier cycle on one device by hand",
                          description="Run one barrier cycle on one device now; exit 1 if it ends quarantined.")
    agent_args(once)
    once.add_argument("--device", required=True, help="DRA device name (gpu-0, gpu-0-mig-...) or UUID")
    once.set_defaults(func=_cmd_once)
    release = sub.add_parser("release", help="operator release of a quarantined device (runs a full barrier)",
                             description="Release a quarantined device after review: the release is logged "
                                         "with --reason and --operator, then a full barrier runs; exit 1 if the "
                                         "device fails it again.")
    agent_args(release)
    release.add_argument("--device", required=True, help="DRA device name (gpu-0, gpu-0-mig-...) or UUID")
    release.add_argument("--reason", required=True, help="why it may go back into service (logged)")
    release.add_argument("--operator", help="who releases it (default: the current user)")
    release.add_argument("--force", action="store_true", help="also for a device that is not quarantined")
    release.set_defaults(func=_cmd_release)
    selftest = sub.add_parser(
        "selftest", help="residue canary: does a tenant's memory survive its exit on this node?",
        description="Write a random pattern in one CUDA context, let that process exit as a tenant does, and count "
                    "in a fresh context the pattern words that survived (then zero-fill and verify). One device "
                    "per GPU model and driver version, or --device; only a clean, unclaimed device. A selftest "
                    "evidence record per run; exit 0 clean, 1 residue or inconclusive, 2 bad input (an unknown or "
                    "claimed device).")
    agent_args(selftest)
    selftest.add_argument("--device", help="DRA device name (gpu-0, gpu-0-mig-...) or UUID")
    selftest.set_defaults(func=_cmd_selftest)
    status = sub.add_parser("status", help="print the persisted state of every device",
                            description="Print the persisted barrier state of every device of this node.")
    agent_args(status)
    status.set_defaults(func=_cmd_status)
    evidence = sub.add_parser(
        "evidence", help="a node's or one device's barrier history: a table, or an HTML report",
        description="Read the agent's evidence file (JSON lines, one record per barrier cycle) and print a table: "
                    "time, device, UUID, trigger, result, coverage, bytes, fill/verify bandwidth, seconds, reason. "
                    "--html also writes one self-contained HTML report (timeline per device; no script, no network). "
                    "A line that is not an evidence record is an error (exit 2) naming the line.")
    agent_args(evidence)
    evidence.add_argument("--file", metavar="PATH", help="the evidence file (default: evidence_file of --config)")
    evidence.add_argument("--device", help="only this device (DRA device name or UUID)")
    evidence.add_argument("--html", metavar="FILE",
                          help="also write the HTML report here ('-': only the report, on stdout)")
    evidence.add_argument("--last", type=int, metavar="N", help="table: only the last N records (the HTML has all)")
    evidence.add_argument("--skip-bad-lines", action="store_true",
                          help="list lines that are not evidence records instead of failing on the first")
    evidence.set_defaults(func=_cmd_evidence)
    sim = sub.add_parser("simulate", help="the real barrier on the simulated backend with random faults",
                         description="Run the real barrier against a simulated node with injected faults and "
                                     "print a JSON summary; exit 1 if any device was released dirty.")
    sim.add_argument("--devices", type=int, default=56, help="simulated devices (default 56)")
    sim.add_argument("--cycles", type=int, default=10, help="barrier cycles per device (default 10)")
    sim.add_argument("--fault-rate", type=float, default=0.05, help="fault chance per step (default 0.05)")
    sim.add_argument("--seed", type=int, default=0, help="random seed, for reproducible runs (default 0)")
    sim.add_argument("--records", metavar="FILE", help="append the evidence records (JSON lines) here")
    sim.add_argument("--kubernetes-version", default="1.34", help="target: 1.32 has no DeviceTaintRule")
    sim.add_argument("--crash-rate", type=float, default=None, help="agent crash chance per point")
    sim.add_argument("--memory-bytes", type=int, default=4096, help="simulated memory per device")
    sim.add_argument("--partition-reset", choices=("off", "mig-instance", "gpu"), default="off",
                     help="cold partition reset at every release")
    sim.add_argument("--dynamic-mig", action="store_true",
                     help="DynamicMIG GPUs: every placement a device, instances only while prepared")
    sim.add_argument("--turnover-rounds", type=int, default=None,
                     help="agent turnover scenarios: shared devices, re-lists, restarts, non-DRA processes "
                          "(default 4 x cycles)")
    sim.add_argument("--verbose", action="store_true", help="log every barrier step to stderr")
    sim.set_defaults(func=_cmd_simulate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    return run_parser(build_parser(), argv, _PROG)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
