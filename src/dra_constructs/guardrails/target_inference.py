"""Which Kubernetes release ``dra-constructs audit`` judges for when none is given (pure Python).

The documents say it: ``resource.k8s.io/v1`` exists from 1.34, ``v1beta2`` from 1.33, DeviceTaintRule
``v1beta2`` from 1.36, and so on (``target.API_VERSIONS``). The inferred target is the *oldest*
supported release that serves every DRA API version in the input: the strictest judgement the
documents are consistent with (a field newer than that release is still reported by DRA011, and the
message names the release that added it). Without any DRA API object the newest supported release
is taken: nothing in the input ties it to an older one, and the newest release refuses the least.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dra_constructs.guardrails.manifest import Manifest
from dra_constructs.target import API_VERSIONS, SUPPORTED_MINORS, Target

__all__ = ["TargetChoice", "chosen_target", "infer_target"]


@dataclass(frozen=True)
class TargetChoice:
    """The audit's target and where it came from (``option``, ``inferred`` or ``newest``), with the reason."""

    target: Target
    source: str
    reason: str

    def header(self) -> str:
        """One line for the text report."""
        return f"target: Kubernetes {self.target} ({self.reason})"

    def to_dict(self) -> dict[str, str]:
        """The JSON (and SARIF property) shape."""
        return {"kubernetesVersion": str(self.target), "source": self.source, "reason": self.reason}


def infer_target(manifests: Sequence[Manifest]) -> TargetChoice:
    """The oldest supported release serving every DRA API version of ``manifests``, else the newest one."""
    newest = SUPPORTED_MINORS.stop - 1
    needed: dict[int, str] = {}
    for m in manifests:
        for fact in API_VERSIONS:
            if fact.api_version == m.api_version and m.kind in fact.kinds:
                needed.setdefault(fact.introduced, f"{m.api_version} {m.kind}")
    if not needed:
        return TargetChoice(Target.parse(f"1.{newest}", "audit"), "newest",
                            "no resource.k8s.io object names a release: the newest supported one; "
                            "--kubernetes-version sets yours")
    minor = min(max(needed), newest)
    return TargetChoice(Target.parse(f"1.{minor}", "audit"), "inferred",
                        f"inferred: the oldest release serving {needed[max(needed)]}; "
                        "--kubernetes-version sets yours")


def chosen_target(option: str | None, manifests: Sequence[Manifest]) -> TargetChoice:
    """``--kubernetes-version`` when given, else :func:`infer_target`."""
    if option is not None:
        return TargetChoice(Target.parse(option, "--kubernetes-version"), "option", "--kubernetes-version")
    return infer_target(manifests)
