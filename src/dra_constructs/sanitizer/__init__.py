"""The sanitizer: a node agent that puts a preemption barrier between GPU tenants.

``runtime`` is the agent itself (pure Python, no cdk8s: it runs on the node); the DaemonSet
construct that deploys it lives in ``construct.py`` and is never imported from here, so that
importing ``dra_constructs.sanitizer.runtime`` never pulls in cdk8s, constructs or jsii.
"""
