"""The construct layer: code that runs at synth and needs cdk8s (and so Node.js).

Claim templates, workloads, the cdk8s-plus claim attachment, the App-wide guardrails, the
admission-policy, tenant and sanitizer constructs. They build objects and call the pure core
(``dra_constructs.target``, ``catalog``, ``cel``, ``fit``, ``guardrails``, ``tenants``), which never
imports this package. The node agent lives in :mod:`dra_constructs.agent`.
"""

from dra_constructs.constructs._excepthook import install as _install_excepthook

_install_excepthook()
