"""The add-on's image run by podman as a testbed process, the way its Deployment runs it.

:func:`pod_container` turns a Deployment that the chart (hub) or OCM's add-on manager (spoke)
created into the arguments, environment and podman flags of one container: the pod's args and
env, its non-root user, its read-only root with an ``emptyDir`` on ``/tmp``, no capabilities,
no privilege escalation. What a kubelet would add that podman cannot (the in-cluster
ServiceAccount token, a pod network) is replaced by a mounted token kubeconfig and the host
network, so the container reaches the testbed's API servers on 127.0.0.1.

Environment (the Makefile's variables of the same names):
  IMAGE         image to run (default ``localhost/model-serving-addon:dev``, what ``make image``
                builds); never pulled
  PODMAN        podman executable (default ``podman``)
  PODMAN_FLAGS  extra flags for ``podman run``, split like a shell would; for a sandbox with
                cgroups v1 and capped rlimits, for example
                ``--runtime runc --ulimit nofile=1024:1024 --ulimit nproc=1024:1024``
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.processes import Process

IMAGE = os.environ.get("IMAGE", "localhost/model-serving-addon:dev")
PODMAN = os.environ.get("PODMAN", "podman")


def podman_flags() -> list[str]:
    """``PODMAN_FLAGS``, split as a shell would."""
    return shlex.split(os.environ.get("PODMAN_FLAGS", ""))


def podman(
    *args: str, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run podman; raise with its stderr when ``check`` and it fails."""
    proc = subprocess.run(
        [PODMAN, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{PODMAN} {shlex.join(args)} failed with code {proc.returncode}:\n{proc.stderr}"
        )
    return proc


@dataclass(frozen=True)
class Image:
    """The local image and the user it runs as."""

    ref: str
    id: str
    uid: int


def local_image(ref: str = IMAGE) -> Image:
    """The image ``ref`` from podman's storage (raises, naming ``make image``, if missing)."""
    if podman("image", "exists", ref, check=False).returncode != 0:
        raise AssertionError(f"image {ref} is not in podman's storage; build it with `make image`")
    info = json.loads(podman("image", "inspect", ref).stdout)[0]
    user = str(info.get("Config", {}).get("User") or "0").split(":")[0]
    if not user.isdigit():
        raise AssertionError(f"image {ref} runs as {user!r}; runAsNonRoot needs a numeric user")
    return Image(ref=ref, id=str(info["Id"]), uid=int(user))


SOURCE_DIGEST = """
import hashlib, importlib, json, pathlib
out = {}
for name in ("model_serving_addon", "addon_api", "addon_manager", "addon_agent", "addon_cli"):
    root = pathlib.Path(importlib.import_module(name).__file__).parent
    for path in sorted(root.rglob("*.py")):
        out[f"{name}/{path.relative_to(root)}"] = hashlib.sha256(path.read_bytes()).hexdigest()
print(json.dumps(out))
"""
"""Prints the SHA-256 of every module of the product packages that Python imports."""


def stale_modules(image: Image) -> list[str]:
    """Modules whose code in the image differs from this source tree (missing ones included).

    Hashes what each interpreter actually imports: the image's installed wheel, and here the
    editable install of this tree.
    """
    here: dict[str, str] = json.loads(
        subprocess.run(
            [sys.executable, "-c", SOURCE_DIGEST], capture_output=True, text=True, check=True
        ).stdout
    )
    there: dict[str, str] = json.loads(
        podman(
            "run", "--rm", "--pull=never", *podman_flags(), "--entrypoint", "python3",
            image.ref, "-c", SOURCE_DIGEST,
        ).stdout
    )
    return sorted(k for k in here.keys() | there.keys() if here.get(k) != there.get(k))


@dataclass(frozen=True)
class PodContainer:
    """One container of a Deployment, as podman runs it."""

    service_account: str
    args: list[str]
    env: dict[str, str]
    flags: list[str]
    """podman run flags for the pod's and container's security settings and volumes."""


# Container fields with no podman meaning here: the image is given explicitly, the host
# network needs no port mapping, the test probes /metrics itself, and resource limits need
# cgroup delegation this machine may not have.
_IGNORED_CONTAINER = {
    "name", "image", "imagePullPolicy", "ports", "livenessProbe", "readinessProbe",
    "resources", "terminationMessagePath", "terminationMessagePolicy",
}
# Pod fields that only concern scheduling, or defaults the API server fills in.
_IGNORED_POD = {
    "containers", "volumes", "securityContext", "serviceAccountName", "serviceAccount",
    "nodeSelector", "tolerations", "affinity", "restartPolicy", "dnsPolicy", "schedulerName",
    "terminationGracePeriodSeconds", "enableServiceLinks",
}


def pod_container(deployment: dict[str, Any], container: str, pod_name: str) -> PodContainer:
    """What podman needs to run ``container`` of ``deployment`` as its pod ``pod_name`` would.

    Raises on any field it does not know how to reproduce, so that a chart change the test
    would silently drop (a new volume, a command, another env source) fails it instead.
    """
    pod = deployment["spec"]["template"]["spec"]
    unknown = set(pod) - _IGNORED_POD
    if unknown:
        raise AssertionError(f"pod fields not reproduced under podman: {sorted(unknown)}")
    spec = next(c for c in pod["containers"] if c["name"] == container)
    unknown = set(spec) - _IGNORED_CONTAINER - {"args", "env", "securityContext", "volumeMounts"}
    if unknown:
        raise AssertionError(f"{container}: fields not reproduced under podman: {sorted(unknown)}")

    flags: list[str] = []
    security = {**(pod.get("securityContext") or {}), **(spec.get("securityContext") or {})}
    for key, value in security.items():
        if key == "runAsNonRoot" and value:
            pass  # checked against the image's user by the caller
        elif key == "seccompProfile" and value == {"type": "RuntimeDefault"}:
            pass  # podman's default profile
        elif key == "readOnlyRootFilesystem" and value:
            # Only the pod's volumes are writable, as under a kubelet.
            flags += ["--read-only", "--read-only-tmpfs=false"]
        elif key == "allowPrivilegeEscalation" and value is False:
            flags.append("--security-opt=no-new-privileges")
        elif key == "capabilities":
            flags += [f"--cap-drop={cap}" for cap in value.get("drop") or []]
            flags += [f"--cap-add={cap}" for cap in value.get("add") or []]
        elif key == "runAsUser":
            flags.append(f"--user={value}")
        else:
            raise AssertionError(f"{container}: securityContext {key}={value!r} not reproduced")

    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    for mount in spec.get("volumeMounts") or []:
        volume = volumes[mount["name"]]
        if set(volume) != {"name", "emptyDir"}:
            raise AssertionError(f"{container}: volume {volume} not reproduced under podman")
        # An emptyDir: writable by any user, gone with the pod.
        flags.append(f"--tmpfs={mount['mountPath']}:rw,mode=1777")

    namespace = deployment["metadata"]["namespace"]
    fields = {"metadata.name": pod_name, "metadata.namespace": namespace}
    env: dict[str, str] = {}
    for var in spec.get("env") or []:
        if "value" in var:
            env[var["name"]] = str(var["value"])
        elif set(var.get("valueFrom") or {}) == {"fieldRef"}:
            env[var["name"]] = fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            raise AssertionError(f"{container}: env {var} not reproduced under podman")
    return PodContainer(
        service_account=pod.get("serviceAccountName") or "default",
        args=list(spec.get("args") or []),
        env=env,
        flags=flags,
    )


def replace_flag(args: Sequence[str], flag: str, value: str) -> list[str]:
    """``args`` with every ``flag=...`` (or ``flag ...``) dropped and ``flag=value`` appended."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == flag:
            skip = True
        elif not arg.startswith(f"{flag}="):
            out.append(arg)
    return [*out, f"{flag}={value}"]


def container_name(role: str) -> str:
    """Name of the container of ``role`` (unique per test process; the pod name it stands for)."""
    return f"msa-image-test-{role}-{os.getpid()}"


class Container(Process):
    """``podman run`` of the image in the foreground, its output in the testbed's log.

    The process is the podman client; :meth:`stop` stops and removes the container by its
    name too, since a killed client leaves the container running.
    """

    def __init__(
        self,
        name: str,
        image: Image,
        args: Sequence[str],
        log_dir: Path,
        *,
        env: dict[str, str],
        flags: Sequence[str],
        files: Sequence[Path],
    ) -> None:
        self.container = container_name(name)
        argv = [
            PODMAN, "run", "--rm", "--pull=never", f"--name={self.container}",
            "--network=host", *podman_flags(), *flags,
            # Read-only at the same path: a kubeconfig names its CA file by path.
            *(f"--volume={f}:{f}:ro" for f in dict.fromkeys(files)),
            *(f"--env={k}={v}" for k, v in env.items()),
            image.ref, *args,
        ]
        super().__init__(name, argv, log_dir)

    def inspect(self) -> dict[str, Any]:
        """``podman container inspect`` of the running container."""
        info: dict[str, Any] = json.loads(podman("container", "inspect", self.container).stdout)[0]
        return info

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the container (SIGTERM, SIGKILL after 5 s), then the client; remove it."""
        podman("stop", "--ignore", "--time=5", self.container, check=False, timeout=60)
        super().stop(timeout)
        podman("rm", "--force", "--ignore", self.container, check=False, timeout=60)
