"""pytest plugin (entry point ``pytest11: dra_constructs``): the ``dra_app`` fixture.

Loaded by every pytest run where dra-constructs is installed, so it imports nothing heavy until a
test asks for the fixture. Turn it off with ``-p no:dra_constructs``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import cdk8s


@pytest.fixture
def dra_app() -> Iterator[cdk8s.App]:
    """A fresh ``cdk8s.Testing.app()`` (its own temporary outdir); snapshot it with
    ``assert dra_constructs.testing.synth(dra_app) == snapshot``."""
    import cdk8s

    yield cdk8s.Testing.app()
