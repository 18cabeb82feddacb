"""Every repo path a doc cites exists (README.md, CONTRIBUTING.md, docs/*.md)."""

from __future__ import annotations

from .markdown import _tracked_files, citations, doc_files, resolve


def test_every_cited_path_exists() -> None:
    files = _tracked_files()
    missing = [f"{c.where}: `{c.path}` does not exist" for doc in doc_files() for c in citations(doc)
               if not resolve(c.path, files)]
    assert not missing, "docs cite paths that are not in the repo (fix the doc or the path):\n" + "\n".join(missing)


def test_the_checker_sees_the_citations_it_must_see() -> None:
    # The rule itself: module paths relative to the package, root paths, globs, and what is not ours.
    from .markdown import _cited_path

    assert _cited_path("agent/kube.py") == "agent/kube.py"
    assert _cited_path("runtime/zipapp.py") == "runtime/zipapp.py"
    assert _cited_path("tests/core/test_topology.py::test_x") == "tests/core/test_topology.py"
    assert _cited_path("catalog/") == "catalog/"
    assert _cited_path("cmd/gpu-kubelet-plugin/deviceinfo.go") is None
    assert _cited_path("resource.kubernetes.io/pcieRoot") is None
    assert _cited_path("../shared/reviews/x.py") is None
    assert resolve("agent/kube.py") and resolve("backends/nvml.py") is resolve("agent/backends/nvml.py")
    assert not resolve("runtime/zipapp.py")
    assert resolve("tests/sanitizer_runtime/standin/*.c")


def test_every_cited_module_and_name_imports() -> None:
    from .markdown import dotted_names, importable

    missing = [f"{c.where}: `{c.path}` does not import" for doc in doc_files() for c in dotted_names(doc)
               if not importable(c.path)]
    assert not missing, "docs cite names that do not exist (fix the doc or the name):\n" + "\n".join(missing)
    assert not importable("dra_constructs.runtime.zipapp") and importable("dra_constructs.agent.zipapp.build_zipapp")
