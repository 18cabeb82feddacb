"""Test helpers for apps built with dra-constructs: ``synth(chart_or_app)`` for snapshot tests.

The construct layer's :mod:`dra_constructs.constructs.testing`, under the name the cdk8s convention
suggests (``cdk8s.Testing``). The pytest fixture ``dra_app`` comes with the package (plugin entry
point ``dra_constructs``). docs/testing.md.
"""

from dra_constructs.constructs.testing import ZipappMode, is_zipapp, synth

__all__ = ["ZipappMode", "is_zipapp", "synth"]
