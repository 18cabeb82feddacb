"""Shared test setup: silence the Node 20 end-of-life banner of the jsii kernel; the real control plane's
session fixtures (``tests/controlplane/fixtures.py``) for every test folder."""

from __future__ import annotations

import os

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from controlplane.fixtures import control_plane_134, control_plane_137

__all__ = ["control_plane_134", "control_plane_137"]
