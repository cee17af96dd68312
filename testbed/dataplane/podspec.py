"""A predictor Pod's spec translated into local processes (pure: no I/O, no API calls).

What a kubelet does before it starts containers, done here for a process on the testbed
machine:

- the image picks a *runner*: a local program that does what the image's entrypoint does
  (:data:`RUNNERS`). A pod with any container whose image has none is refused
  (:class:`Refused`): it stays on kwok's simulated readiness and is labelled simulated, never
  claimed served;
- every volume becomes a directory under the pod's root (``<root>/volumes/<volume>``), filled
  with the keys of a Secret or ConfigMap volume; a container's paths (``--model_dir=/mnt/models``,
  an env value ``/mnt/models``) are rewritten to the directory of the volume mounted there;
- the environment is built as the kubelet builds it: the image's own defaults, then
  ``envFrom`` (Secrets, ConfigMaps, with prefixes), then ``env`` (values with ``$(VAR)``
  references, ``secretKeyRef``, ``configMapKeyRef``, ``fieldRef``, ``resourceFieldRef``); a
  missing Secret or key that is not optional is a :class:`ConfigError`, as the kubelet's
  ``CreateContainerConfigError``;
- each port a server listens on (the container's declared ports and the runner's own, such as
  gRPC and metrics) gets a free loopback port, and the runner's flags or variables for them
  are set to it; the pod's probes (``httpGet``, ``tcpSocket``) address the mapped ports.
  ``exec`` probes cannot run outside the image and are refused;
- a runner may stand in for one use of an image only (:attr:`Runner.args`): the add-on's own
  image runs as a process only for OCM's pre-delete hook (``agent-release``), never as the
  agent's Deployment (the harness runs agents itself); a runner that calls the API server
  (:attr:`Runner.api_access`) gets ``KUBECONFIG``, a kubeconfig with a token of the pod's
  ServiceAccount (:class:`ApiAccess`: a TokenRequest, as the kubelet projects one), unless
  the pod sets ``automountServiceAccountToken: false``.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

Obj = dict[str, Any]

SIMULATED_LABEL = "testbed.model-serving-addon/data-plane"
"""Label the testbed puts on a predictor pod it cannot run: value ``simulated`` (kwok's
readiness, no server behind it) or ``served`` (real processes)."""


class Refused(ValueError):
    """The testbed has no local runner for this pod: it stays simulated, never claimed served."""

    def __init__(self, pod: str, container: str, image: str, reason: str) -> None:
        self.pod = pod
        self.container = container
        self.image = image
        self.reason = reason
        super().__init__(
            f"pod {pod}: container {container!r} (image {image}) cannot run on the testbed: "
            f"{reason}; the pod stays on kwok's simulated readiness and is labelled "
            f"{SIMULATED_LABEL}=simulated"
        )


class ConfigError(ValueError):
    """The pod cannot start yet: a Secret, ConfigMap or key it needs is missing.

    The kubelet's ``CreateContainerConfigError``; it tries again later.
    """


class Objects(Protocol):
    """Reads the Secrets and ConfigMaps of the pod's namespace (data already decoded)."""

    def secret(self, namespace: str, name: str) -> dict[str, bytes] | None:
        """The Secret's data, or None when it does not exist."""

    def config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        """The ConfigMap's data, or None when it does not exist."""


@dataclasses.dataclass
class StaticObjects:
    """:class:`Objects` from dictionaries (tests, and objects already read)."""

    secrets: dict[tuple[str, str], dict[str, bytes]] = dataclasses.field(default_factory=dict)
    config_maps: dict[tuple[str, str], dict[str, str]] = dataclasses.field(default_factory=dict)

    def secret(self, namespace: str, name: str) -> dict[str, bytes] | None:
        """The Secret's data, or None."""
        return self.secrets.get((namespace, name))

    def config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        """The ConfigMap's data, or None."""
        return self.config_maps.get((namespace, name))

    @staticmethod
    def secret_data(secret: Obj) -> dict[str, bytes]:
        """A Secret object's ``data`` (base64) and ``stringData``, decoded."""
        data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
        data.update({k: v.encode() for k, v in (secret.get("stringData") or {}).items()})
        return data


