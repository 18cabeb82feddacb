"""``/metrics`` (Prometheus text format, via ``prometheus_client``), ``/healthz`` and ``/readyz``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from dra_constructs.agent.evidence import EvidenceRecord

__all__ = ["HealthServer", "Metrics"]


class Metrics:
    """The agent's metrics, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.cycles = Counter("dra_sanitizer_barrier_cycles", "Barrier cycles by result.", ["result"],
                              registry=self.registry)
        self.phase_seconds = Histogram(
            "dra_sanitizer_phase_seconds", "Time per barrier phase.", ["phase"], registry=self.registry,
            buckets=(0.001, 0.005, 0.02, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
        )
        self.bytes_zeroed = Counter("dra_sanitizer_bytes_zeroed", "Bytes zeroed and verified.",
                                    registry=self.registry)
        self.coverage = Gauge("dra_sanitizer_last_coverage_ratio", "Coverage of the last cycle per device.",
                              ["device"], registry=self.registry)
        self.devices = Gauge("dra_sanitizer_devices", "Devices by phase.", ["phase"], registry=self.registry)
        self.scrub_on_free_disabled = Gauge(
            "dra_sanitizer_scrub_on_free_disabled", "1 if the driver's scrub-on-free is off (-1 unknown).",
            registry=self.registry)
        self.unmapped_devices = Gauge(
            "dra_sanitizer_unmapped_claim_devices",
            "1 per device a claim on this node names that the agent cannot map to hardware (alert).",
            ["device"], registry=self.registry)
        self.enumeration_errors = Counter(
            "dra_sanitizer_enumeration_errors", "Device enumeration errors (NVML), per enumeration.",
            registry=self.registry)
        self.mig_management_unavailable = Gauge(
            "dra_sanitizer_mig_management_unavailable",
            "1 if the agent cannot create/destroy MIG instances (DynamicMIG placements stay guarded: alert).",
            registry=self.registry)
        self.api_unknown = Gauge(
            "dra_sanitizer_api_state_unknown", "1 while the claims could not be listed (no barrier runs).",
            registry=self.registry)
        self.unknown_without_api = Gauge(
            "dra_sanitizer_unknown_devices_without_api",
            "Never-sanitized devices while the claims cannot be listed, by local guard: compute-mode "
            "(PROHIBITED set), compute-instance (MIG before CUDA 13.3: its compute instances destroyed), "
            "no-instance (DynamicMIG placement, nothing to set), failed (NVML refused: alert).",
            ["guard"], registry=self.registry)

        self.foreign_contexts = Counter(
            "dra_sanitizer_foreign_contexts",
            "Processes found with a context on a device being released that the released claims did not own, "
            "by owner (pod, host, unknown): never signalled; the device stays guarded until they are gone.",
            ["owner"], registry=self.registry)
        self.missed_turnovers = Counter(
            "dra_sanitizer_missed_turnovers",
            "Devices another claim took with no barrier in between, by outcome (barrier: sanitized before its "
            "pods ran; adopted: its pods already ran there, nobody killed, reported).",
            ["outcome"], registry=self.registry)
        self.health_gates = Counter(
            "dra_sanitizer_health_gates",
            "Health gate results before a release (agent/health.py), by gate and status (pass, fail: "
            "quarantined, unavailable: not served by this GPU or driver).",
            ["gate", "status"], registry=self.registry)

        self.handle_scan_problems = Counter(
            "dra_sanitizer_device_handle_scan_problems",
            "/proc/*/fd and maps scans of a device being released (agent/devhandles.py) that could not rule "
            "holders out (outcome failed: the release is refused).",
            ["outcome"], registry=self.registry)
        self.selftest_runs = Counter(
            "dra_sanitizer_selftest_runs", "Residue canary runs (agent/canary.py) by verdict: clean, residue, "
            "inconclusive.", ["verdict"], registry=self.registry)
        self.selftest_residue = Gauge(
            "dra_sanitizer_selftest_residue", "Last residue canary per GPU model and driver: 1 residue survived a "
            "tenant's exit (fill-and-verify is the only scrub), 0 clean, -1 inconclusive.", ["model", "driver"],
            registry=self.registry)
        self.lifecycle_events = Counter(
            "dra_sanitizer_lifecycle_events",
            "Device state transition Events (DeviceInUse, DeviceSanitizing, DeviceReleased) by reason and "
            "outcome: posted, failed (not posted: the API refused it after the retries, or none is configured), "
            "rate-limited (a flapping device).",
            ["reason", "outcome"], registry=self.registry)

    def observe(self, record: EvidenceRecord) -> None:
        """Account one evidence record."""
        for process in record.foreign_processes:
            self.foreign_contexts.labels(str(process.get("owner_kind", "unknown"))).inc()
        if record.kind == "missed-turnover":
            return
        self.cycles.labels(record.result).inc()
        for gate in record.health or []:
            self.health_gates.labels(gate.gate, gate.status).inc()
        for phase, seconds in record.phase_seconds.items():
            self.phase_seconds.labels(phase).observe(seconds)
        if record.result == "released":
            self.bytes_zeroed.inc(record.bytes_verified)
        self.coverage.labels(record.device).set(record.coverage)

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)


class HealthServer:
    """A small threaded HTTP server on ``address:port`` (port 0: any free port)."""

    def __init__(self, metrics: Metrics, address: str, port: int,
                 healthy: Callable[[], bool], ready: Callable[[], bool]) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, outer.metrics.render(), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/readyz"):
                    ok = healthy() if path == "/healthz" else ready()
                    self._send(200 if ok else 503, b"ok\n" if ok else b"not ok\n", "text/plain")
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _send(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # quiet: probes every few seconds
                return

        self.metrics = metrics
        self._server = ThreadingHTTPServer((address, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="health", daemon=True)

    @property
    def port(self) -> int:
        """The port actually bound."""
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
