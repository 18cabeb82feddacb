"""The audit path is pure Python: it never imports cdk8s, constructs or jsii (no Node.js needed)."""

from __future__ import annotations

import subprocess
import sys

from .helpers import FIXTURES


def test_audit_never_imports_the_construct_layer() -> None:
    code = (
        "import sys\n"
        "from dra_constructs.cli import main\n"
        f"rc = main(['audit', '--format', 'sarif', '-o', '/dev/null', {str(FIXTURES)!r}])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('cdk8s', 'constructs', 'jsii', 'cdk8s_plus_28'))\n"
        "assert rc == 1 and not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