@dataclasses.dataclass(frozen=True)
class Probe:
    """A readiness, liveness or startup probe, addressed to the process's loopback port."""

    kind: str
    """``http`` or ``tcp``."""
    port: int
    """Host (loopback) port."""
    path: str = "/"
    scheme: str = "HTTP"
    headers: tuple[tuple[str, str], ...] = ()
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3

    @property
    def url(self) -> str:
        """The URL an ``http`` probe requests."""
        return f"{self.scheme.lower()}://127.0.0.1:{self.port}{self.path}"


@dataclasses.dataclass(frozen=True)
class ContainerPlan:
    """One container as a local process."""

    name: str
    image: str
    runner: str
    """Name of the runner (:data:`RUNNERS`) that stands in for the image."""
    argv: tuple[str, ...]
    env: dict[str, str]
    """The whole environment of the process (nothing is inherited)."""
    cwd: Path
    ports: dict[int, int]
    """Container port -> loopback port it is served on."""
    readiness: Probe | None = None
    liveness: Probe | None = None
    startup: Probe | None = None
    mounts: dict[str, Path] = dataclasses.field(default_factory=dict)
    """Mount path in the container -> directory on this machine."""
    termination_message_policy: str = "File"
    """``File`` or ``FallbackToLogsOnError`` (the log's tail becomes the message)."""


@dataclasses.dataclass(frozen=True)
class VolumePlan:
    """A pod volume as a directory, with the files it starts with (Secret/ConfigMap keys)."""

    name: str
    path: Path
    files: dict[str, bytes] = dataclasses.field(default_factory=dict)
    """Relative path -> content, written before any container starts."""


@dataclasses.dataclass(frozen=True)
class PodPlan:
    """Everything needed to run one pod's containers as processes."""

    namespace: str
    name: str
    uid: str
    root: Path
    volumes: tuple[VolumePlan, ...]
    init_containers: tuple[ContainerPlan, ...]
    containers: tuple[ContainerPlan, ...]
    restart_policy: str = "Always"

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True)
class Environments:
    """Where the local runners' programs are (:mod:`testbed.dataplane.envs` in practice)."""

    kserve_python: Path
    """Python of the environment with ``kserve``, ``kserve-storage`` and scikit-learn."""
    mlserver: Path
    """The ``mlserver`` executable of MLServer's environment."""
    entrypoints: Path
    """The testbed's scripts for those Pythons (``kserve_sklearn.py``, ...)."""
    addon_cli: Path = Path(sys.executable).parent / "model-serving-addon"
    """The add-on's CLI entry point (``model-serving-addon``) of this environment."""
    addon_source: str = ""
    """``PYTHONPATH`` the add-on's processes import its code from ("" : the installed one)."""


@dataclasses.dataclass(frozen=True)
class ApiAccess:
    """How a pod's process reaches its cluster's API server, as the kubelet gives it."""

    server: str
    """URL of the API server."""
    certificate_authority: str
    """Path of the CA bundle that verifies it."""
    token: Callable[[Obj], str]
    """A token of the pod's ServiceAccount, bound to the pod (TokenRequest), given the pod."""


# --------------------------------------------------------------------------- runners
@dataclasses.dataclass(frozen=True)
class PortSetting:
    """A port a server listens on and how its container sets it: a flag or a variable."""

    default: int
    flag: str | None = None
    env: str | None = None


@dataclasses.dataclass(frozen=True)
class Runner:
    """A local program standing in for the images of one repository."""

    name: str
    repositories: tuple[str, ...]
    """Image repositories (registry and tag stripped) this runner stands in for."""
    program: Callable[[Environments], list[str]]
    """argv[:n] replacing the image's entrypoint."""
    ports: tuple[PortSetting, ...] = ()
    image_env: tuple[tuple[str, str], ...] = ()
    """The image's own ``ENV`` defaults (lowest precedence, as in the image)."""
    takes_args: bool = True
    """False when the image's command is a shell line the pod's ``args`` would replace."""
    ready_path: str | None = None
    """The server's own readiness endpoint, used when the pod has no readiness probe;
    ``{model}`` stands for the model's name (:attr:`model_name_env`)."""
    model_name_env: str | None = None
    """The variable naming the served model, for :attr:`ready_path`."""
    ready_port: int | None = None
    """Container port of ``ready_path``."""
    extra_env: tuple[tuple[str, str], ...] = ()
    """Settings the testbed adds so the server stays on loopback."""
    args_from_env: tuple[str, ...] = ()
    """Variables whose values the image's command line passes as arguments."""
    args: tuple[str, ...] | None = None
    """When set, the runner stands in only for containers with exactly these ``args`` (one
    use of the image); other containers of the image have no runner."""
    api_access: bool = False
    """The process calls the API server: it is given ``KUBECONFIG`` (:class:`ApiAccess`)."""
    program_env: Callable[[Environments], dict[str, str]] = lambda _: {}
    """Variables the local program needs (not the image's), such as ``PYTHONPATH``."""


