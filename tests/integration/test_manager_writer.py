"""The manager's hub writer against the real API server: status writes to a CRD that is older
than the manager (fields it does not know are dropped, not a failure)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from addon_manager.shell.apply import HubWriter
from testbed.fleet import Testbed
from testbed.support.manager import get_json


def test_status_with_many_fields_the_crd_lacks_is_written(testbed: Testbed) -> None:
    hub = testbed.hub
    group, plural = f"t{uuid.uuid4().hex[:6]}.example.com", "gadgets"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": "gadget", "kind": "Gadget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object"},
                                "status": {
                                    "type": "object",
                                    "properties": {"phase": {"type": "string"}},
                                },
                            },
                        }
                    },
                }
            ],
        },
    }
    hub.apply_objects([crd])
    hub.wait_crds_established()
    hub.apply_objects(
        [{"apiVersion": f"{group}/v1", "kind": "Gadget",
          "metadata": {"name": "g", "namespace": "default"}, "spec": {}}]
    )
    # 150 fields the CRD does not have: one warning header each under the default
    # field validation, more than Python's HTTP client accepts in one response.
    status: dict[str, Any] = {"phase": "Ready", **{f"newField{i}": "x" for i in range(150)}}
    writer = HubWriter(hub.api_client().configuration, concurrency=1, attempts=1)

    async def patch() -> None:
        try:
            await writer.patch_status(group, "v1", plural, "default", "g", status)
        finally:
            await writer.close()

    try:
        asyncio.run(patch())
        got = get_json(hub, f"{plural}.{group}", "g", "-n", "default")
        assert got["status"] == {"phase": "Ready"}
    finally:
        hub.kubectl("delete", "crd", f"{plural}.{group}", "--wait=false", check=False)
