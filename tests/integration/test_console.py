"""The fleet console (issue 33) on the hub testbed: it reads the hub as each request's user.

Two tenants, each a ServiceAccount of the hub with only the chart's tenant role in its own
namespace (the token an authenticating proxy would pass), and a manager, so the intents have
the manager's real status. The console runs as the chart would run it behind a proxy
(``--proxy``): no identity of its own is ever used. Its API, its live stream and its page in a
real browser (Debian's Chromium, driven by Playwright) show each tenant its own namespace,
follow changes as they happen, and give another tenant's namespace the hub's refusal in the
hub's words.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import socket
import sys
import threading
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from addon_cli import troubleshooting
from testbed.fleet import Testbed
from testbed.support import console as console_support
from testbed.support.manager import Manager, placement, running_manager
from testbed.support.waiting import eventually
from tests.integration.test_chart import render

CLI = Path(sys.executable).with_name("model-serving-addon")
DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


class Tenant:
    """A hub namespace and its user: a ServiceAccount with one role there only (the tenant's,
    or for the platform admin the stack owner's)."""

    def __init__(self, namespace: str, user_namespace: str, name: str,
                 role: str = "model-serving-addon-tenant") -> None:
        self.namespace, self.name, self.role = namespace, name, role
        self.subject = f"system:serviceaccount:{user_namespace}:{name}"
        self.token = ""


@pytest.fixture(scope="module")
def tenants(testbed: Testbed) -> Iterator[dict[str, Tenant]]:
    tag = uuid.uuid4().hex[:6]
    hub = testbed.hub
    users = f"console-users-{tag}"
    found = {"a": Tenant(f"ca-{tag}", users, "alice"), "b": Tenant(f"cb-{tag}", users, "bob"),
             "admin": Tenant(f"cadm-{tag}", users, "platform",
                             "model-serving-addon-stack-owner")}
    # A fleet viewer (an SRE): the chart's read-only viewer role, cluster-wide.
    viewer = Tenant("", users, "sre", "model-serving-addon-viewer")

    def account(t: Tenant) -> dict[str, Any]:
        return {"kind": "ServiceAccount", "name": t.name, "namespace": users}

    # The chart's roles, the users' ServiceAccounts and their bindings in one apply (a
    # kubectl process each cost the module seconds).
    hub.apply_objects([
        *[o for o in render() if o["kind"] == "ClusterRole" and o["metadata"]["name"]
          in {*(t.role for t in found.values()), viewer.role}],
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": users}},
        *[{"apiVersion": "v1", "kind": "ServiceAccount",
           "metadata": {"name": t.name, "namespace": users}} for t in (*found.values(), viewer)],
    ])
    for t in found.values():
        testbed.bind_clusterset(t.namespace)
    hub.apply_objects([
        *[{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
           "metadata": {"name": "model-serving-user", "namespace": t.namespace},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                       "name": t.role},
           "subjects": [account(t)]} for t in found.values()],
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"console-viewer-{tag}"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": viewer.role},
         "subjects": [account(viewer)]},
    ])
    for t in (*found.values(), viewer):
        t.token = hub.create_token(t.name, users, "1h")
    for t in found.values():
        hub.kubectl("apply", f"--as={t.subject}", "-n", t.namespace, "-f", "-",
                    input=json.dumps(placement("p", t.namespace)))
    yield {**found, "viewer": viewer}
    hub.kubectl("delete", "clusterrolebinding", f"console-viewer-{tag}", check=False)
    for t in found.values():
        hub.kubectl("delete", "mcisvc,msv", "--all", "-n", t.namespace, "--wait=false",
                    check=False)
    for ns in (users, *(t.namespace for t in found.values())):
        hub.kubectl("delete", "namespace", ns, "--wait=false", check=False)


@pytest.fixture(scope="module")
def manager(testbed: Testbed, tenants: dict[str, Tenant],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Manager]:
    with running_manager(testbed, tmp_path_factory.mktemp("manager"), "--no-addon-enablement",
                         f"--stack-owner-namespaces={tenants['admin'].namespace}") as mgr:
        yield mgr
        for t in tenants.values():  # while the manager runs: it holds the finalizers
            if t.namespace:
                testbed.hub.kubectl("delete", "mcisvc,msv", "--all", "-n", t.namespace,
                                    "--timeout=60s", check=False)


@pytest.fixture(scope="module")
def console(testbed: Testbed, manager: Manager,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[console_support.Console]:
    static = console_support.built_page()
    hub = testbed.hub
    proc = console_support.Console(CLI, f"https://127.0.0.1:{hub.port}", testbed.ca.pair.cert,
                                   tmp_path_factory.mktemp("console"), static).start()
    yield proc
    proc.stop()


def model(name: str, namespace: str, storage_uri: str = "s3://models/iris") -> dict[str, Any]:
    return {"apiVersion": "modelserving.opendatahub.io/v1alpha1",
            "kind": "MultiClusterInferenceService",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"placementRef": {"name": "p"}, "targetNamespace": namespace,
                     "template": {"predictor": {"model": {
                         "modelFormat": {"name": "sklearn"}, "storageUri": storage_uri}}}}}