RUNNERS: tuple[Runner, ...] = (
    Runner(
        "kserve-sklearnserver",
        ("kserve/sklearnserver",),
        # The image runs `python -m sklearnserver` (KServe's model server with its scikit-learn
        # model class); the testbed's script does the same with the kserve package.
        lambda e: [str(e.kserve_python), str(e.entrypoints / "kserve_sklearn.py")],
        ports=(PortSetting(8080, flag="--http_port"), PortSetting(8081, flag="--grpc_port")),
        ready_path="/v2/health/ready",
        ready_port=8080,
    ),
    Runner(
        "kserve-mlserver",
        ("seldonio/mlserver",),
        # The image's command is `mlserver start $MLSERVER_MODELS_DIR` (after activating an
        # optional environment tarball), a shell line.
        lambda e: [str(e.mlserver), "start"],
        ports=(
            PortSetting(8080, env="MLSERVER_HTTP_PORT"),
            PortSetting(8081, env="MLSERVER_GRPC_PORT"),
            PortSetting(8082, env="MLSERVER_METRICS_PORT"),
        ),
        image_env=(("MLSERVER_MODELS_DIR", "/mnt/models"),),
        takes_args=False,
        args_from_env=("MLSERVER_MODELS_DIR",),
        # MLServer's server-level readiness is true with no model loaded: the model's own.
        ready_path="/v2/models/{model}/ready",
        ready_port=8080,
        model_name_env="MLSERVER_MODEL_NAME",
        extra_env=(("MLSERVER_HOST", "127.0.0.1"),),
    ),
    Runner(
        "storage-initializer",
        ("kserve/storage-initializer",),
        # The image's entrypoint calls kserve-storage's Storage.download(uri, dest).
        lambda e: [str(e.kserve_python), str(e.entrypoints / "storage_initializer.py")],
    ),
    Runner(
        "addon-agent-release",
        ("opendatahub/model-serving-addon",),
        # The image's entrypoint is `model-serving-addon`; OCM's pre-delete hook Job passes
        # `agent-release` (charts/model-serving-addon/templates/addon.yaml). The agent's
        # Deployment (args `agent ...`) has no runner: kwok keeps faking it.
        lambda e: [str(e.addon_cli)],
        args=("agent-release",),
        api_access=True,
        program_env=lambda e: {"PYTHONPATH": e.addon_source} if e.addon_source else {},
    ),
    Runner(
        "addon-uninstall-guard",
        ("opendatahub/model-serving-addon",),
        # The chart's pre-delete hook Job on the hub
        # (charts/model-serving-addon/templates/uninstall-guard.yaml).
        lambda e: [str(e.addon_cli)],
        args=("uninstall-guard",),
        api_access=True,
        program_env=lambda e: {"PYTHONPATH": e.addon_source} if e.addon_source else {},
    ),
)

RELEASE_HOOK_RUNNER = "addon-agent-release"
"""The runner of OCM's pre-delete hook pod (the add-on's ``agent-release``)."""
UNINSTALL_GUARD_RUNNER = "addon-uninstall-guard"
"""The runner of the chart's pre-delete hook pod on the hub (``uninstall-guard``)."""


def image_repository(image: str) -> str:
    """An image's repository without registry, tag or digest.

    ``docker.io/kserve/sklearnserver:v0.20.0`` is ``kserve/sklearnserver``.
    """
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    parts = name.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    if len(parts) == 2 and parts[0] == "library":
        parts = parts[1:]
    return "/".join(parts)


