"""Review of _jsii_shortcuts.py: each shortcut stays off where jsii's internals differ from those it
relies on, and a manifest renders the same through the shortcut as through jsii's ordinary path."""

from __future__ import annotations

import enum
from typing import Any

import cdk8s
import jsii
import jsii._kernel
import pytest

from dra_constructs import Container, GpuPod
from dra_constructs.constructs import _jsii_shortcuts
from dra_constructs.errors import DraConstructsError

IMAGE = "registry.example/a:1"


def _app(extra: dict[str, Any] | None = None) -> cdk8s.App:
    app = cdk8s.Testing.app()
    GpuPod(cdk8s.Chart(app, "c", namespace="ml"), "p", containers=[Container(name="app", image=IMAGE)],
           extra_spec=extra)
    return app


def test_override_discovery_of_another_signature_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A jsii whose discovery step takes other arguments keeps its own (the cache would break every create)."""

    def _get_overides(klass: type, obj: Any, interfaces: Any) -> list[Any]:
        return []

    monkeypatch.setattr(jsii._kernel, "_get_overides", _get_overides)
    _jsii_shortcuts.install()
    assert getattr(jsii._kernel, "_get_overides") is _get_overides  # noqa: B009 - (typed otherwise)


def test_a_jsii_that_does_not_pass_the_document_through_keeps_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A jsii whose first walk does not return a ``__jsii_type__`` object unchanged (one that checks it is a
    Node object's reference) gets every answer through its ordinary path, not a synth that fails."""
    original = jsii._kernel._make_reference_for_native

    def stricter(kernel: Any, d: Any) -> Any:
        if getattr(d, "__jsii_type__", None) is not None and not isinstance(d, enum.Enum) \
                and not hasattr(d, "__jsii_ref__") and not hasattr(d, "__jsii_name_mapping__"):
            raise jsii.errors.JSIIError(f"not a reference to a Node object: {d!r}")
        return original(kernel, d)

    expected = _app().synth_yaml()
    monkeypatch.setattr(jsii._kernel, "_make_reference_for_native", stricter)
    monkeypatch.setattr(_jsii_shortcuts._Hook, "installed", None)
    assert _app().synth_yaml() == expected
    assert _jsii_shortcuts._Hook.installed is False


class _Replicas(enum.IntEnum):
    ONE = 1


def test_an_enum_value_is_refused_on_either_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """An IntEnum member (an int to the plain-JSON check, a jsii enum to jsii's marshalling) is refused at
    construction with the field and its value, whichever path would answer Node (review finding)."""
    for installed in (None, False):
        monkeypatch.setattr(_jsii_shortcuts._Hook, "installed", installed)
        with pytest.raises(DraConstructsError, match=r"overhead\.n.*pass its value \(1\)"):
            _app(extra={"overhead": {"n": _Replicas.ONE}}).synth_yaml()


def test_a_str_enum_value_renders_as_its_string() -> None:
    class Policy(enum.StrEnum):
        ALWAYS = "Always"

    assert "restartPolicy: Always" in _app(extra={"restartPolicy": Policy.ALWAYS}).synth_yaml()
