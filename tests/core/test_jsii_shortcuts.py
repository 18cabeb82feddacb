"""Shortcuts through jsii for the library's own objects (_jsii_shortcuts.py): same output, less work.

Each test compares the YAML text with jsii's ordinary path (the hook off) and with cdk8s's own
rendering, byte for byte; the count of ``_Document`` answers shows which path was taken.
"""

from __future__ import annotations

from typing import Any

import cdk8s
import jsii
import pytest

from dra_constructs import Container, GpuClaimTemplate, GpuPod
from dra_constructs.constructs import _jsii_shortcuts
from dra_constructs.constructs._rendered import cdk8s_rendering

from .helpers import jsii_exchanges

IMAGE = "registry.example/a:1"
ODD_VALUES = {"t": ["a", "b"], "f": 1.0, "g": 2.5, "b": True, "n": None, "e": {}, "l": [], "big": 2**60,
              "u": "ünï", "s": "yes", "o": "012", "10": "ten", "2": "two", "$ref": "x", "nested": [{"k": [None, 0]}]}


def _answer_kind(request: Any) -> str | None:
    """The type of what Python answered to a Node callback (``None`` for other requests)."""
    complete = getattr(request, "complete", None)
    return None if complete is None else type(complete.result).__name__


def _synth(app: cdk8s.App) -> tuple[str, list[str]]:
    """The App's YAML and the kinds of the callback answers sent while synthesizing it."""
    with jsii_exchanges(_answer_kind) as answers:
        text = app.synth_yaml()
    return text, answers


def _app(labels: dict[str, str] | None = None, extra: dict[str, Any] | None = None) -> cdk8s.App:
    app = cdk8s.Testing.app()
    chart = cdk8s.Chart(app, "c", labels=labels or {"team": "a", "10": "n"}, namespace="ml")
    for i in range(3):
        tmpl = GpuClaimTemplate.mig(chart, f"slice{i}", gpu="A100_80GB", profile="3g.40gb")
        GpuPod(chart, f"pod{i}", containers=[Container(name="app", image=IMAGE, claims=(tmpl.use(),))],
               extra_spec=extra)
    return app


def _ordinary(app: cdk8s.App, monkeypatch: pytest.MonkeyPatch) -> str:
    """The App's YAML with every answer through jsii's ordinary path (as before this module)."""
    with monkeypatch.context() as patched:
        patched.setattr(_jsii_shortcuts._Hook, "installed", False)
        ordinary, answers = _synth(app)
    assert "_Document" not in answers
    return ordinary


def test_node_gets_each_library_manifest_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app(extra={"overhead": ODD_VALUES})
    fast, answers = _synth(app)
    assert answers.count("_Document") == 6  # 3 templates + 3 pods; before: 6 dicts
    with cdk8s_rendering():
        slow = app.synth_yaml()
    assert fast == _ordinary(app, monkeypatch) == slow
    assert "u: ünï" in fast and "$ref: x" in fast and "- null" in fast


@pytest.mark.parametrize("where", ["spec", "chart label"])
def test_a_key_node_would_read_as_a_jsii_shortcuts_token_takes_jsiis_path(where: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Sent as a plain object, {"$jsii.byref": ...} would be read as a reference to a Node object.
    if where == "spec":
        app = _app(extra={"overhead": {"$jsii.byref": "x", "m": {"$jsii.map": {"a": "b"}}}})
    else:
        app = _app(labels={"$jsii.byref": "x", "team": "a"})  # two keys: jsii hands them back as a dict
    fast, answers = _synth(app)
    assert answers.count("_Document") == (3 if where == "spec" else 0)  # the templates have no such key
    assert answers.count("dict") == (3 if where == "spec" else 6)
    # cdk8s's own rendering reads these keys differently, as it did before (JsonPatch values)
    assert fast == _ordinary(app, monkeypatch)
    assert "$jsii.byref: x" in fast


def test_python_callers_of_to_json_get_their_own_dict() -> None:
    app = _app()
    pod = next(c for c in app.charts[0].node.children if isinstance(c, GpuPod))
    doc = pod.to_json()
    assert type(doc) is dict
    doc["spec"]["containers"][0]["image"] = "changed"
    fast, answers = _synth(app)
    assert "changed" not in fast and answers.count("_Document") == 6


def test_a_subclass_to_json_gets_a_dict_and_node_what_it_returns() -> None:
    class Annotated(GpuPod):
        def to_json(self) -> Any:
            doc = super().to_json()
            doc["metadata"]["annotations"] = {"seen": "yes"}
            return doc

    app = cdk8s.Testing.app()
    Annotated(cdk8s.Chart(app, "c"), "p", containers=[Container(name="app", image=IMAGE)])
    fast, answers = _synth(app)
    assert 'seen: "yes"' in fast and "_Document" not in answers


def test_without_the_hook_every_answer_takes_jsiis_path(monkeypatch: pytest.MonkeyPatch) -> None:
    converter = jsii.kernel.provider._process._serializer  # type: ignore[attr-defined]

    def refuse(*args: Any) -> None:
        raise TypeError("another cattrs")

    monkeypatch.setattr(_jsii_shortcuts._Hook, "installed", None)
    monkeypatch.setattr(type(converter), "register_unstructure_hook", refuse)
    app = _app()
    fast, answers = _synth(app)
    assert _jsii_shortcuts._Hook.installed is False
    assert answers.count("dict") == 6 and "_Document" not in answers
    with cdk8s_rendering():
        assert fast == app.synth_yaml()



def test_override_discovery_runs_once_per_library_class(monkeypatch: pytest.MonkeyPatch) -> None:
    discover = jsii._kernel._get_overides.__wrapped__  # type: ignore[attr-defined]
    calls: list[str] = []

    def counting(klass: type, obj: Any) -> Any:
        calls.append(type(obj).__name__)
        return discover(klass, obj)

    monkeypatch.setattr(jsii._kernel, "_get_overides", _jsii_shortcuts._cached_overrides(counting))
    monkeypatch.setattr(_jsii_shortcuts, "_OVERRIDES", {})

    class Mine(GpuPod):  # a user's subclass: its own override is found on every create
        def to_json(self) -> Any:
            doc = super().to_json()
            doc["metadata"]["annotations"] = {"mine": "1"}
            return doc

    app = cdk8s.Testing.app()
    chart = cdk8s.Chart(app, "c")
    for i in range(3):
        tmpl = GpuClaimTemplate.mig(chart, f"slice{i}", gpu="A100_80GB", profile="3g.40gb")
        GpuPod(chart, f"pod{i}", containers=[Container(name="app", image=IMAGE, claims=(tmpl.use(),))])
        Mine(chart, f"mine{i}", containers=[Container(name="app", image=IMAGE)])
    assert (calls.count("GpuClaimTemplate"), calls.count("GpuPod"), calls.count("Mine")) == (1, 1, 3)
    fast, answers = _synth(app)
    assert fast.count('mine: "1"') == 3 and answers.count("_Document") == 6
