"""The runtime as a zipapp, for the DaemonSet's ConfigMap: ``python agent.pyz run --config ...``.

It carries exactly the modules the agent imports (this ``runtime`` package, ``errors``, ``_io``
and ``_safe_load`` (hardened config reading), ``target``, ``catalog``) and nothing of the
construct layer. Its ``dra_constructs/__init__.py`` is written here, not copied: the real one is
the library's public (cdk8s) API and must not run inside the agent. Third-party packages
(pydantic, PyYAML, kubernetes, prometheus-client, nvidia-ml-py, cuda-bindings) come from the
image. The archive is deterministic: sorted entries, fixed timestamps and modes, fixed
compression level, so the same source gives the same bytes (and the same hash in the
pod-template annotation).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

__all__ = ["ZIPAPP_MODULES", "build_zipapp", "zipapp_members"]

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # .../dra_constructs
#: Package-relative files and folders the agent needs (folders: every ``.py`` under them).
ZIPAPP_MODULES: tuple[str, ...] = (
    "errors.py", "_cli_runner.py", "_io.py", "_safe_load.py", "target.py", "target_gates.py", "isolation.py",
    "catalog",
    "agent",
)

_EPOCH = (1980, 1, 1, 0, 0, 0)

_INIT = '''"""dra-constructs, as carried by the sanitizer agent's zipapp (runtime modules only)."""

__version__ = {version!r}
'''

_MAIN = '''"""Entry point of the sanitizer agent zipapp: ``python agent.pyz COMMAND ...``."""

import sys

from dra_constructs.agent.cli import main

sys.exit(main())
'''


def zipapp_members() -> dict[str, bytes]:
    """Archive name -> content, for every member of the zipapp."""
    from dra_constructs import __version__

    members: dict[str, bytes] = {
        "__main__.py": _MAIN.encode(),
        "dra_constructs/__init__.py": _INIT.format(version=__version__).encode(),
    }
    for entry in ZIPAPP_MODULES:
        path = _PACKAGE_ROOT / entry
        files = [path] if path.is_file() else sorted(path.rglob("*.py"))
        for file in files:
            members["dra_constructs/" + file.relative_to(_PACKAGE_ROOT).as_posix()] = file.read_bytes()
    return members


def build_zipapp() -> bytes:
    """The zipapp's bytes; identical for identical sources."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in sorted(zipapp_members().items()):
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3  # Unix, whatever we build on
            archive.writestr(info, data, compresslevel=9)
    return buffer.getvalue()