def apply_as(testbed: Testbed, tenant: Tenant, obj: dict[str, Any]) -> None:
    testbed.hub.kubectl("apply", f"--as={tenant.subject}", "-n", tenant.namespace, "-f", "-",
                        input=json.dumps(obj))


def names(fleet: dict[str, Any]) -> set[str]:
    return {r["name"] for r in fleet["rows"]}


def test_the_console_reads_as_the_user_or_not_at_all(
        testbed: Testbed, tenants: dict[str, Tenant], console: console_support.Console) -> None:
    """No token: 401 (never the console's own identity); a token the hub does not accept:
    the hub's 401; who the hub says each tenant is."""
    status, body = console.get("/api/fleet")
    assert status == 401 and "no user token" in body["message"], body
    status, body = console.get("/api/whoami", token="not-a-token")
    assert status == 401, body
    for t in tenants.values():
        status, body = console.get("/api/whoami", token=t.token)
        assert (status, body["username"]) == (200, t.subject), body


def test_a_tenant_sees_its_namespace_and_the_hubs_refusal_for_anothers(
        testbed: Testbed, tenants: dict[str, Tenant], console: console_support.Console) -> None:
    a, b = tenants["a"], tenants["b"]
    apply_as(testbed, a, model("iris-a", a.namespace))
    apply_as(testbed, b, model("iris-b", b.namespace))

    def a_has_status() -> dict[str, Any] | None:
        status, body = console.get(f"/api/fleet?namespace={a.namespace}", token=a.token)
        assert status == 200, body
        rows = [r for r in body["rows"] if r["name"] == "iris-a"]
        return body if rows and rows[0]["cluster"] != "-" else None

    # The manager's real status: the model on the testbed's cluster, waiting for a stack.
    fleet = eventually(a_has_status, timeout=60)
    assert names(fleet) == {"iris-a"}, fleet
    (row,) = fleet["rows"]
    assert (row["kind"], row["namespace"], row["cluster"], row["ready"]) == (
        "MultiClusterInferenceService", a.namespace, testbed.spokes[0].name, False), row
    assert row["detail"], row  # why not: the manager's words
    # Another tenant's namespace, and every namespace: the hub's own refusal, as it said it.
    for path in (f"/api/fleet?namespace={b.namespace}", "/api/fleet"):
        status, body = console.get(path, token=a.token)
        assert status == 403, body
        assert f'"{a.subject}" cannot list resource' in body["message"], body
    status, body = console.get(f"/api/fleet?namespace={b.namespace}", token=b.token)
    assert (status, names(body)) == (200, {"iris-b"}), body


def test_a_models_page_says_why_cluster_by_cluster_as_the_user_may_read(
        testbed: Testbed, tenants: dict[str, Tenant], console: console_support.Console) -> None:
    """The explain chain per cluster, read with the tenant's rights: its Placement selects the
    cluster, the manager's entry says what it waits for, the ManifestWork is not the tenant's
    to read (said, not failed), and the troubleshooting advice for the entry's reason."""
    a, b = tenants["a"], tenants["b"]
    cluster = testbed.spokes[0].name
    path = f"/api/intent?kind=mcisvc&namespace={a.namespace}&name=iris-a"

    def has_next() -> dict[str, Any] | None:
        status, body = console.get(path, token=a.token)
        assert status == 200, body
        links = {link["name"]: link for link in body["chains"].get(cluster) or []}
        return body if "next" in links else None

    body = eventually(has_next, timeout=60)
    links = {link["name"]: link for link in body["chains"][cluster]}
    assert links["placement"]["ok"] is True, links
    assert links["status"]["summary"] == f"not ready on {cluster}", links
    assert links["work"]["summary"].endswith("not readable with your rights"), links
    advice = troubleshooting.advice(body["rows"][0]["reason"])
    assert advice is not None and links["next"]["summary"] == advice.todo, links
    assert body["phase"] and body["ready"]["status"] == "False", body
    # Another tenant's model: the hub's refusal; a kind that is none: said so.
    status, refused = console.get(path.replace(a.namespace, b.namespace), token=a.token)
    assert status == 403 and f'"{a.subject}" cannot get resource' in refused["message"], refused
    status, bad = console.get(path.replace("mcisvc", "pods"), token=a.token)
    assert status == 400 and "unknown kind 'pods'" in bad["message"], bad


