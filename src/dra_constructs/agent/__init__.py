"""The node agent (a separate program): the preemption barrier of the sanitizer DaemonSet.

Pure Python (no cdk8s, constructs or jsii): it runs on GPU nodes, also as a zipapp
(:func:`~.zipapp.build_zipapp`). Entry point: ``dra-sanitizer`` (:mod:`.cli`). The GPU
libraries and the Kubernetes client are imported lazily, where they are used.
"""

from dra_constructs.agent.config import (
    DEFAULT_TAINT_KEY,
    AgentConfig,
    KubeSettings,
    QuarantinePolicy,
    SimulatedBackendSettings,
    load_config,
)

__all__ = [
    "DEFAULT_TAINT_KEY",
    "AgentConfig",
    "KubeSettings",
    "QuarantinePolicy",
    "SimulatedBackendSettings",
    "load_config",
]
