"""Build the testbed's Go binaries from the Go module proxy into a version-keyed cache.

Each tool is built in a small wrapper Go module (``<cache>/src/<tool>-<version>``)
that requires the upstream module at the pinned version.  Where upstream's own
``go.mod`` uses local ``replace`` lines (Kubernetes' staging modules) the wrapper
replaces them with the published versions.  The binaries land in
``<cache>/bin/<tool>-<version>/`` and a finished build leaves a ``.complete``
marker, so a warm machine rebuilds nothing.

Run ``python -m testbed build`` (``make binaries``).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from addon_agent import kustomize
from testbed import versions
from testbed.paths import cache_dir
from testbed.upstream import ModuleError, module_dir


class BuildError(RuntimeError):
    """A binary could not be built; the message says which and what to do."""


@dataclasses.dataclass(frozen=True)
class Tool:
    """One upstream Go module and the main packages built from it."""

    name: str
    module: str
    version: str
    packages: dict[str, str]
    """binary name -> Go package path."""
    replaces: Callable[[], dict[str, str]] = dataclasses.field(default=lambda: {})
    ldflags: str = "-s -w"
    tags: str = ""
    """Go build tags (comma-separated), e.g. to leave out code the testbed never runs."""
    optional: bool = False
    """Built only when named (``python -m testbed build NAME``, or a test's fixture), not by
    ``make binaries``: only a test outside ``make test`` needs it."""

    @property
    def bin_dir(self) -> Path:
        """Directory the binaries of this tool and version are cached in."""
        return cache_dir() / "bin" / f"{self.name}-{self.version}"

    def is_built(self) -> bool:
        """True when every binary of this tool is in the cache."""
        return (self.bin_dir / ".complete").exists() and all(
            (self.bin_dir / b).exists() for b in self.packages
        )


def _kubernetes_staging_replaces() -> dict[str, str]:
    """Map each k8s.io staging module to its published v0.x release."""
    gomod = module_dir("k8s.io/kubernetes", versions.KUBERNETES) / "go.mod"
    staging = re.findall(r"^\s*(k8s\.io/[\w.-]+)\s*=>\s*\./staging/", gomod.read_text(), re.M)
    minor = versions.KUBERNETES.removeprefix("v1.")
    return {m: f"v0.{minor}" for m in staging}


def _pinned_replaces(module: str, version: str) -> Callable[[], dict[str, str]]:
    """Upstream's own ``replace old => new vX`` lines (a wrapper module ignores them)."""

    def read() -> dict[str, str]:
        gomod = module_dir(module, version) / "go.mod"
        pairs = re.findall(r"^(?:replace\s+)?\s*([\w./-]+)\s*=>\s*([\w./-]+)\s+(v\S+)\s*$",
                           gomod.read_text(), re.M)
        return {old: f"{new} {ver}" for old, new, ver in pairs}

    return read


def _k8s_ldflags() -> str:
    major, minor, _ = versions.KUBERNETES.removeprefix("v").split(".")
    pkg = "k8s.io/component-base/version"
    return (
        f"-s -w -X {pkg}.gitVersion={versions.KUBERNETES} -X {pkg}.gitMajor={major} "
        f"-X {pkg}.gitMinor={minor} -X {pkg}.gitTreeState=clean"
    )


def _prometheus_release(module_version: str) -> str:
    """Prometheus' release of a Go module version: v0.316.0 is 3.16.0."""
    _, mm, patch = module_version.removeprefix("v").split(".")
    return f"{int(mm) // 100}.{int(mm) % 100}.{patch}"


TOOLS: tuple[Tool, ...] = (
    Tool(
        "etcd",
        "go.etcd.io/etcd/server/v3",
        versions.ETCD,
        {"etcd": "go.etcd.io/etcd/server/v3"},
    ),
    Tool(
        "kubernetes",
        "k8s.io/kubernetes",
        versions.KUBERNETES,
        {
            "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
            "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
            "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
        },
        replaces=_kubernetes_staging_replaces,
        ldflags=_k8s_ldflags(),
    ),
    Tool("kwok", "sigs.k8s.io/kwok", versions.KWOK, {"kwok": "sigs.k8s.io/kwok/cmd/kwok"}),
    Tool(
        "ocm",
        "open-cluster-management.io/ocm",
        versions.OCM,
        {
            "registration": "open-cluster-management.io/ocm/cmd/registration",
            "work": "open-cluster-management.io/ocm/cmd/work",
            "placement": "open-cluster-management.io/ocm/cmd/placement",
            "addon": "open-cluster-management.io/ocm/cmd/addon",
        },
    ),
    Tool("helm", "helm.sh/helm/v3", versions.HELM, {"helm": "helm.sh/helm/v3/cmd/helm"}),
    *(  # every KServe release the agent carries: an upgrade runs each in turn
        Tool(
            "kserve",
            "github.com/kserve/kserve",
            version,
            {"kserve-manager": "github.com/kserve/kserve/cmd/manager"},
            replaces=_pinned_replaces("github.com/kserve/kserve", version),
        )
        for version in versions.KSERVE_ALL
    ),
    Tool(
        "prometheus",
        "github.com/prometheus/prometheus",
        versions.PROMETHEUS,
        {
            "prometheus": "github.com/prometheus/prometheus/cmd/prometheus",
            "promtool": "github.com/prometheus/prometheus/cmd/promtool",
        },
        # `prometheus --version` reports the release; the testbed scrapes static and file
        # targets only, so every cloud service discovery (and its SDK) is left out.
        ldflags="-s -w -X github.com/prometheus/common/version.Version="
                + _prometheus_release(versions.PROMETHEUS),
        tags="remove_all_sd",
    ),
    Tool(
        "kube-rbac-proxy",
        "github.com/brancz/kube-rbac-proxy",
        versions.KUBE_RBAC_PROXY,
        {"kube-rbac-proxy": "github.com/brancz/kube-rbac-proxy/cmd/kube-rbac-proxy"},
    ),
    # The data plane's S3 server (issue 30): a bucket of the models the testbed trains.
    Tool(
        "versitygw",
        "github.com/versity/versitygw",
        versions.VERSITYGW,
        {"versitygw": "github.com/versity/versitygw/cmd/versitygw"},
    ),
    # The data plane's ingress (issue 30): Caddy's standard build, configured through its
    # admin API.
    Tool(
        "caddy",
        "github.com/caddyserver/caddy/v2",
        versions.CADDY,
        {"caddy": "github.com/caddyserver/caddy/v2/cmd/caddy"},
    ),
    Tool(
        "helm-docs",
        "github.com/norwoodj/helm-docs",
        versions.HELM_DOCS,
        {"helm-docs": "github.com/norwoodj/helm-docs/cmd/helm-docs"},
    ),
    # The OLM bundle's validators (testbed/olm.py): the operator-framework's validation library
    # behind `operator-sdk bundle validate`, as its own command line.
    Tool(
        "operator-framework",
        "github.com/operator-framework/api",
        versions.OPERATOR_FRAMEWORK_API,
        {"operator-verify": "github.com/operator-framework/api/cmd/operator-verify"},
    ),
    # An OCI registry for the release test (tests/image/test_release.py): the image and the
    # chart pushed to it as `make release` pushes them. Optional: that test is not in make test.
    Tool(
        "registry",
        "github.com/distribution/distribution/v3",
        versions.DISTRIBUTION,
        {"registry": "github.com/distribution/distribution/v3/cmd/registry"},
        optional=True,
    ),
    # The agent's pin (the image ships the same binary), not repeated here.
    Tool(
        "kustomize",
        kustomize.MODULE,
        kustomize.VERSION,
        {"kustomize": kustomize.MODULE},
        # `kustomize version` reports the pin (a wrapper module's build info has none).
        ldflags=f"-s -w -X sigs.k8s.io/kustomize/api/provenance.version={kustomize.VERSION}",
    ),
)


def _run(cmd: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(
        list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-30:])
        hint = ""
        refused = ("403", "not available", "unknown revision")
        if any(word in proc.stdout for word in refused):
            hint = (
                "\nThe Go module proxy refused a module or version: check the pin in "
                "testbed/versions.py and that this machine reaches the Go module proxy."
            )
        raise BuildError(f"`{' '.join(cmd)}` failed in {cwd}:\n{tail}{hint}")


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("CGO_ENABLED", "0")
    env["GOFLAGS"] = "-mod=mod"
    env.setdefault("GOTOOLCHAIN", "local")
    return env


def build_tool(tool: Tool, log: Callable[[str], None] = print) -> float:
    """Build one tool into the cache (no-op when cached); return seconds spent."""
    if tool.is_built():
        return 0.0
    if shutil.which("go") is None:
        raise BuildError(
            "Go is not installed (no `go` on PATH): the testbed builds Kubernetes, etcd, kwok, "
            "OCM, helm and Prometheus from the Go module proxy. Install Go >= 1.26.7 and run "
            "`make binaries`."
        )
    start = time.monotonic()
    src = cache_dir() / "src" / f"{tool.name}-{tool.version}"
    src.mkdir(parents=True, exist_ok=True)
    env = _go_env()
    replaces = tool.replaces()
    lines = [f"module testbed.local/{tool.name}", "", "go 1.24", ""]
    lines += [
        f"replace {mod} => {target if ' ' in target else f'{mod} {target}'}"
        for mod, target in sorted(replaces.items())
    ]
    (src / "go.mod").write_text("\n".join(lines) + "\n")
    # Seed go.sum with upstream's own: it pins every dependency's checksum, including
    # modules the checksum database does not list (Go then needs no lookup for them).
    try:
        upstream_sum = module_dir(tool.module, tool.version) / "go.sum"
    except ModuleError as exc:
        raise BuildError(str(exc)) from exc
    if upstream_sum.exists():
        ours = src / "go.sum"
        known = set(ours.read_text().splitlines()) if ours.exists() else set()
        known.update(upstream_sum.read_text().splitlines())
        ours.write_text("".join(f"{line}\n" for line in sorted(known) if line))
    log(f"[build] {tool.name} {tool.version}: resolving {tool.module}")
    _run(["go", "get", *(f"{p}@{tool.version}" for p in tool.packages.values())], src, env)
    tool.bin_dir.mkdir(parents=True, exist_ok=True)
    for binary, pkg in tool.packages.items():
        t0 = time.monotonic()
        log(f"[build] {tool.name} {tool.version}: compiling {binary}")
        out = tool.bin_dir / binary
        cmd = ["go", "build", "-trimpath", f"-ldflags={tool.ldflags}",
               *([f"-tags={tool.tags}"] if tool.tags else []), "-o", str(out), pkg]
        _run(cmd, src, env)
        log(f"[build] {binary} done in {time.monotonic() - t0:.0f}s")
    (tool.bin_dir / ".complete").write_text(tool.version + "\n")
    return time.monotonic() - start


def binary(name: str, version: str | None = None) -> Path:
    """Path of a cached binary by name; raises BuildError when it is not built.

    ``version`` picks one of several versions of a tool (KServe's controller); by default
    the pin in :mod:`testbed.versions`.
    """
    for tool in TOOLS:
        if name in tool.packages and (version or _pinned(tool)) == tool.version:
            path = tool.bin_dir / name
            if not path.exists():
                raise BuildError(f"{name} is not built yet: run `make binaries`")
            return path
    raise KeyError(name)


def _pinned(tool: Tool) -> str:
    """The version of ``tool`` used when none is asked for."""
    return versions.KSERVE if tool.name == "kserve" else tool.version


def agent_runtime_env() -> dict[str, str]:
    """Environment for an agent process: the executables the image ships first on PATH.

    The runtime image puts the agent's pinned ``kustomize`` on PATH
    (:mod:`addon_agent.kustomize`); an agent run by the testbed gets the same build.
    """
    tools = binary("kustomize").parent
    return {"PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"}


DATAPLANE = "dataplane"
"""The name ``python -m testbed build`` knows the data plane's Python servers by."""


def build_all(only: Sequence[str] = (), log: Callable[[str], None] = print) -> None:
    """Build every tool but the optional ones (or only the named ones), with progress and timings.

    ``dataplane`` names the real model servers' virtualenvs and the models they serve
    (:mod:`testbed.dataplane.envs`), built after the Go tools.
    """
    total = time.monotonic()
    for tool in TOOLS:
        if (only or tool.optional) and tool.name not in only:
            continue
        if tool.is_built():
            log(f"[build] {tool.name} {tool.version}: cached in {tool.bin_dir}")
            continue
        spent = build_tool(tool, log)
        log(f"[build] {tool.name} {tool.version}: built in {spent:.0f}s")
    if not only or DATAPLANE in only:
        from testbed.dataplane import envs

        try:
            envs.build_all(log)
        except envs.EnvError as exc:
            raise BuildError(str(exc)) from exc
    log(f"[build] all binaries ready in {time.monotonic() - total:.0f}s (cache: {cache_dir()})")


def main(argv: Sequence[str] = ()) -> int:
    """CLI entry: build all binaries, or those named."""
    try:
        build_all(list(argv))
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