def test_writes_are_the_users_and_refusals_name_the_field(
        testbed: Testbed, tenants: dict[str, Tenant], console: console_support.Console) -> None:
    """A tenant creates, changes and removes a model through the console's API, written with
    its own identity (the object's managed fields say the console's field manager); another
    tenant's namespace gets the hub's 403; a value the CRD refuses comes back with the field
    the hub named; a write without the page's header is refused before the hub is asked."""
    a, b = tenants["a"], tenants["b"]
    obj = model("iris-form", a.namespace)
    assert console.call("POST", "/api/apply", a.token, {"object": obj}, page=False)[0] == 403
    status, done = console.call("POST", "/api/apply", a.token, {"object": obj})
    assert (status, done["name"], done["generation"]) == (200, "iris-form", 1), done
    stored = json.loads(testbed.hub.kubectl("get", "mcisvc", "iris-form", "-n", a.namespace,
                                            "-o", "json").stdout)
    managers = {m["manager"] for m in stored["metadata"]["managedFields"]}
    assert "model-serving-console" in managers, managers
    obj["spec"]["template"]["predictor"]["model"]["storageUri"] = "s3://models/iris-v2"
    status, done = console.call("POST", "/api/apply", a.token, {"object": obj})
    assert (status, done["generation"]) == (200, 2), done
    status, refused = console.call("POST", "/api/apply", a.token,
                                   {"object": model("iris-form", b.namespace)})
    assert status == 403 and f'"{a.subject}" cannot patch resource' in refused["message"]
    bad = model("iris-bad", a.namespace)
    bad["spec"]["targetNamespace"] = "Not_A_Namespace"
    status, refused = console.call("POST", "/api/apply", a.token, {"object": bad})
    assert status == 422, refused
    assert [x["field"] for x in refused["causes"]] == ["spec.targetNamespace"], refused
    assert get_or_none(testbed, "iris-bad", a.namespace) is None  # nothing half-applied
    status, _ = console.call("DELETE", f"/api/object?kind=mcisvc&namespace={a.namespace}"
                             "&name=iris-form", a.token)
    assert status == 200
    eventually(lambda: get_or_none(testbed, "iris-form", a.namespace) is None, timeout=60)


def test_rollout_actions_are_the_command_lines_made_as_the_user(
        testbed: Testbed, tenants: dict[str, Tenant], console: console_support.Console) -> None:
    """Pause and resume set and remove the annotation `rollout pause` sets, as the tenant;
    approve and undo in a state that has nothing for them are refused with the command line's
    words (409); another tenant may not act on it (the hub's 403)."""
    a, b = tenants["a"], tenants["b"]
    rolled = model("iris-rolled", a.namespace)
    rolled["spec"]["rollout"] = {"strategy": "Progressive", "maxConcurrency": 1}
    apply_as(testbed, a, rolled)
    eventually(lambda: ((get_or_none(testbed, "iris-rolled", a.namespace) or {}).get("status")
                        or {}).get("rollout"), timeout=60)

    def act(action: str, token: str = a.token) -> tuple[int, Any]:
        return console.call("POST", "/api/rollout", token, {
            "kind": "mcisvc", "namespace": a.namespace, "name": "iris-rolled",
            "action": action})

    def annotations() -> dict[str, str]:
        found = get_or_none(testbed, "iris-rolled", a.namespace) or {}
        return dict((found.get("metadata") or {}).get("annotations") or {})

    pause = "rollout.modelserving.opendatahub.io/pause"
    assert act("pause") == (200, {"message": "mcisvc/iris-rolled: paused (no further step "
                                             "starts)"})
    assert annotations().get(pause) == "true"
    assert act("resume")[0] == 200 and pause not in annotations()
    status, body = act("approve")
    assert status == 409 and "waits for no approval" in body["message"], body
    status, body = act("pause", b.token)
    assert status == 403 and f'"{b.subject}" cannot get resource' in body["message"], body
    testbed.hub.kubectl("delete", "mcisvc", "iris-rolled", "-n", a.namespace, "--wait=false")


def stack(name: str, namespace: str, serving: list[str], state: str = "Managed"
          ) -> dict[str, Any]:
    return {"apiVersion": "modelserving.opendatahub.io/v1alpha1", "kind": "ModelServing",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"platform": "KServe", "placementRef": {"name": "p"},
                     "servingNamespaces": serving, "managementState": state}}


