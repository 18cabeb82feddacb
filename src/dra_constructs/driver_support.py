"""Refuse alignments that the cluster's NVIDIA DRA driver release cannot meet (issue 22 item 4).

Checked where the construct-time fit check uses the catalog: the catalog's synthetic devices
publish every topology attribute, the driver releases do not (:mod:`dra_constructs.catalog.driver_versions`).
With the cluster's own slices (``inventory=`` / ``set_inventory``) the fit check sees what the
driver really publishes and this check does not run.
"""

from __future__ import annotations

from collections.abc import Sequence

from dra_constructs.catalog import DEVICE_CLASS_GPU, DEVICE_CLASS_MIG
from dra_constructs.catalog.driver_versions import NvidiaDriverRelease
from dra_constructs.errors import DraConstructsError
from dra_constructs.requests import Alignment, DeviceRequest, FirstAvailable
from dra_constructs.validation import Where, _where

__all__ = ["check_driver_alignments"]

_KIND_BY_CLASS = {DEVICE_CLASS_GPU: "gpu", DEVICE_CLASS_MIG: "mig"}


def _nvidia_kinds(request: DeviceRequest | FirstAvailable) -> list[str]:
    """``gpu`` / ``mig`` for each NVIDIA device class the request (or an alternative) asks for."""
    if isinstance(request, FirstAvailable):
        return [k for alternative in request.alternatives for k in _nvidia_kinds(alternative)]
    kind = _KIND_BY_CLASS.get(request.device_class())
    return [kind] if kind else []


def check_driver_alignments(
    alignments: Sequence[Alignment],
    requests: Sequence[DeviceRequest | FirstAvailable],
    release: NvidiaDriverRelease,
    mig_mode: str,
    where: Where,
) -> None:
    """Raise when an alignment covers NVIDIA devices that ``release`` publishes the attribute on not."""
    by_name = {r.name: r for r in requests}
    for index, alignment in enumerate(alignments):
        covered = [by_name[n.split("/")[0]] for n in alignment.requests] if alignment.requests else list(requests)
        for request in covered:
            for kind in _nvidia_kinds(request):
                reason = release.missing(alignment.on, kind, dynamic_mig=mig_mode == "dynamic")
                if reason is None:
                    continue
                other = "pcieRoot" if alignment.on == "numaNode" else "numaNode"
                raise DraConstructsError(
                    _where(where), f"align[{index}].on", alignment.on,
                    f"{reason}, so request {request.name!r} can never be aligned: the claim would fit no node "
                    f"(a device without the attribute is never chosen)",
                    f"align on {other!r} if your driver publishes it, or declare the driver the cluster runs "
                    "with set_nvidia_driver_version(app, '...') ('main' for a build after v0.4), or check "
                    "against your cluster's ResourceSlices with set_inventory(app, 'slices.yaml') / inventory= "
                    "(docs/topology.md lists which release publishes which attribute)",
                )
