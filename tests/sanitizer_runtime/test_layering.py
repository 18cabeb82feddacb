"""The agent's import graph never reaches cdk8s, constructs or jsii (nor the GPU libraries eagerly)."""

from __future__ import annotations

import json
import subprocess
import sys

MODULES = [
    "dra_constructs.agent",
    "dra_constructs.agent.cli",
    "dra_constructs.agent.agent",
    "dra_constructs.agent.runtime",
    "dra_constructs.agent.simulate",
    "dra_constructs.agent.lifecycle",
    "dra_constructs.agent.evidence_read",
    "dra_constructs.agent.evidence_table",
    "dra_constructs.agent.evidence_html",
    "dra_constructs.agent.zipapp",
    "dra_constructs.agent.backends.nvml",
    "dra_constructs.agent.backends.cuda",
]

PROBE = """
import importlib, json, sys
for name in {modules!r}:
    importlib.import_module(name)
from dra_constructs.agent.cli import main
rc = main(["simulate", "--devices", "2", "--cycles", "1", "--seed", "1"])
print(json.dumps({{"rc": rc, "modules": sorted(sys.modules)}}))
"""


def test_runtime_never_imports_cdk8s_constructs_or_jsii() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE.format(modules=MODULES)], capture_output=True, text=True,
                         check=True, timeout=120)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    loaded = set(result["modules"])
    assert result["rc"] == 0
    forbidden = {m for m in loaded if m.split(".")[0] in ("cdk8s", "constructs", "jsii", "cdk8s_plus_28")}
    assert forbidden == set()
    assert "dra_constructs.constructs.sanitizer.construct" not in loaded
    # GPU libraries are imported lazily, inside the backends, never at import time. (The bare
    # ``cuda`` namespace is imported by cuda-bindings' own .pth file in every interpreter.)
    assert "pynvml" not in loaded and not any(m.startswith("cuda.bindings") for m in loaded)
