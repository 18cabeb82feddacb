"""Evaluate a ValidatingAdmissionPolicy the way the API server does, with a real CEL engine.

Variables are computed in order and exposed as ``variables.<name>``; each validation must
evaluate to a bool; a failed one yields its message (``messageExpression`` evaluated too).
An evaluation error is returned as ``ERROR: ...`` (with failurePolicy Fail it denies).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from cel_expr_python import cel

_ENV = cel.NewEnv(variables={
    name: cel.Type.DYN for name in ("object", "oldObject", "request", "params", "namespaceObject", "variables")
})


@cache
def _compile(expression: str) -> Any:
    return _ENV.compile(expression)


def _eval(expression: str, obj: dict[str, Any], variables: dict[str, Any]) -> Any:
    value = _compile(expression).eval(data={"object": obj, "oldObject": None, "variables": variables})
    if value.type() == cel.Type.ERROR:
        raise RuntimeError(f"{value.value()} in {expression[:120]}")
    return value.plain_value()


def evaluate(policy: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    """Messages of the validations ``obj`` fails (empty list: admitted)."""
    variables: dict[str, Any] = {}
    try:
        for condition in policy["spec"].get("matchConditions", []):
            if _eval(condition["expression"], obj, variables) is not True:
                return []  # not selected: admitted without evaluating the validations
        for variable in policy["spec"].get("variables", []):
            variables[variable["name"]] = _eval(variable["expression"], obj, variables)
        messages = []
        for validation in policy["spec"]["validations"]:
            result = _eval(validation["expression"], obj, variables)
            assert isinstance(result, bool), validation["expression"]
            if not result:
                if "messageExpression" in validation:
                    message = _eval(validation["messageExpression"], obj, variables)
                    assert isinstance(message, str)
                else:
                    message = validation["message"]
                messages.append(message)
        return messages
    except RuntimeError as error:
        return [f"ERROR: {error}"]


def matches(policy: dict[str, Any], obj: dict[str, Any]) -> bool:
    """Whether the policy's resource rules select ``obj`` (group and kind-derived resource)."""
    group = obj["apiVersion"].rpartition("/")[0]
    resource = obj["kind"].lower() + "s"
    return any(group in rule["apiGroups"] and resource in rule["resources"]
               for rule in policy["spec"]["matchConstraints"]["resourceRules"])


def denied_rules(policies: list[dict[str, Any]], obj: dict[str, Any]) -> set[str]:
    """Rule ids (message prefixes) of every matching policy that denies ``obj``."""
    out: set[str] = set()
    for policy in policies:
        if policy["kind"] == "ValidatingAdmissionPolicy" and matches(policy, obj):
            out |= {message.split(":", 1)[0] for message in evaluate(policy, obj)}
    return out
