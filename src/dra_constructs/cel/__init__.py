"""CEL selectors checked and evaluated as the Kubernetes API server and scheduler do."""

from __future__ import annotations

from .checker import CelCheck, Verdict, check
from .fixes import suggest_fix

__all__ = ["CelCheck", "Verdict", "check", "suggest_fix"]
