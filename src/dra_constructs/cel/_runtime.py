"""Evaluate a checked selector against a device with cel-cpp, as the scheduler does with cel-go.

cel-cpp's evaluator cannot hold values of abstract types, so the Kubernetes types travel as
small protobuf *carrier* messages (``kubernetes.Quantity{v}`` ...) whose functions are
implemented here in Python (``quantity``, ``semver`` ...: the Kubernetes libraries are the part
no engine provides). The checked AST from the type checker is then rewritten where Kubernetes'
cel-go runtime behaves differently from plain CEL, and handed to cel-cpp's evaluator:

* ``==``, ``!=`` and ``in`` on values that may hold a Kubernetes type use Go's semantics (a
  Quantity or Semver ``==`` another type is a "no such overload" error, as in cel-go, and so
  ``!=`` is true: cel-go's ``evalNe`` is ``Equal(l, r) != True``; ``in`` and ``indexOf`` skip
  the error);
* reading an unknown domain of ``device.attributes`` / ``device.capacity`` gives an empty map
  (the DRA compiler's custom mapper); an unknown attribute name stays a "no such key" error.

The parts: ``_values`` (carriers, Go equality), ``_library`` (the Kubernetes libraries),
``_runtime_env`` (the runtime environment binding them), ``_rewrite`` (the AST rewriting); this
module builds programs, turns devices into activations and runs them.
"""

from __future__ import annotations

import re
from typing import Any

from cel_expr_python import cel

from dra_constructs.cel import _astpb
from dra_constructs.cel._env import EnvKey
from dra_constructs.cel._rewrite import rewrite
from dra_constructs.cel._runtime_env import runtime_env
from dra_constructs.cel._values import CelRuntimeError, DeviceError, quantity_msg, semver_msg
from dra_constructs.cel.inventory import Device
from dra_constructs.cel.quantity import QuantityError, parse_quantity
from dra_constructs.cel.semver import SemverError, parse_semver

__all__ = ["CelRuntimeError", "DeviceError", "activation_for", "program_for", "run"]


_programs: dict[tuple[bytes, EnvKey], Any] = {}


def program_for(serialized: bytes, checked: Any, key: EnvKey) -> Any:
    """The cel-cpp program of a checked selector (cached per expression and environment)."""
    cache_key = (serialized, key)
    program = _programs.get(cache_key)
    if program is None:
        try:
            program = runtime_env(key).deserialize(_astpb.encode_checked(rewrite(checked)))
        except Exception as error:  # an engine refusal is this selector's run-time error, never a crash
            if "Cannot parse serialized" in str(error):  # C++ protobuf's depth limit of 100 messages
                raise CelRuntimeError("not evaluated here: the checked AST nests deeper than cel-cpp can load "
                                      "(protobuf depth limit 100; the API server evaluates it)") from None
            raise CelRuntimeError(go_message(str(error))) from None
        if len(_programs) > 1 << 14:
            _programs.clear()
        _programs[cache_key] = program
    return program


# --- devices -----------------------------------------------------------------------------------

def _attribute_value(name: str, value: Any) -> Any:
    kinds = [k for k in ("int", "bool", "string", "version") if k in value]
    if not kinds:
        raise DeviceError(f"attribute {name}: unsupported attribute value")
    kind = kinds[0]
    raw = value[kind]
    if kind == "version":
        try:
            return semver_msg(parse_semver(str(raw)))
        except SemverError as error:
            raise DeviceError(f"attribute {name}: parse semantic version: {error}") from None
    if kind == "int":
        return int(raw)
    if kind == "bool":
        return bool(raw)
    return str(raw)


def device_values(device: Device, with_multi: bool) -> dict[str, Any]:
    """The activation data of ``device`` (``compile.go``'s ``DeviceMatches``)."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in device.attributes.items():
        domain, _, ident = name.rpartition("/")
        attributes.setdefault(domain or device.driver, {})[ident] = _attribute_value(name, value)
    capacity: dict[str, dict[str, Any]] = {}
    for name, text in device.capacity.items():
        domain, _, ident = name.rpartition("/")
        try:
            capacity.setdefault(domain or device.driver, {})[ident] = quantity_msg(parse_quantity(text))
        except QuantityError as error:
            raise DeviceError(f"capacity {name}: {error}") from None
    record: dict[str, Any] = {"driver": device.driver, "attributes": attributes, "capacity": capacity}
    if with_multi:
        record["allowMultipleAllocations"] = bool(device.allow_multiple_allocations)
    return {"device": record, "device.attributes": attributes, "device.capacity": capacity}


_activations: dict[tuple[int, EnvKey], tuple[Device, Any]] = {}


def activation_for(device: Device, key: EnvKey) -> Any:
    """A reusable cel-cpp activation for ``device`` (or raises :class:`DeviceError`)."""
    cache_key = (id(device), key)
    found = _activations.get(cache_key)
    if found is not None and found[0] is device:
        return found[1]
    values = device_values(device, key.allow_multiple_allocations)
    try:
        activation = runtime_env(key).Activation(values)
    except Exception as error:  # a value cel-cpp cannot hold: this device's error, not a crash
        raise DeviceError(f"device {device.id}: {go_message(str(error))}") from None
    if len(_activations) > 1 << 15:
        _activations.clear()
    _activations[cache_key] = (device, activation)
    return activation


_STATUS = re.compile(r"^[A-Z_]+: |\s*\[[A-Z_]+\]$")
_NO_KEY = re.compile(r'Key not found in map\s*:\s*"?(.*?)"?$')


def go_message(message: str) -> str:
    """cel-cpp error text in cel-go's words where they differ."""
    message = _STATUS.sub("", str(message).strip())
    found = _NO_KEY.search(message)
    if found:
        return f"no such key: {found.group(1)}"
    if message.startswith("No matching overloads found"):
        return "no such overload: " + message.split(":", 1)[-1].strip()
    if message == "divide by zero":
        return "division by zero"
    return message


def run(program: Any, activation: Any) -> bool:
    """Evaluate; ``True``/``False`` or :class:`CelRuntimeError` (for any engine failure too)."""
    try:
        value = program.eval(activation)
        kind = value.type()
    except Exception as error:  # cel-cpp raises RuntimeError (UNIMPLEMENTED, INVALID_ARGUMENT...)
        raise CelRuntimeError(go_message(str(error))) from None
    if kind == cel.Type.BOOL:
        return bool(value.value())
    if kind == cel.Type.ERROR:
        raise CelRuntimeError(go_message(value.value()))
    raise CelRuntimeError(f"CEL result of type {kind.name().lower()} could not be converted to bool")
