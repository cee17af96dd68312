"""The serving stacks the agent can install, pinned in this one place.

``testbed`` (and anything else that needs the versions) imports these pins
instead of repeating them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

KSERVE_MODULE: Final = "github.com/kserve/kserve"
KSERVE_VERSION: Final = "v0.17.0"
"""Newest KServe release: installed in Standard (RawDeployment) mode, no Knative/Istio."""

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


KSERVE: Final = Stack(
    platform="KServe",
    module=KSERVE_MODULE,
    version=KSERVE_VERSION,
    namespace="kserve",
    controller="kserve-controller-manager",
    metrics_service="kserve-controller-manager-metrics-service",
    runtimes="runtimes",
)

MODELMESH: Final = Stack(
    platform="ModelMesh",
    module=MODELMESH_MODULE,
    version=MODELMESH_VERSION,
    namespace="modelmesh-serving",
    controller="modelmesh-controller",
    metrics_service="",
    runtimes="runtimes",
)

STACKS: Final = {s.platform: s for s in (KSERVE, MODELMESH)}
"""Every stack by platform name."""
