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


RUNTIME_USERS: Final[dict[str, int | None]] = {
    "mlserver-1.x": None,
    "ovms-1.x": 5000,
    "torchserve-0.x": 1000,
    "triton-2.x": 1000,
    "kserve-huggingfaceserver-multinode": None,
    "kserve-vllmserver": 1000,
}
"""The shipped runtimes that leave ``runAsNonRoot`` unset, by name, and the user their image
must be given to run as non-root (None: the image's own user is numeric and non-root).

Facts about the images: MLServer's and KServe's Hugging Face images end with ``USER 1000``;
OpenVINO Model Server's names its user ``ovms`` (uid 5000), TorchServe's ``model-server``
(uid 1000), and Triton's runs as root but has a user 1000; KServe's own runtimes for those
servers (``kserve-openvino``, ``kserve-torchserve``, ``kserve-tritonserver``) set the same
``runAsUser``. vLLM's image runs as root and has no other user: it gets 1000, with no home
(KServe's runtime points its caches at ``/tmp`` for that, as OpenShift runs it under an
arbitrary uid). A named user must be given by number, or the kubelet cannot check it is not
root and refuses to start the container."""


def runtime_containers(runtime: Obj) -> list[Obj]:
    """Every container a serving runtime declares: its own and its multi-node workers'."""
    spec = runtime.get("spec") or {}
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or []),
            *((spec.get("workerSpec") or {}).get("containers") or [])]


def harden_runtime(runtime: Obj, assigns_users: bool = False) -> Obj:
    """A serving runtime's containers made ``restricted``, in place.

    KServe builds model pods from them, with no pod-level security context of the runtime's:
    each container gets ``seccompProfile: RuntimeDefault`` (unless already Localhost or
    RuntimeDefault), no privilege escalation and every capability dropped. ``runAsNonRoot``
    is set where the runtime leaves it unset and :data:`RUNTIME_USERS` knows its image's
    non-root user (with that ``runAsUser`` where the image names its user or runs as root);
    an explicit ``runAsNonRoot: false`` stays. Where the cluster assigns users
    (``assigns_users``: OpenShift, whose ``restricted-v2`` gives each pod a uid from its
    namespace's range and refuses any other), no container keeps a ``runAsUser``. KServe adds
    its own init and sidecar containers to model pods; OpenShift's restricted-v2 fills in
    theirs.
    """
    containers = runtime_containers(runtime)
    name = (runtime.get("metadata") or {}).get("name", "")
    flagged = [(c.get("securityContext") or {}).get("runAsNonRoot") for c in containers]
    restrict({"containers": containers})
    for container, was in zip(containers, flagged, strict=True):
        sc = container["securityContext"]
        if was is None and name in RUNTIME_USERS:
            sc["runAsNonRoot"] = True
            if (user := RUNTIME_USERS[name]) is not None:
                sc.setdefault("runAsUser", user)
        elif was is False:
            sc["runAsNonRoot"] = False  # as the runtime said
        if assigns_users:
            sc.pop("runAsUser", None)
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