def test_the_stack_is_the_platform_admins_and_a_tenants_attempt_gets_the_hubs_words(
        testbed: Testbed, tenants: dict[str, Tenant], console: console_support.Console) -> None:
    """Install the stack where a Placement chooses, turn serving namespaces on and off, mark it
    Removed, as the platform admin (the chart's stack-owner role in the admin's namespace), each
    change seen by the manager; a tenant's attempt is refused by the hub, in its words."""
    admin, a = tenants["admin"], tenants["a"]
    status, body = console.call("POST", "/api/apply", a.token,
                                {"object": stack("kserve", a.namespace, [a.namespace])})
    assert status == 403, body
    assert f'"{a.subject}" cannot patch resource "modelservings"' in body["message"], body

    def observed(generation: int) -> dict[str, Any] | None:
        found = json.loads(testbed.hub.kubectl("get", "msv", "kserve", "-n", admin.namespace,
                                               "-o", "json").stdout)
        got = (found.get("status") or {}).get("observedGeneration")
        return found if got == generation else None

    for generation, body in enumerate((
            stack("kserve", admin.namespace, ["models-x"]),
            stack("kserve", admin.namespace, ["models-x", "models-y"]),  # on
            stack("kserve", admin.namespace, ["models-y"]),  # off
            stack("kserve", admin.namespace, ["models-y"], "Removed")), start=1):
        status, done = console.call("POST", "/api/apply", admin.token, {"object": body})
        assert (status, done.get("generation")) == (200, generation), done
        found = eventually(lambda g=generation: observed(g), timeout=60)
        assert found["spec"]["servingNamespaces"] == body["spec"]["servingNamespaces"]
    assert found["spec"]["managementState"] == "Removed"
    # The stack's row on the fleet, as the admin sees it: the manager's word on the cluster.
    status, view = console.get(f"/api/fleet?namespace={admin.namespace}", token=admin.token)
    assert status == 200 and [r["cluster"] for r in view["rows"]
                              if r["kind"] == "ModelServing"] == [testbed.spokes[0].name], view
    testbed.hub.kubectl("delete", "msv", "kserve", "-n", admin.namespace, "--wait=false")


def test_clusters_are_the_viewers_and_a_tenant_gets_the_hubs_refusal(
        testbed: Testbed, tenants: dict[str, Tenant], console: console_support.Console) -> None:
    """The clusters page as a fleet viewer (the chart's viewer role): the testbed's cluster with
    the add-on's health and the intents on it; a cluster's page with its labels and each
    intent's row there; a tenant may not list clusters (the hub's words). Then in Chromium."""
    from playwright.sync_api import expect

    viewer, a = tenants["viewer"], tenants["a"]
    cluster = testbed.spokes[0].name
    status, body = console.get("/api/clusters", token=viewer.token)
    assert status == 200, body
    (row,) = [r for r in body["clusters"] if r["name"] == cluster]
    assert row["available"] == "True" and row["intents"] >= 1, row
    status, body = console.get(f"/api/cluster?name={cluster}", token=viewer.token)
    assert status == 200, body
    assert body["labels"].get("cluster.open-cluster-management.io/clusterset") == "default"
    assert ("MultiClusterInferenceService", a.namespace, "iris-a") in {
        (r["kind"], r["namespace"], r["name"]) for r in body["rows"]}, body
    status, body = console.get("/api/clusters", token=a.token)
    assert status == 403 and f'"{a.subject}" cannot list resource' in body["message"], body
    with console_support.signed_in(viewer.token) as (page,):
        page.goto(f"{console.url}/clusters")
        page.get_by_test_id("clusters").get_by_role("link", name=cluster).click()
        expect(page.get_by_test_id("cluster-intents")).to_contain_text("iris-a")


def get_or_none(testbed: Testbed, name: str, namespace: str) -> dict[str, Any] | None:
    out = testbed.hub.kubectl("get", "mcisvc", name, "-n", namespace, "-o", "json",
                              "--ignore-not-found", check=False).stdout.strip()
    return json.loads(out) if out else None


def test_the_stream_follows_a_model_created_changed_and_deleted(
        testbed: Testbed, tenants: dict[str, Tenant], console: console_support.Console) -> None:
    a = tenants["a"]
    events: list[dict[str, Any]] = []
    where = urllib.parse.urlsplit(console.url)
    connection = http.client.HTTPConnection(where.hostname or "", where.port, timeout=60)
    connection.request("GET", f"/api/fleet/events?namespace={a.namespace}",
                       headers={"Authorization": f"Bearer {a.token}"})
    stream = connection.getresponse()
    assert stream.status == 200 and connection.sock is not None, stream.status
    sock = connection.sock

    def read() -> None:
        event = ""
        # Ends when the test shuts the connection down (the read then ends or fails inside
        # http.client).
        with contextlib.suppress(OSError, ValueError, AttributeError, http.client.HTTPException):
            for raw in stream:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "fleet":
                    events.append(json.loads(line[6:]))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        eventually(lambda: events and "iris-a" in names(events[-1]), timeout=30)
        apply_as(testbed, a, model("iris-live", a.namespace))
        eventually(lambda: "iris-live" in names(events[-1]), timeout=30)
        # A change the manager reports (its status) reaches the page without a reload.
        eventually(lambda: any(r["name"] == "iris-live" and r["cluster"] != "-"
                               for r in events[-1]["rows"]), timeout=60)
        testbed.hub.kubectl("delete", "mcisvc", "iris-live", "-n", a.namespace,
                            f"--as={a.subject}", "--wait=false")
        eventually(lambda: "iris-live" not in names(events[-1]), timeout=60)
    finally:
        # A shutdown wakes the reader blocked in recv at once; a close alone did not, and the
        # reader waited for the server's next heartbeat (15 s).
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        reader.join(timeout=10)
        assert not reader.is_alive()
        connection.close()