def runner_for(image: str, args: Sequence[str] = ()) -> Runner | None:
    """The runner standing in for ``image`` run with ``args``, or None.

    A runner with :attr:`Runner.args` takes only containers with exactly those args.
    """
    repository = image_repository(image)
    return next((r for r in RUNNERS if repository in r.repositories
                 and (r.args is None or tuple(args) == r.args)), None)


def _regex_literal(text: str) -> str:
    """``text`` as a regular expression that Python's ``re`` and RE2 (Go) read alike."""
    if not re.fullmatch(r"[a-z0-9._/-]+", text):
        raise ValueError(f"image repository {text!r} has characters the pattern does not take")
    return text.replace(".", "[.]")


def _image_pattern(repositories: set[str]) -> str:
    alternatives = []
    for repository in sorted(repositories):
        literal = _regex_literal(repository)
        # Docker Hub's official images may be written library/NAME.
        alternatives.append(literal if "/" in repository else f"(?:library/)?{literal}")
    registry = r"(?:[^/]*[.:][^/]*/|localhost/)?"
    return f"^{registry}(?:{'|'.join(alternatives)})(?::[^/@]*)?(?:@.+)?$"


def served_image_pattern() -> str:
    """A regular expression matching exactly the images some runner stands in for, any args.

    Of the runners without :attr:`Runner.args` (the others are rules of :func:`served_rules`).

    The same decision as :func:`runner_for` (registry, tag and digest as
    :func:`image_repository` strips them), written so that Python's ``re`` and RE2 read it
    alike: kwok's stage selectors (jq's ``test``, Go's regexp) exclude the pods it matches from
    kwok's simulated readiness, and the testbed runs exactly those (:func:`runs_locally`).
    """
    return _image_pattern({r for runner in RUNNERS if runner.args is None
                           for r in runner.repositories})


@dataclasses.dataclass(frozen=True)
class Rule:
    """A container is run by the testbed when its image matches and (if set) its args are."""

    image: str
    """Regular expression over the image (Python's ``re`` and RE2 alike)."""
    args: tuple[str, ...] | None = None


def served_rules(runners: Sequence[str] | None = None) -> tuple[Rule, ...]:
    """The rules deciding which containers the testbed runs: of every runner, or of ``runners``.

    The one decision :func:`runs_locally` makes in Python and
    :func:`testbed.dataplane.kwok.served_query` in jq (kwok's stage selectors).
    """
    chosen = [r for r in RUNNERS if runners is None or r.name in runners]
    unknown = set(runners or ()) - {r.name for r in RUNNERS}
    if unknown:
        raise ValueError(f"no runner named {sorted(unknown)}")
    rules = []
    any_args = {repo for r in chosen if r.args is None for repo in r.repositories}
    if any_args:
        rules.append(Rule(_image_pattern(any_args)))
    rules += [Rule(_image_pattern(set(r.repositories)), r.args) for r in chosen
              if r.args is not None]
    return tuple(rules)


def pod_images(pod: Obj) -> list[str]:
    """The images of a pod's init containers and containers, in order."""
    return [str(c.get("image", "")) for c in _pod_containers(pod)]


def _pod_containers(pod: Obj) -> list[Obj]:
    spec = pod.get("spec") or {}
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def runs_locally(pod: Obj, rules: Sequence[Rule] | None = None) -> bool:
    """True when every container of ``pod`` has a runner: the testbed runs it, not kwok.

    Decided by :func:`served_rules` (all runners', or ``rules``), the rules kwok's stages are
    given, so the two never both (or neither) take a pod.
    """
    chosen = served_rules() if rules is None else rules

    def taken(container: Obj) -> bool:
        args = [str(a) for a in container.get("args") or []]
        return any(re.search(rule.image, str(container.get("image", "")))
                   and (rule.args is None or tuple(args) == rule.args) for rule in chosen)

    containers = _pod_containers(pod)
    return bool(containers) and all(taken(c) for c in containers)


