"""dra_constructs.testing.synth: the manifests for snapshots, the agent zipapp as its digest (issue 22 item 5)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile

import cdk8s
import pytest

from dra_constructs import GuardrailsError, SanitizerDaemonSet, set_kubernetes_version
from dra_constructs.agent import zipapp as zipapp_module
from dra_constructs.errors import DraConstructsError
from dra_constructs.testing import is_zipapp, synth

DIGEST = "sha256:" + "0" * 64


def _app(version: str = "1.34") -> cdk8s.App:
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, version)
    SanitizerDaemonSet(cdk8s.Chart(app, "gpu-system"), "sanitizer", image="registry.example.com/san:0.1.0",
                       image_digest=DIGEST)
    return app


def _config_map(docs: list[dict[str, object]]) -> dict[str, object]:
    return next(d for d in docs if d["kind"] == "ConfigMap")


def test_the_zipapp_becomes_its_digest() -> None:
    archive = zipapp_module.build_zipapp()
    kept, digested = synth(_app(), zipapp="keep"), synth(_app())
    assert base64.b64decode(_config_map(kept)["binaryData"]["agent.pyz"]) == archive  # type: ignore[index]
    value = _config_map(digested)["binaryData"]["agent.pyz"]  # type: ignore[index]
    assert value == f"<zipapp sha256:{hashlib.sha256(archive).hexdigest()}, {len(archive)} bytes>"
    assert len(json.dumps(digested)) < len(json.dumps(kept)) - 100_000
    assert [d["kind"] for d in digested] == [d["kind"] for d in kept]


_REAL_BUILD = zipapp_module.build_zipapp


def _other_zipapp() -> bytes:
    """The same zipapp plus one member: what a library upgrade that changes only the agent's code gives."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(_REAL_BUILD())) as old, zipfile.ZipFile(buffer, "w") as new:
        for name in old.namelist():
            new.writestr(name, old.read(name))
        new.writestr("dra_constructs/agent/_upgrade.py", "X = 1\n")
    return buffer.getvalue()


def test_placeholder_mode_is_stable_across_agent_code_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    before_digest, before = synth(_app()), synth(_app(), zipapp="placeholder")
    monkeypatch.setattr(zipapp_module, "build_zipapp", _other_zipapp)
    after_digest, after = synth(_app()), synth(_app(), zipapp="placeholder")
    assert before_digest != after_digest  # the digest says that the agent's code changed
    assert before == after  # the placeholder snapshot does not
    text = json.dumps(after)
    assert "<zipapp>" in text and "<zipapp-sha256>" in text and "-runtime-<hash>" in text
    daemon_set = next(d for d in after if d["kind"] == "DaemonSet")
    volumes = json.dumps(daemon_set["spec"]["template"]["spec"]["volumes"])  # type: ignore[index]
    assert "-runtime-<hash>" in volumes  # the reference follows the renamed ConfigMap


def test_a_chart_alone_and_apps_without_the_sanitizer() -> None:
    app = _app()
    chart = app.charts[0]
    assert synth(chart) == synth(app)
    plain = cdk8s.Testing.app()
    cdk8s.ApiObject(cdk8s.Chart(plain, "c"), "cm", api_version="v1", kind="ConfigMap",
                    metadata={"name": "x"}).add_json_patch(cdk8s.JsonPatch.add("/binaryData", {"k": "aGVsbG8="}))
    assert synth(plain)[0]["binaryData"] == {"k": "aGVsbG8="}  # not a zipapp: untouched


def test_the_guardrails_run_as_at_synth() -> None:
    app = cdk8s.Testing.app()
    chart = cdk8s.Chart(app, "plain")
    pod = cdk8s.ApiObject(chart, "pod", api_version="v1", kind="Pod", metadata={"name": "p"})
    pod.add_json_patch(cdk8s.JsonPatch.add("/spec", {"terminationGracePeriodSeconds": 30, "containers": [
        {"name": "c", "image": "busybox:1.36", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}))
    from dra_constructs import enable_guardrails

    enable_guardrails(app)
    with pytest.raises(GuardrailsError, match="DRA001"):
        synth(app)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(DraConstructsError, match="zipapp"):
        synth(_app(), zipapp="none")  # type: ignore[arg-type]
    with pytest.raises(DraConstructsError, match="neither a cdk8s Chart nor an App"):
        synth(object())  # type: ignore[arg-type]
    assert not is_zipapp(b"PK\x03\x04 not a zip") and not is_zipapp(b"")


def test_the_pytest_fixture(dra_app: cdk8s.App) -> None:
    # dra_app comes from the package's pytest11 entry point (pyproject.toml), not from a conftest.
    assert isinstance(dra_app, cdk8s.App) and dra_app.charts == []
