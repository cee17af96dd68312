"""Pod Security ``restricted`` for the stacks' pods (what OpenShift's ``restricted-v2`` asks).

The agent makes every pod template it installs meet the Kubernetes Pod Security Standard
``restricted`` (:func:`restrict`: only missing or unsafe settings are changed, never the
image's user or anything stricter) and labels the namespaces it creates for the stacks so the
API server enforces it (:data:`NAMESPACE_LABELS`). :func:`violations` lists what a pod spec
breaks, as the PodSecurity admission would; the tests run it over every plan.
"""

from __future__ import annotations

from typing import Any, Final

Obj = dict[str, Any]

NAMESPACE_LABELS: Final = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
}
"""On the namespaces the agent creates for a stack: the API server refuses a pod that is not
``restricted``."""

ALLOWED_VOLUMES: Final = frozenset({
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
})
"""Volume sources the ``restricted`` profile allows."""
ALLOWED_SECCOMP: Final = frozenset({"RuntimeDefault", "Localhost"})
ALLOWED_ADDED_CAPABILITIES: Final = frozenset({"NET_BIND_SERVICE"})


def _containers(pod: Obj) -> list[Obj]:
    return [*(pod.get("initContainers") or []), *(pod.get("containers") or []),
            *(pod.get("ephemeralContainers") or [])]


def restrict(pod: Obj) -> Obj:
    """Make a pod spec ``restricted`` in place and return it.

    Non-root, seccomp RuntimeDefault, no privilege escalation, every capability dropped
    (NET_BIND_SERVICE may stay added). Settings already as strict are left as they are; a
    privileged container or one allowed to escalate is turned down.
    """
    ctx = pod.setdefault("securityContext", {})
    if ctx.get("runAsNonRoot") is not True:
        ctx["runAsNonRoot"] = True
    if (ctx.get("seccompProfile") or {}).get("type") not in ALLOWED_SECCOMP:
        ctx["seccompProfile"] = {"type": "RuntimeDefault"}
    for container in _containers(pod):
        sc = container.setdefault("securityContext", {})
        sc["allowPrivilegeEscalation"] = False
        if sc.get("privileged"):
            sc["privileged"] = False
        if sc.get("runAsNonRoot") is False:
            sc["runAsNonRoot"] = True
        caps = sc.setdefault("capabilities", {})
        if "ALL" not in (caps.get("drop") or []):
            caps["drop"] = [*(caps.get("drop") or []), "ALL"]
        added = [c for c in caps.get("add") or [] if c in ALLOWED_ADDED_CAPABILITIES]
        if caps.get("add") is not None:
            caps["add"] = added
        seccomp = (sc.get("seccompProfile") or {}).get("type")
        if seccomp is not None and seccomp not in ALLOWED_SECCOMP:
            sc["seccompProfile"] = {"type": "RuntimeDefault"}
    return pod


def harden_runtime(runtime: Obj) -> Obj:
    """A serving runtime's containers made as ``restricted`` as a runtime can say, in place.

    KServe builds model pods from them, with no pod-level security context of the runtime's:
    each container gets ``seccompProfile: RuntimeDefault`` (unless already Localhost or
    RuntimeDefault), no privilege escalation and every capability dropped. ``runAsNonRoot``
    is left as the runtime has it (KServe's own runtimes set it; an image that runs as root
    would stop starting where nothing assigns a user). KServe adds its own init and sidecar
    containers to model pods; OpenShift's restricted-v2 fills in theirs.
    """
    containers = (runtime.get("spec") or {}).get("containers") or []
    flagged = [bool((c.get("securityContext") or {}).get("runAsNonRoot") is False)
               for c in containers]
    restrict({"containers": containers})
    for container, was_root in zip(containers, flagged, strict=True):
        sc = container["securityContext"]
        if was_root:
            sc["runAsNonRoot"] = False  # as the runtime said
        if (sc.get("seccompProfile") or {}).get("type") not in ALLOWED_SECCOMP:
            sc["seccompProfile"] = {"type": "RuntimeDefault"}
    return runtime


def violations(pod: Obj) -> list[str]:
    """What of the ``restricted`` profile a pod spec breaks (empty: it passes)."""
    out: list[str] = []
    ctx = pod.get("securityContext") or {}
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(host):
            out.append(f"{host}=true")
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if kinds - ALLOWED_VOLUMES:
            out.append(f"volume {volume.get('name')} of type {', '.join(sorted(kinds))}")
    pod_non_root = ctx.get("runAsNonRoot") is True
    pod_seccomp = (ctx.get("seccompProfile") or {}).get("type") in ALLOWED_SECCOMP
    if ctx.get("runAsUser") == 0:
        out.append("pod runAsUser=0")
    for container in _containers(pod):
        name = container.get("name")
        sc = container.get("securityContext") or {}
        if sc.get("privileged"):
            out.append(f"container {name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"container {name}: allowPrivilegeEscalation != false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"container {name}: capabilities not dropping ALL")
        extra = set(caps.get("add") or []) - ALLOWED_ADDED_CAPABILITIES
        if extra:
            out.append(f"container {name}: capabilities added {sorted(extra)}")
        if not (sc.get("runAsNonRoot") is True or (pod_non_root
                                                   and sc.get("runAsNonRoot") is not False)):
            out.append(f"container {name}: runAsNonRoot != true")
        if sc.get("runAsUser") == 0:
            out.append(f"container {name}: runAsUser=0")
        seccomp = (sc.get("seccompProfile") or {}).get("type")
        if not (seccomp in ALLOWED_SECCOMP or (seccomp is None and pod_seccomp)):
            out.append(f"container {name}: seccompProfile not RuntimeDefault or Localhost")
        if any(p.get("hostPort") for p in container.get("ports") or []):
            out.append(f"container {name}: hostPort")
    return out
