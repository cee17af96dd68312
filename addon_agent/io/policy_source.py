"""The namespace policy the agent judges by, read from its namespace (I/O).

The hub's manager writes ConfigMap ``model-serving-namespace-policy`` into the agent's
namespace (:mod:`addon_manager.kinds.namespace_policy`); ``--target-namespaces`` is used only
while there is none (an agent run without the manager). Read again at each judgement, so a
changed policy counts at once.
"""

from __future__ import annotations

from addon_agent.io.kube import Kube
from addon_agent.pure.tenancy import PolicyRead
from addon_api import constants as c
from addon_api import tenancy


def read(kube: Kube, namespace: str, fallback: tenancy.NamespacePolicy | None) -> PolicyRead:
    """The policy in ``namespace``'s ConfigMap, else ``fallback``, else none and why."""
    where = f"ConfigMap {namespace}/{c.NAMESPACE_POLICY_CONFIGMAP}"
    found = kube.get("v1", "ConfigMap", c.NAMESPACE_POLICY_CONFIGMAP, namespace)
    if found is None:
        if fallback is not None:
            return PolicyRead(fallback)
        return PolicyRead(None, (
            f"waiting for the namespace policy: {where} is not there yet (the hub's manager "
            "writes it with the first ModelServing or StorageConnection that selects this "
            "cluster)"))
    try:
        return PolicyRead(tenancy.from_configmap(found.get("data")))
    except ValueError as err:
        return PolicyRead(None, f"{where}: {err}", invalid=True)
