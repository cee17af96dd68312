"""The serving stacks the agent can install, pinned in this one place.

``testbed`` (and anything else that needs the versions) imports these pins
instead of repeating them.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Final

KSERVE_MODULE: Final = "github.com/kserve/kserve"
KSERVE_VERSIONS: Final = ("v0.17.0", "v0.20.0")
"""KServe releases the agent carries a bundle of, oldest first: the previous pin and the
current one (installed in Standard (RawDeployment) mode, no Knative/Istio)."""
KSERVE_VERSION: Final = KSERVE_VERSIONS[-1]
"""The current KServe pin: what a ModelServing without ``spec.version`` installs."""

MODELMESH_MODULE: Final = "github.com/kserve/modelmesh-serving"
MODELMESH_VERSION: Final = "v0.12.0"
"""Last ModelMesh Serving release (the project is archived)."""


@dataclass(frozen=True)
class Stack:
    """One installable serving stack: where its manifests come from and what it runs."""

    platform: str
    """``KServe`` or ``ModelMesh`` (the values of ``spec.platform``)."""
    module: str
    """Go module holding the upstream ``config/`` tree."""
    version: str
    """Pinned upstream release."""
    namespace: str
    """Namespace the controllers run in."""
    controller: str
    """Name of the main controller Deployment."""
    metrics_service: str
    """Service exposing the controller's metrics (target of the stack ServiceMonitor; "" when
    the stack has none and its ServiceMonitor targets the runtimes instead)."""
    runtimes: str = ""
    """Upstream kustomization (under ``config/``) of the stack's built-in serving runtimes,
    rendered next to the bundle; "" when the stack ships none."""
    versions: tuple[str, ...] = ()
    """Every release the agent carries a bundle of, oldest first (``version`` is the last)."""

    def at(self, version: str) -> Stack:
        """The same stack at another carried release."""
        if version not in self.versions:
            raise UnknownVersion(self, version)
        return dataclasses.replace(self, version=version)

    def carried(self) -> tuple[Stack, ...]:
        """The stack at each release the agent carries."""
        return tuple(self.at(v) for v in self.versions)


class UnknownVersion(ValueError):
    """A version the agent carries no bundle of; the message names those it has."""

    def __init__(self, stack: Stack, version: str) -> None:
        super().__init__(
            f"{stack.platform} {version} is not a version this agent carries; it has "
            + ", ".join(stack.versions))
        self.version = version


def release(version: str) -> tuple[int, ...]:
    """``v0.20.0`` as (0, 20, 0), to compare releases; () for anything else (``custom``)."""
    match = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)", version)
    return tuple(int(x) for x in match.groups()) if match else ()


KSERVE: Final = Stack(
    platform="KServe",
    module=KSERVE_MODULE,
    version=KSERVE_VERSION,
    namespace="kserve",
    controller="kserve-controller-manager",
    metrics_service="kserve-controller-manager-metrics-service",
    runtimes="runtimes",
    versions=KSERVE_VERSIONS,
)

MODELMESH: Final = Stack(
    platform="ModelMesh",
    module=MODELMESH_MODULE,
    version=MODELMESH_VERSION,
    namespace="modelmesh-serving",
    controller="modelmesh-controller",
    metrics_service="",
    runtimes="runtimes",
    versions=(MODELMESH_VERSION,),
)

STACKS: Final = {s.platform: s for s in (KSERVE, MODELMESH)}
"""Every stack by platform name (at its current version)."""

CARRIED: Final = tuple(v for s in STACKS.values() for v in s.carried())
"""Every stack at every version the agent carries a bundle of."""


def select(platform: str, version: str | None) -> Stack:
    """The stack of ``platform`` at ``version`` (None: the current one).

    Raises :class:`UnknownVersion` for a version the agent carries no bundle of.
    """
    stack = STACKS[platform]
    return stack if version is None else stack.at(version)
