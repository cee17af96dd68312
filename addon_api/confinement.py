"""Pod confinement: what a tenant's model pods may not ask of a cluster.

A tenant's InferenceService and ServingRuntime become pods on the managed clusters, so their
templates decide what those pods may do there. A tenant may not ask for what Pod Security's
``baseline`` level forbids (host namespaces, ``hostPath`` volumes, privileged containers,
capabilities beyond baseline's list, host ports, unconfined seccomp or AppArmor, unsafe
sysctls, another ``procMount``, SELinux types or users of its own, Windows host processes),
nor pin its pods to a node (``nodeName``), nor run them as a ServiceAccount other than its
namespace's ``default`` or one the platform admin allows, nor with a priority class the admin
does not allow.

Pure and shared: the manager judges every tenant work it renders (after every override is
merged, so no spelling or patch escapes it) and the agent may judge the same objects again on
the spoke. Each refusal names the field, as a path below the path it is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

BASELINE_CAPABILITIES = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
})
"""The capabilities Pod Security ``baseline`` lets a container add (with or without ``CAP_``)."""
SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
})
"""The sysctls Pod Security ``baseline`` allows a pod to set."""
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t",
                           "container_engine_t"})
"""The SELinux types Pod Security ``baseline`` allows."""
DEFAULT_SERVICE_ACCOUNT = "default"
"""The ServiceAccount a tenant's pods may always run as (its namespace's own)."""
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
"""Pod fields that share a host namespace with the pod."""
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
"""Pod fields holding containers."""
PREDICTOR_CONTAINERS = ("model", "sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx",
                        "huggingface", "pmml", "lightgbm", "paddle")
"""InferenceService predictor fields that are containers (KServe's model and frameworks)."""
COMPONENTS = ("predictor", "transformer", "explainer")
"""InferenceService components: each is a pod template of its own."""
COMPONENT_CONTAINERS = ("alibi", "art")
"""Explainer fields that are containers (older KServe releases)."""
APPARMOR_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
"""Annotation key prefix of a container's AppArmor profile (before the securityContext field)."""


@dataclass(frozen=True)
class PodRules:
    """What the platform admin allows tenants' pods beyond the built-in rules."""

    service_accounts: frozenset[str] = frozenset()
    """ServiceAccounts (names in the pod's namespace) allowed besides ``default``."""
    priority_classes: frozenset[str] = frozenset()
    """Priority classes a tenant's pods may name (none by default)."""


def _truthy(value: Any) -> bool:
    return value is True


def _security_context(obj: Mapping[str, Any], path: str) -> list[str]:
    """The checks common to a pod's and a container's ``securityContext``."""
    ctx = obj.get("securityContext")
    if not isinstance(ctx, Mapping):
        return []
    at = f"{path}.securityContext"
    out = []
    seccomp = ctx.get("seccompProfile")
    if isinstance(seccomp, Mapping) and seccomp.get("type") == "Unconfined":
        out.append(f"{at}.seccompProfile.type: Unconfined is not allowed")
    apparmor = ctx.get("appArmorProfile")
    if isinstance(apparmor, Mapping) and apparmor.get("type") == "Unconfined":
        out.append(f"{at}.appArmorProfile.type: Unconfined is not allowed")
    windows = ctx.get("windowsOptions")
    if isinstance(windows, Mapping) and _truthy(windows.get("hostProcess")):
        out.append(f"{at}.windowsOptions.hostProcess: host processes are not allowed")
    selinux = ctx.get("seLinuxOptions")
    if isinstance(selinux, Mapping):
        if str(selinux.get("type") or "") not in SELINUX_TYPES:
            out.append(f"{at}.seLinuxOptions.type: {selinux.get('type')!r} is not allowed")
        out.extend(f"{at}.seLinuxOptions.{key}: a tenant may not set it"
                   for key in ("user", "role") if selinux.get(key))
    return out


def container_refusals(container: Any, path: str) -> list[str]:
    """Why a container (at ``path``) is not allowed; empty when it is."""
    if not isinstance(container, Mapping):
        return []
    out = _security_context(container, path)
    ctx = container.get("securityContext")
    if isinstance(ctx, Mapping):
        at = f"{path}.securityContext"
        if _truthy(ctx.get("privileged")):
            out.append(f"{at}.privileged: privileged containers are not allowed")
        caps = ctx.get("capabilities")
        added = caps.get("add") if isinstance(caps, Mapping) else None
        for i, cap in enumerate(added if isinstance(added, list) else []):
            if str(cap).upper().removeprefix("CAP_") not in BASELINE_CAPABILITIES:
                out.append(f"{at}.capabilities.add[{i}]: capability {cap!r} is not allowed "
                           "(only what Pod Security baseline allows)")
        if ctx.get("procMount") not in (None, "Default"):
            out.append(f"{at}.procMount: {ctx.get('procMount')!r} is not allowed")
    ports = container.get("ports")
    for i, port in enumerate(ports if isinstance(ports, list) else []):
        if isinstance(port, Mapping) and port.get("hostPort") not in (None, 0):
            out.append(f"{path}.ports[{i}].hostPort: host ports are not allowed")
    return out


def _containers(pod: Mapping[str, Any], path: str) -> Iterable[tuple[str, Any]]:
    for field in CONTAINER_LISTS:
        items = pod.get(field)
        for i, item in enumerate(items if isinstance(items, list) else []):
            yield f"{path}.{field}[{i}]", item


def pod_refusals(pod: Any, path: str, rules: PodRules) -> list[str]:
    """Why a pod template (at ``path``) is not allowed; empty when it is.

    A pod spec, or a KServe component embedding one; its containers are judged too.
    """
    if not isinstance(pod, Mapping):
        return []
    out = [f"{path}.{field}: host namespaces are not allowed"
           for field in HOST_NAMESPACES if _truthy(pod.get(field))]
    volumes = pod.get("volumes")
    for i, volume in enumerate(volumes if isinstance(volumes, list) else []):
        if isinstance(volume, Mapping) and volume.get("hostPath") is not None:
            out.append(f"{path}.volumes[{i}].hostPath: hostPath volumes are not allowed")
    if pod.get("nodeName"):
        out.append(f"{path}.nodeName: a tenant may not pin its pods to a node "
                   "(use nodeSelector or affinity)")
    allowed_sa = {DEFAULT_SERVICE_ACCOUNT, *rules.service_accounts}
    for field in ("serviceAccountName", "serviceAccount"):
        name = pod.get(field)
        if name and name not in allowed_sa:
            out.append(f"{path}.{field}: ServiceAccount {name!r} is not allowed (only "
                       f"{', '.join(sorted(allowed_sa))}: the add-on's "
                       "manager.policy.podServiceAccounts)")
    priority = pod.get("priorityClassName")
    if priority and priority not in rules.priority_classes:
        out.append(f"{path}.priorityClassName: priority class {priority!r} is not allowed "
                   f"(allowed: {', '.join(sorted(rules.priority_classes)) or 'none'}: the "
                   "add-on's manager.policy.priorityClasses)")
    out.extend(_security_context(pod, path))
    ctx = pod.get("securityContext")
    sysctls = ctx.get("sysctls") if isinstance(ctx, Mapping) else None
    for i, sysctl in enumerate(sysctls if isinstance(sysctls, list) else []):
        name = sysctl.get("name") if isinstance(sysctl, Mapping) else sysctl
        if name not in SAFE_SYSCTLS:
            out.append(f"{path}.securityContext.sysctls[{i}]: sysctl {name!r} is not allowed")
    annotations = pod.get("annotations")
    for key, value in (annotations.items() if isinstance(annotations, Mapping) else ()):
        if str(key).startswith(APPARMOR_PREFIX) and value == "unconfined":
            out.append(f"{path}.annotations[{key}]: unconfined AppArmor is not allowed")
    for at, container in _containers(pod, path):
        out.extend(container_refusals(container, at))
    return out


def inference_service_refusals(spec: Any, path: str, rules: PodRules) -> list[str]:
    """Why an InferenceService spec (at ``path``) is not allowed; empty when it is.

    Each component (predictor, transformer, explainer) embeds a pod spec; a predictor's model
    and framework fields are containers, and its ``workerSpec`` (multi-node) a pod of its own.
    """
    if not isinstance(spec, Mapping):
        return []
    out = []
    for name in COMPONENTS:
        component = spec.get(name)
        if not isinstance(component, Mapping):
            continue
        at = f"{path}.{name}"
        out.extend(pod_refusals(component, at, rules))
        for field in (*PREDICTOR_CONTAINERS, *COMPONENT_CONTAINERS):
            out.extend(container_refusals(component.get(field), f"{at}.{field}"))
        out.extend(pod_refusals(component.get("workerSpec"), f"{at}.workerSpec", rules))
    return out


def serving_runtime_refusals(spec: Any, path: str, rules: PodRules) -> list[str]:
    """Why a ServingRuntime spec (at ``path``) is not allowed; empty when it is.

    The spec is a pod template (containers, volumes, host fields) and so is its
    ``workerSpec`` (multi-node runtimes).
    """
    if not isinstance(spec, Mapping):
        return []
    return [*pod_refusals(spec, path, rules),
            *pod_refusals(spec.get("workerSpec"), f"{path}.workerSpec", rules)]