def test_the_page_in_a_browser_shows_a_tenant_its_fleet_live(
        testbed: Testbed, tenants: dict[str, Tenant], console: console_support.Console,
        tmp_path: Path) -> None:
    """Debian's Chromium, the token passed as the proxy passes it: the tenant's name in the
    masthead, its model in the table, a new one appearing without a reload, and another
    tenant's namespace refused in the hub's words next to the namespace it names."""
    from playwright.sync_api import expect

    a, b = tenants["a"], tenants["b"]
    with console_support.signed_in(a.token) as (page,):
        page.goto(f"{console.url}/?namespace={a.namespace}")
        expect(page.get_by_test_id("user")).to_have_text(a.subject)
        table = page.get_by_test_id("fleet")
        expect(table.get_by_role("row").filter(has_text="iris-a")).to_have_count(1)
        # DOCS_SCREENSHOTS=1 keeps it for docs/user-guide.md (docs/images).
        shot = (DOCS_IMAGES if os.environ.get("DOCS_SCREENSHOTS") else tmp_path)
        page.set_viewport_size({"width": 1280, "height": 400})
        page.screenshot(path=str(shot / "console-fleet.png"))
        apply_as(testbed, a, model("iris-page", a.namespace))
        expect(table.get_by_role("row").filter(has_text="iris-page")).to_have_count(
            1, timeout=30_000)
        page.get_by_label("Filter the rows").fill("iris-page")
        expect(table.get_by_role("row").filter(has_text="iris-a")).to_have_count(0)
        # The model's page: why, on the cluster, with the advice for its reason.
        page.get_by_label("Filter the rows").fill("")
        page.get_by_role("link", name="iris-a").click()
        chain = page.get_by_test_id(f"chain-{testbed.spokes[0].name}")
        expect(chain.get_by_test_id("link-placement")).to_contain_text("is selected by")
        expect(chain.get_by_test_id("link-next")).to_contain_text(
            "make sure a ModelServing selects this cluster")
        if os.environ.get("DOCS_SCREENSHOTS"):
            page.set_viewport_size({"width": 1280, "height": 720})
            page.screenshot(path=str(DOCS_IMAGES / "console-model.png"))
        page.get_by_role("link", name="Fleet", exact=True).last.click()
        # Deploy through the form: the YAML it shows, then a value the hub refuses shown
        # at its field, fixed, deployed, and removed from the model's page.
        page.get_by_role("link", name="Deploy a model").click()
        page.get_by_label("Name", exact=True).fill("iris-form")
        page.get_by_label("Spoke namespace").fill("Not_A_Namespace")
        page.get_by_label("Storage URI").fill("s3://models/iris")
        page.get_by_role("button", name="View YAML").click()
        expect(page.get_by_test_id("yaml")).to_contain_text("name: iris-form")
        page.get_by_role("button", name="Deploy").click()
        expect(page.get_by_test_id("error-targetNamespace")).to_contain_text(
            "Not_A_Namespace")
        page.get_by_label("Spoke namespace").fill(a.namespace)
        page.get_by_role("button", name="Deploy").click()
        expect(page.get_by_test_id("chain-" + testbed.spokes[0].name)).to_be_visible(
            timeout=30_000)
        assert get_or_none(testbed, "iris-form", a.namespace) is not None
        page.on("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name="Remove").click()
        expect(page.get_by_test_id("fleet")).to_be_visible()
        eventually(lambda: get_or_none(testbed, "iris-form", a.namespace) is None,
                   timeout=60)
        page.get_by_label("Hub namespace (empty: every namespace)").fill(b.namespace)
        page.get_by_role("button", name="Show").click()
        refused = page.get_by_test_id("fleet-error")
        expect(refused).to_contain_text(f'"{a.subject}" cannot list resource')
        expect(refused).to_contain_text(b.namespace)
    testbed.hub.kubectl("delete", "mcisvc", "iris-page", "-n", a.namespace, "--wait=false")


def test_in_the_browser_the_admin_installs_and_removes_a_stack_and_a_tenant_is_refused(
        testbed: Testbed, tenants: dict[str, Tenant], console: console_support.Console) -> None:
    """The stack form as the platform admin: install with a serving namespace turned on, see
    the stack's page, turn the namespace off and on again through the form, remove the stack;
    the same form as a tenant: the hub's refusal, in its words, nothing written."""
    from playwright.sync_api import expect

    admin, a = tenants["admin"], tenants["a"]
    with console_support.signed_in(admin.token, a.token) as (page, tenant):
        page.goto(f"{console.url}/?namespace={admin.namespace}")
        page.get_by_role("link", name="Install the stack").click()
        page.get_by_label("Name", exact=True).fill("kserve-ui")
        page.get_by_label("Serving namespace to turn on").fill("ui-models")
        page.get_by_role("button", name="Turn serving on").click()
        page.get_by_role("button", name="Install").click()
        expect(page.get_by_role("heading", level=1)).to_contain_text(
            f"ModelServing {admin.namespace}/kserve-ui", timeout=30_000)

        def spec() -> dict[str, Any]:
            found = json.loads(testbed.hub.kubectl(
                "get", "msv", "kserve-ui", "-n", admin.namespace, "-o", "json").stdout)
            return dict(found["spec"])

        assert spec()["servingNamespaces"] == ["ui-models"]
        page.get_by_role("link", name="Edit the stack").click()
        expect(page.get_by_test_id("serving-namespaces")).to_contain_text("ui-models")
        page.get_by_role("button", name="Turn serving off in ui-models").click()
        page.get_by_label("Serving namespace to turn on").fill("ui-more")
        page.get_by_role("button", name="Turn serving on").click()
        page.get_by_role("button", name="Save").click()
        expect(page.get_by_role("link", name="Edit the stack")).to_be_visible(
            timeout=30_000)
        assert spec()["servingNamespaces"] == ["ui-more"]
        page.get_by_role("link", name="Edit the stack").click()
        page.get_by_role("button", name="Remove the stack").click()
        expect(page.get_by_role("link", name="Edit the stack")).to_be_visible(
            timeout=30_000)
        assert spec()["managementState"] == "Removed"

        tenant.goto(f"{console.url}/stack?namespace={a.namespace}")
        tenant.get_by_label("Name", exact=True).fill("mine")
        tenant.get_by_role("button", name="Install").click()
        expect(tenant.get_by_test_id("form-refused")).to_contain_text(
            f'"{a.subject}" cannot patch resource "modelservings"')
    assert get_json_or_none(testbed, "msv", "mine", a.namespace) is None
    testbed.hub.kubectl("delete", "msv", "kserve-ui", "-n", admin.namespace, "--wait=false")


def get_json_or_none(testbed: Testbed, kind: str, name: str, namespace: str
                     ) -> dict[str, Any] | None:
    out = testbed.hub.kubectl("get", kind, name, "-n", namespace, "-o", "json",
                              "--ignore-not-found", check=False).stdout.strip()
    return json.loads(out) if out else None


def test_storage_credentials_are_written_once_as_the_tenant_and_never_shown(
        testbed: Testbed, tenants: dict[str, Tenant], console: console_support.Console) -> None:
    """Through the form in Chromium: the StorageConnection and its Secret written as the tenant
    (the Secret holds exactly what was typed), the connection's page reached, and the secret
    value in no answer of the console and nowhere on its pages; the other tenant's namespace
    refused by the hub with nothing written."""
    from playwright.sync_api import expect

    a, b = tenants["a"], tenants["b"]
    value = f"secret-{uuid.uuid4().hex}"
    seen: list[str] = []
    with console_support.signed_in(a.token) as (page,):
        page.on("response", lambda r: seen.append(r.text()) if r.url.startswith(
            f"{console.url}/api/") and "event-stream" not in (
            r.headers.get("content-type") or "") else None)
        page.goto(f"{console.url}/?namespace={a.namespace}")
        page.get_by_role("link", name="Storage credentials").click()
        page.get_by_label("Name", exact=True).fill("s3-ui")
        page.get_by_label("S3 endpoint").fill("http://minio.minio.svc:9000")
        page.get_by_label("Bucket").fill("models")
        page.get_by_label("Access key id").fill("AKIA-UI")
        page.get_by_label("Secret access key").fill(value)
        page.get_by_role("button", name="Save the credentials").click()
        expect(page.get_by_role("heading", level=1)).to_contain_text(
            f"StorageConnection {a.namespace}/s3-ui", timeout=30_000)
        assert value not in page.content()
    stored = json.loads(testbed.hub.kubectl("get", "secret", "s3-ui-credentials", "-n",
                                            a.namespace, "-o", "json").stdout)
    assert base64.b64decode(stored["data"]["AWS_SECRET_ACCESS_KEY"]).decode() == value
    assert "model-serving-console" in {m["manager"] for m in stored["metadata"]["managedFields"]}
    assert seen and not [t for t in seen if value in t], "a console answer carried the secret"
    # Another tenant's namespace: refused by the hub, nothing written there.
    status, body = console.call("POST", "/api/secret", a.token, {
        "namespace": b.namespace, "name": "x", "values": {"k": value}})
    assert status == 403 and f'"{a.subject}" cannot patch resource "secrets"' in body["message"]
    assert get_json_or_none(testbed, "secret", "x", b.namespace) is None
    testbed.hub.kubectl("delete", "sconn", "s3-ui", "-n", a.namespace, "--wait=false")


def test_a_model_server_through_the_form_is_the_runtime_a_yaml_user_would_write(
        testbed: Testbed, tenants: dict[str, Tenant], console: console_support.Console) -> None:
    """The model-server form in Chromium as a tenant: its YAML shown, a namespace the CRD refuses
    named at its field with nothing written, then the MultiClusterServingRuntime written with
    the image, arguments and formats typed, and its page reached."""
    from playwright.sync_api import expect

    a = tenants["a"]
    with console_support.signed_in(a.token) as (page,):
        page.goto(f"{console.url}/?namespace={a.namespace}")
        page.get_by_role("link", name="Model server").click()
        page.get_by_label("Name", exact=True).fill("my-server")
        page.get_by_label("Image").fill("example.com/team/server:1")
        page.get_by_label("Spoke namespace").fill("Bad_NS")
        page.get_by_role("button", name="View YAML").click()
        expect(page.get_by_test_id("yaml")).to_contain_text("image: example.com/team/server:1")
        page.get_by_role("button", name="Create the model server").click()
        expect(page.get_by_test_id("error-spec.targetNamespace")).to_contain_text("Bad_NS")
        assert get_json_or_none(testbed, "mcsr", "my-server", a.namespace) is None
        page.get_by_label("Spoke namespace").fill(a.namespace)
        page.get_by_role("button", name="Create the model server").click()
        expect(page.get_by_role("heading", level=1)).to_contain_text(
            f"MultiClusterServingRuntime {a.namespace}/my-server", timeout=30_000)
    found = get_json_or_none(testbed, "mcsr", "my-server", a.namespace)
    assert found is not None
    template = found["spec"]["template"]
    assert template["containers"][0]["image"] == "example.com/team/server:1"
    assert template["containers"][0]["args"][0] == "--model_name={{.Name}}"
    assert template["supportedModelFormats"] == [{"name": "sklearn", "autoSelect": True}]
    testbed.hub.kubectl("delete", "mcsr", "my-server", "-n", a.namespace, "--wait=false")


def test_a_model_on_clusters_chosen_one_by_one_with_replicas_for_one_of_them(
        testbed: Testbed, tenants: dict[str, Tenant], console: console_support.Console) -> None:
    """The model form's explicit cluster list as a tenant in Chromium: an empty list refused at
    the list with nothing written; one cluster chosen and given three replicas: a Placement of
    the model's name that OCM's scheduler resolves to exactly that cluster, and the model's
    override for it; edited from the model's page, the replicas cleared (the override gone)
    and every cluster unchecked (refused again, the model kept)."""
    from playwright.sync_api import expect

    a, spoke = tenants["a"], testbed.spokes[0].name
    with console_support.signed_in(a.token) as (page,):
        page.goto(f"{console.url}/new-model?namespace={a.namespace}")
        page.get_by_label("Name", exact=True).fill("iris-listed")
        page.get_by_label("Spoke namespace").fill(a.namespace)
        page.get_by_label("Storage URI").fill("s3://models/iris")
        page.get_by_label("one by one").check()
        page.get_by_role("button", name="Deploy").click()
        expect(page.get_by_test_id("error-clusters")).to_contain_text("no cluster chosen")
        assert get_or_none(testbed, "iris-listed", a.namespace) is None
        page.get_by_label(spoke, exact=True).check()
        page.get_by_label(f"Minimum replicas on {spoke}").fill("3")
        page.get_by_role("button", name="View YAML").click()
        expect(page.get_by_test_id("yaml")).to_contain_text(
            f"managedCluster.metadata.name in ['{spoke}']")
        page.get_by_role("button", name="Deploy").click()
        expect(page.get_by_test_id(f"chain-{spoke}")).to_be_visible(timeout=30_000)
        found = get_or_none(testbed, "iris-listed", a.namespace)
        assert found is not None
        assert found["spec"]["placementRef"] == {"name": "iris-listed"}
        assert found["spec"]["overrides"] == [{"clusterNames": [spoke], "patch": {
            "template": {"predictor": {"minReplicas": 3}}}}]

        def decided() -> list[str]:
            out = testbed.hub.kubectl(
                "get", "placementdecisions", "-n", a.namespace, "-l",
                "cluster.open-cluster-management.io/placement=iris-listed", "-o", "json").stdout
            return [d["clusterName"] for item in json.loads(out)["items"]
                    for d in (item.get("status") or {}).get("decisions") or []]

        eventually(lambda: decided() == [spoke], timeout=60)
        # Edit: the list and the replicas as written, read back from the hub.
        page.get_by_role("link", name="Edit the model").click()
        expect(page.get_by_label(spoke, exact=True)).to_be_checked()
        replicas = page.get_by_label(f"Minimum replicas on {spoke}")
        expect(replicas).to_have_value("3")
        replicas.fill("")
        page.get_by_role("button", name="Save").click()
        expect(page.get_by_test_id(f"chain-{spoke}")).to_be_visible(timeout=30_000)
        changed = get_or_none(testbed, "iris-listed", a.namespace)
        assert changed is not None and not changed["spec"].get("overrides"), changed
        page.get_by_role("link", name="Edit the model").click()
        page.get_by_label(spoke, exact=True).uncheck()
        page.get_by_role("button", name="Save").click()
        expect(page.get_by_test_id("error-clusters")).to_contain_text("no cluster chosen")
    kept = get_json_or_none(testbed, "placement", "iris-listed", a.namespace)
    assert kept is not None and spoke in json.dumps(kept["spec"]), kept
    testbed.hub.kubectl("delete", "mcisvc", "iris-listed", "-n", a.namespace, "--wait=false")


def test_every_page_passes_axe_and_a_model_is_deployed_with_the_keyboard_alone(
        testbed: Testbed, tenants: dict[str, Tenant], console: console_support.Console) -> None:
    """Accessibility (issue 33, item 3): axe-core (Deque's engine, from npm) finds no WCAG 2.x
    A or AA violation on any page, each with what it shows to its user (the tenant's fleet,
    model and forms, the admin's stack form, the viewer's clusters); then the model form is
    filled and submitted from the keyboard alone (Tab to each field, Enter), and the model is
    written."""
    from playwright.sync_api import expect

    a, admin, viewer = tenants["a"], tenants["admin"], tenants["viewer"]
    spoke = testbed.spokes[0].name
    apply_as(testbed, a, model("iris-axe", a.namespace))
    pages = [
        (a.token, f"/?namespace={a.namespace}", "fleet"),
        (a.token, f"/intent?kind=MultiClusterInferenceService&namespace={a.namespace}"
                  "&name=iris-axe", f"chain-{spoke}"),
        (a.token, f"/model?namespace={a.namespace}&name=iris-axe", None),
        (a.token, f"/new-model?namespace={a.namespace}", None),
        (a.token, f"/new-storage?namespace={a.namespace}", None),
        (a.token, f"/new-runtime?namespace={a.namespace}", None),
        (admin.token, f"/stack?namespace={admin.namespace}", None),
        (viewer.token, "/clusters", "clusters"),
        (viewer.token, f"/cluster?name={spoke}", None),
    ]
    found: dict[str, list[str]] = {}
    with console_support.signed_in(a.token, admin.token, viewer.token) as browsers:
        by_token = dict(zip((a.token, admin.token, viewer.token), browsers, strict=True))
        for token, path, shown in pages:
            page = by_token[token]
            page.goto(f"{console.url}{path}")
            expect(page.get_by_role("heading", level=1)).to_be_visible()
            if shown:
                expect(page.get_by_test_id(shown)).to_be_visible()
            page.wait_for_load_state("networkidle")
            found[path] = console_support.accessibility_violations(page)
            if path.startswith("/new-model"):  # the cluster list, one checkbox each
                page.get_by_label("one by one").check()
                expect(page.get_by_label(spoke, exact=True)).to_be_visible()
                found[f"{path} (one by one)"] = console_support.accessibility_violations(page)
        assert not any(found.values()), json.dumps(found, indent=1)

        page = by_token[a.token]
        page.goto(f"{console.url}/new-model?namespace={a.namespace}")
        expect(page.get_by_label("Name", exact=True)).to_be_visible()
        typed = {"model-name": "iris-keys", "model-targetNamespace": a.namespace,
                 "model-storageUri": "s3://models/iris"}
        for _ in range(60):  # Tab through the page; type where a field is wanted
            page.keyboard.press("Tab")
            focused = page.evaluate("document.activeElement && document.activeElement.id")
            if focused in typed:
                page.keyboard.press("ControlOrMeta+a")
                page.keyboard.type(typed.pop(focused))
            if not typed:
                break
        assert not typed, f"not reached with Tab: {sorted(typed)}"
        page.keyboard.press("Enter")
        expect(page.get_by_test_id(f"chain-{spoke}")).to_be_visible(timeout=30_000)
    written = get_or_none(testbed, "iris-keys", a.namespace)
    assert written is not None and written["spec"]["targetNamespace"] == a.namespace, written
    testbed.hub.kubectl("delete", "mcisvc", "iris-axe", "iris-keys", "-n", a.namespace,
                        "--wait=false")
