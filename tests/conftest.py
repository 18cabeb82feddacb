"""Shared test setup: silence the Node 20 end-of-life banner of the jsii kernel."""

from __future__ import annotations

import os

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
