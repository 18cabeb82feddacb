"""The constructs that deploy the sanitizer node agent (:mod:`dra_constructs.agent`).

``SanitizerDaemonSet`` (``construct.py``) carries the agent as a zipapp in a ConfigMap;
``PreemptionPolicyDeviceClass`` (``policy_class.py``) is the DeviceClass-level preemption policy.
"""