# ----------------------------------------------------------------------- translation
def translate(
    pod: Obj,
    root: Path,
    objects: Objects,
    environments: Environments,
    allocate_port: Callable[[], int],
    api: ApiAccess | None = None,
) -> PodPlan:
    """The processes, directories and probes that run ``pod`` under ``root``.

    Raises :class:`Refused` when a container's image has no runner (or the pod needs
    something no process here can give, such as API access without ``api``),
    :class:`ConfigError` when a Secret or ConfigMap it needs is missing.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    namespace = str(meta.get("namespace") or "default")
    pod_name = f"{namespace}/{meta.get('name', '')}"
    everything = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    runners = {}
    for container in everything:
        runner = runner_for(str(container.get("image", "")),
                            [str(a) for a in container.get("args") or []])
        if runner is None:
            raise Refused(pod_name, str(container.get("name")), str(container.get("image")),
                          "no local runner for this image")
        if runner.api_access and api is None:
            raise Refused(pod_name, str(container.get("name")), str(container.get("image")),
                          "it calls the API server and this kubelet gives no API access")
        runners[container["name"]] = runner
    volumes = {v["name"]: _volume(v, root, namespace, meta, objects, pod_name)
               for v in spec.get("volumes") or []}
    kubeconfig: Path | None = None
    if api is not None and any(r.api_access for r in runners.values()) and (
            spec.get("automountServiceAccountToken") is not False):
        access = service_account_volume(pod, root, api)
        volumes[access.name] = access
        kubeconfig = access.path / "kubeconfig"

    def plan(container: Obj) -> ContainerPlan:
        made = _container(container, runners[container["name"]], pod, root, volumes, objects,
                          environments, allocate_port)
        if kubeconfig is not None and runners[container["name"]].api_access:
            made = dataclasses.replace(made, env={**made.env, "KUBECONFIG": str(kubeconfig)})
        return made

    return PodPlan(
        namespace=namespace,
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        root=root,
        volumes=tuple(volumes.values()),
        init_containers=tuple(plan(c) for c in spec.get("initContainers") or []),
        containers=tuple(plan(c) for c in spec.get("containers") or []),
        restart_policy=str(spec.get("restartPolicy") or "Always"),
    )


SERVICE_ACCOUNT_VOLUME = "testbed-service-account"
"""The directory (under the pod's root) with the token and kubeconfig of the pod's
ServiceAccount, for a runner with :attr:`Runner.api_access`."""


def service_account_kubeconfig(server: str, certificate_authority: str, account: str,
                               token: str) -> str:
    """A kubeconfig (YAML, written as JSON) reaching ``server`` with ``token``."""
    return json.dumps({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": {
            "server": server, "certificate-authority": certificate_authority}}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": "cluster", "user": account}}],
        "current-context": account,
    }, indent=2) + "\n"


def service_account_volume(pod: Obj, root: Path, api: ApiAccess) -> VolumePlan:
    """The token of the pod's ServiceAccount and a kubeconfig with it, as one volume.

    What the kubelet projects into ``/var/run/secrets/kubernetes.io/serviceaccount`` (a
    TokenRequest bound to the pod), written as a kubeconfig for a process outside any pod.
    """
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    account = str((pod.get("spec") or {}).get("serviceAccountName") or "default")
    token = api.token(pod)
    name = f"system:serviceaccount:{namespace}:{account}"
    return VolumePlan(SERVICE_ACCOUNT_VOLUME, root / SERVICE_ACCOUNT_VOLUME, {
        "token": token.encode(),
        "namespace": namespace.encode(),
        "kubeconfig": service_account_kubeconfig(
            api.server, api.certificate_authority, name, token).encode(),
    })


def _volume(
    volume: Obj, root: Path, namespace: str, meta: Obj, objects: Objects, pod: str
) -> VolumePlan:
    name = volume["name"]
    path = root / "volumes" / name
    if "emptyDir" in volume:
        return VolumePlan(name, path)
    if "secret" in volume:
        source = volume["secret"]
        data = objects.secret(namespace, source.get("secretName", ""))
        if data is None and not source.get("optional"):
            raise ConfigError(f'secret "{source.get("secretName")}" not found')
        return VolumePlan(name, path, _items(data or {}, source.get("items")))
    if "configMap" in volume:
        source = volume["configMap"]
        cm = objects.config_map(namespace, source.get("name", ""))
        if cm is None and not source.get("optional"):
            raise ConfigError(f'configmap "{source.get("name")}" not found')
        encoded = {k: v.encode() for k, v in (cm or {}).items()}
        return VolumePlan(name, path, _items(encoded, source.get("items")))
    if "projected" in volume:
        files: dict[str, bytes] = {}
        for source in volume["projected"].get("sources") or []:
            if "secret" in source:
                data = objects.secret(namespace, source["secret"].get("name", "")) or {}
                files.update(_items(data, source["secret"].get("items")))
            elif "configMap" in source:
                cm = objects.config_map(namespace, source["configMap"].get("name", "")) or {}
                files.update(_items({k: v.encode() for k, v in cm.items()},
                                    source["configMap"].get("items")))
            elif "downwardAPI" in source:
                for item in source["downwardAPI"].get("items") or []:
                    if "fieldRef" in item:
                        value = _field(meta, {}, item["fieldRef"]["fieldPath"])
                        files[item["path"]] = value.encode()
            # serviceAccountToken: the testbed issues no token to a predictor process (a
            # model server does not call the API server); the file is simply absent.
        return VolumePlan(name, path, files)
    kind = next((k for k in volume if k != "name"), "unknown")
    raise Refused(pod, "-", "-", f"volume {name!r} is of type {kind}, which the testbed "
                                 "cannot give a process")


def _items(data: Mapping[str, bytes], items: Sequence[Obj] | None) -> dict[str, bytes]:
    if not items:
        return dict(data)
    return {item["path"]: data[item["key"]] for item in items if item["key"] in data}


def _container(
    container: Obj,
    runner: Runner,
    pod: Obj,
    root: Path,
    volumes: Mapping[str, VolumePlan],
    objects: Objects,
    environments: Environments,
    allocate_port: Callable[[], int],
) -> ContainerPlan:
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    pod_name = f"{namespace}/{meta.get('name', '')}"
    name = str(container["name"])
    image = str(container.get("image", ""))
    if container.get("command"):
        raise Refused(pod_name, name, image, "its command replaces the image's entrypoint, "
                      f"which the testbed's {runner.name} runner stands in for")
    args = [str(a) for a in container.get("args") or []]
    if args and not runner.takes_args:
        raise Refused(pod_name, name, image, "its args replace the image's command (a shell "
                      f"line), which the testbed's {runner.name} runner stands in for")
    for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
        if "exec" in (container.get(kind) or {}):
            raise Refused(pod_name, name, image, f"its {kind} runs a command inside the image")

    mounts = _mounts(container, volumes, pod_name, image)
    env = environment(container, runner, pod, objects)
    env = {k: remap_path(v, mounts) for k, v in env.items()}
    args = [remap_path(a, mounts) for a in expand_args(args, env)]

    # Every port the server listens on moves to a free loopback port.
    declared = [int(p["containerPort"]) for p in container.get("ports") or []]
    ports: dict[int, int] = {}
    for setting in runner.ports:
        current = _port_value(setting, args, env)
        ports.setdefault(current, allocate_port())
        args, env = _set_port(setting, ports[current], args, env)
    for port in declared:
        ports.setdefault(port, allocate_port())

    cwd = root / "containers" / name
    env.setdefault("HOME", str(cwd))
    env["HOSTNAME"] = str(meta.get("name", ""))
    env["PATH"] = f"{Path(runner.program(environments)[0]).parent}:/usr/local/bin:/usr/bin:/bin"
    for key, value in runner.extra_env:
        env[key] = value
    env.update(runner.program_env(environments))
    argv = [*runner.program(environments), *(env.get(k, "") for k in runner.args_from_env)]
    argv += args

    named = {str(p["name"]): int(p["containerPort"])
             for p in container.get("ports") or [] if p.get("name")}
    try:
        readiness = _probe(container.get("readinessProbe"), named, ports)
        liveness = _probe(container.get("livenessProbe"), named, ports)
        startup = _probe(container.get("startupProbe"), named, ports)
    except LookupError as err:
        raise Refused(pod_name, name, image, str(err)) from None
    if readiness is None and runner.ready_path and runner.ready_port in ports:
        # No probe in the pod: readiness is still the server's own answer, never assumed.
        model = env.get(runner.model_name_env or "", "")
        path = runner.ready_path.format(model=model) if model else "/v2/health/ready"
        readiness = Probe("http", ports[runner.ready_port], path, period=1.0)
    return ContainerPlan(
        name=name,
        image=image,
        runner=runner.name,
        argv=tuple(argv),
        env=env,
        cwd=cwd,
        ports=ports,
        readiness=readiness,
        liveness=liveness,
        startup=startup,
        mounts=mounts,
        termination_message_policy=str(container.get("terminationMessagePolicy") or "File"),
    )


def _mounts(
    container: Obj, volumes: Mapping[str, VolumePlan], pod: str, image: str
) -> dict[str, Path]:
    mounts: dict[str, Path] = {}
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(mount["name"])
        if volume is None:
            raise Refused(pod, str(container["name"]), image,
                          f"volume mount {mount['name']!r} names no volume of the pod")
        path = volume.path / mount["subPath"] if mount.get("subPath") else volume.path
        mounts[str(PurePosixPath(mount["mountPath"]))] = path
    return mounts


def remap_path(value: str, mounts: Mapping[str, Path]) -> str:
    """``value`` with a container path under a mount rewritten to its directory here.

    The path may stand alone (``/mnt/models/model.joblib``) or follow ``=``
    (``--model_dir=/mnt/models``); the longest mount path wins.
    """
    prefix, sep, path = value.rpartition("=") if value.startswith("-") else ("", "", value)
    for mount in sorted(mounts, key=len, reverse=True):
        if path == mount or path.startswith(mount.rstrip("/") + "/"):
            rest = path[len(mount):].lstrip("/")
            local = mounts[mount] / rest if rest else mounts[mount]
            return f"{prefix}{sep}{local}"
    return value


_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion of ``value``.

    A defined variable is replaced, an undefined reference stays as written, ``$$`` is a
    literal ``$``.
    """

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _REFERENCE.sub(one, value)


def expand_args(args: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The container's args with ``$(VAR)`` references to its environment expanded."""
    return [expand(a, env) for a in args]


def environment(container: Obj, runner: Runner, pod: Obj, objects: Objects) -> dict[str, str]:
    """The container's environment as the kubelet builds it (without Service variables).

    The image's defaults first, then ``envFrom`` in order, then ``env`` in order (each value
    may refer to the variables before it).
    """
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    env: dict[str, str] = dict(runner.image_env)
    for source in container.get("envFrom") or []:
        prefix = str(source.get("prefix") or "")
        if "secretRef" in source:
            ref = source["secretRef"]
            data = objects.secret(namespace, ref.get("name", ""))
            if data is None:
                if ref.get("optional"):
                    continue
                raise ConfigError(f'secret "{ref.get("name")}" not found')
            env.update({prefix + k: v.decode() for k, v in data.items()})
        elif "configMapRef" in source:
            ref = source["configMapRef"]
            cm = objects.config_map(namespace, ref.get("name", ""))
            if cm is None:
                if ref.get("optional"):
                    continue
                raise ConfigError(f'configmap "{ref.get("name")}" not found')
            env.update({prefix + k: v for k, v in cm.items()})
    for var in container.get("env") or []:
        name = str(var["name"])
        if "valueFrom" not in var:
            env[name] = expand(str(var.get("value", "")), env)
            continue
        found = _value_from(var["valueFrom"], namespace, pod, container, objects)
        if found is not None:
            env[name] = found
    return env


def _value_from(
    source: Obj, namespace: str, pod: Obj, container: Obj, objects: Objects
) -> str | None:
    if "secretKeyRef" in source:
        ref = source["secretKeyRef"]
        data = objects.secret(namespace, ref.get("name", ""))
        if data is None or ref["key"] not in data:
            if ref.get("optional"):
                return None
            if data is None:
                raise ConfigError(f'secret "{ref.get("name")}" not found')
            raise ConfigError(f"couldn't find key {ref['key']} in Secret "
                              f"{namespace}/{ref.get('name')}")
        return data[ref["key"]].decode()
    if "configMapKeyRef" in source:
        ref = source["configMapKeyRef"]
        cm = objects.config_map(namespace, ref.get("name", ""))
        if cm is None or ref["key"] not in cm:
            if ref.get("optional"):
                return None
            if cm is None:
                raise ConfigError(f'configmap "{ref.get("name")}" not found')
            raise ConfigError(f"couldn't find key {ref['key']} in ConfigMap "
                              f"{namespace}/{ref.get('name')}")
        return cm[ref["key"]]
    if "fieldRef" in source:
        return _field(pod.get("metadata") or {}, pod.get("spec") or {},
                      source["fieldRef"]["fieldPath"])
    if "resourceFieldRef" in source:
        return _resource(container, source["resourceFieldRef"])
    raise ConfigError(f"unsupported valueFrom {sorted(source)}")


_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


def _field(meta: Obj, spec: Obj, path: str) -> str:
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        # Every process of the testbed's data plane listens on loopback.
        "status.podIP": "127.0.0.1",
        "status.hostIP": "127.0.0.1",
    }
    if path in simple:
        return str(simple[path] or "")
    match = _SUBSCRIPT.match(path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    raise ConfigError(f"unsupported fieldRef {path!r}")


_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_SUFFIX = {"": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
           "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}


def quantity(text: str) -> float:
    """A Kubernetes quantity (``500m``, ``2Gi``) as a number."""
    match = _QUANTITY.match(text.strip())
    if not match or match.group(2) not in _SUFFIX:
        raise ConfigError(f"cannot read quantity {text!r}")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def _resource(container: Obj, ref: Obj) -> str:
    section, _, resource = str(ref["resource"]).partition(".")
    value = ((container.get("resources") or {}).get(section) or {}).get(resource)
    if value is None:
        # The kubelet gives the node's allocatable for an unset limit; the testbed's node
        # is this machine.
        value = str(os.cpu_count() or 1) if resource == "cpu" else "0"
    divisor = quantity(str(ref.get("divisor") or "1"))
    return str(math.ceil(quantity(str(value)) / divisor))


def _port_value(setting: PortSetting, args: Sequence[str], env: Mapping[str, str]) -> int:
    if setting.flag:
        for i, arg in enumerate(args):
            if arg.startswith(setting.flag + "="):
                return int(arg.split("=", 1)[1])
            if arg == setting.flag and i + 1 < len(args):
                return int(args[i + 1])
    if setting.env and setting.env in env:
        return int(env[setting.env])
    return setting.default


def _set_port(
    setting: PortSetting, port: int, args: Sequence[str], env: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    new_args = list(args)
    new_env = dict(env)
    if setting.flag:
        for i, arg in enumerate(new_args):
            if arg.startswith(setting.flag + "="):
                new_args[i] = f"{setting.flag}={port}"
                break
            if arg == setting.flag and i + 1 < len(new_args):
                new_args[i + 1] = str(port)
                break
        else:
            new_args.append(f"{setting.flag}={port}")
    if setting.env:
        new_env[setting.env] = str(port)
    return new_args, new_env


def _probe(spec: Obj | None, named: Mapping[str, int], ports: Mapping[int, int]) -> Probe | None:
    if not spec:
        return None

    def host_port(port: object) -> int:
        if isinstance(port, str) and not port.isdigit():
            if port not in named:
                raise LookupError(f"a probe names port {port!r}, which the container lacks")
            port = named[port]
        number = int(str(port))
        if number not in ports:
            raise LookupError(f"a probe addresses port {number}, on which the testbed knows "
                              "no server of this container to listen")
        return ports[number]

    if "httpGet" in spec:
        get = spec["httpGet"]
        probe = Probe("http", host_port(get["port"]), str(get.get("path", "/")),
                      str(get.get("scheme", "HTTP")),
                      tuple((h["name"], h["value"]) for h in get.get("httpHeaders") or []))
    elif "tcpSocket" in spec:
        probe = Probe("tcp", host_port(spec["tcpSocket"]["port"]))
    else:
        return None
    return dataclasses.replace(
        probe,
        initial_delay=float(spec.get("initialDelaySeconds", 0)),
        period=float(spec.get("periodSeconds", 10)),
        timeout=float(spec.get("timeoutSeconds", 1)),
        success_threshold=int(spec.get("successThreshold", 1)),
        failure_threshold=int(spec.get("failureThreshold", 3)),
    )
