"""With cert-manager's CRDs served, the agent leaves webhook certificates to cert-manager."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from testbed.support.agent import AgentProcess, get, leftovers, platform, wait_phase

NAME = "with-cert-manager"
MM_NS = "modelmesh-serving"


def stand_in_crd(kind: str, plural: str) -> dict[str, Any]:
    """A schemaless stand-in for a cert-manager CRD (cert-manager itself does not run here)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.cert-manager.io"},
        "spec": {
            "group": "cert-manager.io",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def spoke(spoke: Any) -> Iterator[Any]:
    """The agent's spoke (tests/conftest.py) with cert-manager's CRDs stood in."""
    spoke.apply_objects(
        [stand_in_crd("Certificate", "certificates"), stand_in_crd("Issuer", "issuers")]
    )
    spoke.wait_crds_established()
    yield spoke
    spoke.kubectl(
        "delete", "crd", "certificates.cert-manager.io", "issuers.cert-manager.io", check=False
    )


def test_certificates_are_left_to_cert_manager(spoke: Any, agent: AgentProcess) -> None:
    spoke.apply_objects([platform(NAME, {"platform": "ModelMesh"})])
    wait_phase(spoke, NAME, "Available", timeout=180)
    cert = get(spoke, "certificates.cert-manager.io", "-n", MM_NS, "modelmesh-webhook-server-cert")
    assert cert["spec"]["secretName"] == "modelmesh-webhook-server-cert"
    assert cert["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "model-serving-addon"
    assert get(spoke, "issuers.cert-manager.io", "-n", MM_NS, "selfsigned-issuer") is not None
    # no self-signed Secret from the agent; the webhook keeps cert-manager's injection annotation
    assert get(spoke, "secret", "-n", MM_NS, "modelmesh-webhook-server-cert") is None
    hook = get(
        spoke, "validatingwebhookconfiguration", "modelmesh-servingruntime.serving.kserve.io"
    )
    assert "cert-manager.io/inject-ca-from" in hook["metadata"]["annotations"]


def test_deletion_uninstalls_and_takes_the_certificates(spoke: Any, agent: AgentProcess) -> None:
    # Deleting a Managed platform (no managementState: Removed first): the agent's finalizer
    # holds the object until the stack is uninstalled.
    assert get(spoke, "clusterservingruntime", "mlserver-1.x") is not None
    spoke.kubectl("delete", "servingplatform", NAME, "--timeout=180s", timeout=200)
    assert get(spoke, "servingplatform", NAME) is None
    assert leftovers(spoke) == []
    assert get(spoke, "crd", "servingruntimes.serving.kserve.io") is None
    assert (
        get(spoke, "certificates.cert-manager.io", "-n", MM_NS, "modelmesh-webhook-server-cert")
        is None
    )
