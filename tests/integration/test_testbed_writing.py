"""The testbed's in-process kubectl writes (testbed.writing) against the real kubectl.

Each command runs twice on the hub's real API server: by kubectl itself in one namespace, and
through ``Cluster.kubectl`` in a twin namespace, where no process may start unless the command
is one the writer leaves to kubectl (a refusal, a label that needs ``--overwrite``). Both
answer the same exit code, stdout and stderr, and leave the same objects, with the same field
managers.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from testbed.cluster import Cluster
from testbed.fleet import Testbed


def _no_process(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"a process was started: {args[0] if args else kwargs}")


class Twins:
    """One command, by kubectl in namespace ``real_ns`` and in process in ``proc_ns``."""

    def __init__(self, hub: Cluster, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
        self.real_ns, self.proc_ns = f"{name}-real", f"{name}-proc"
        self.hub = hub
        self.monkeypatch = monkeypatch
        self.real_run = subprocess.run

    def real(self, *args: str, input: str | None = None) -> tuple[int, str, str]:
        argv = [a.replace("{ns}", self.real_ns) for a in args]
        done = self.real_run(["kubectl", f"--kubeconfig={self.hub.kubeconfig}", *argv],
                             input=input.replace("{ns}", self.real_ns) if input else None,
                             capture_output=True, text=True, timeout=60)
        return done.returncode, done.stdout.replace(self.real_ns, "{ns}"), done.stderr.replace(
            self.real_ns, "{ns}")

    def proc(self, *args: str, input: str | None = None,
             by_kubectl: bool = False) -> tuple[int, str, str]:
        argv = [a.replace("{ns}", self.proc_ns) for a in args]
        with self.monkeypatch.context() as patched:
            if not by_kubectl:
                patched.setattr(subprocess, "run", _no_process)
            given = input.replace("{ns}", self.proc_ns) if input else None
            done = self.hub.kubectl(*argv, input=given, check=False, timeout=60)
        return done.returncode, done.stdout.replace(self.proc_ns, "{ns}"), done.stderr.replace(
            self.proc_ns, "{ns}")

    def same(self, *args: str, input: str | None = None,
             by_kubectl: bool = False) -> tuple[int, str, str]:
        """Run both ways; their answers must be equal. The answer."""
        real = self.real(*args, input=input)
        proc = self.proc(*args, input=input, by_kubectl=by_kubectl)
        assert proc == real, (args, real, proc)
        return real

    def objects(self, kind: str) -> tuple[Any, Any]:
        """Both namespaces' objects of ``kind``: names, data, labels, annotations and the
        field managers of each, compared without what the server stamps per object."""

        def read(ns: str) -> Any:
            out = json.loads(self.real_run(
                ["kubectl", f"--kubeconfig={self.hub.kubeconfig}", "get", kind, "-n", ns,
                 "-o", "json"], capture_output=True, text=True, check=True).stdout)
            return sorted(
                (o["metadata"]["name"], o.get("data"), o["metadata"].get("labels"),
                 o["metadata"].get("annotations"), o["metadata"].get("finalizers"),
                 sorted((m["manager"], m["operation"], m.get("subresource", ""))
                        for m in o["metadata"].get("managedFields") or []))
                for o in out["items"] if o["metadata"]["name"] != "kube-root-ca.crt")
        return read(self.real_ns), read(self.proc_ns)


@pytest.fixture
def twins(testbed: Testbed, monkeypatch: pytest.MonkeyPatch,
          request: pytest.FixtureRequest) -> Iterator[Twins]:
    name = "w-" + hashlib.sha1(request.node.name.encode()).hexdigest()[:6]
    t = Twins(testbed.hub, monkeypatch, name)
    yield t
    for ns in (t.real_ns, t.proc_ns):
        t.real_run(["kubectl", f"--kubeconfig={testbed.hub.kubeconfig}", "delete", "namespace",
                    ns, "--ignore-not-found", "--wait=false"], capture_output=True, timeout=60)


def cm(name: str, **extra: Any) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                       "data": {"x": "1"}, **extra})


def test_create_label_annotate_patch_and_delete_answer_as_kubectl(twins: Twins) -> None:
    assert twins.same("create", "namespace", "{ns}") == (0, "namespace/{ns} created\n", "")
    assert twins.same("create", "-n", "{ns}", "-f", "-", input=cm("a"))[1] == (
        "configmap/a created\n")
    assert twins.same("create", "-n", "{ns}", "-f", "-", "--dry-run=server",
                      input=cm("b"))[1] == "configmap/b created (server dry run)\n"
    real, proc = twins.real("create", "-n", "{ns}", "-f", "-", "-o", "json", input=cm("c")), \
        twins.proc("create", "-n", "{ns}", "-f", "-", "-o", "json", input=cm("c"))
    assert (real[0], real[2]) == (proc[0], proc[2]) == (0, "")
    stamped = ("uid", "resourceVersion", "creationTimestamp", "managedFields")
    assert [{k: v for k, v in json.loads(out)["metadata"].items() if k not in stamped}
            for out in (real[1], proc[1])] == [{"name": "c", "namespace": "{ns}"}] * 2
    # Refused creates, in kubectl's words: the object's own causes (one, or several as a
    # list), or the server's reason and message.
    assert twins.same("create", "-n", "{ns}", "-f", "-", input=cm("a")) == (
        1, "", 'Error from server (AlreadyExists): error when creating "STDIN": '
               'configmaps "a" already exists\n')
    bogus = cm("d", bogus=1)
    assert "unknown field" in twins.same("create", "-n", "{ns}", "-f", "-", input=bogus)[2]
    assert twins.same("create", "-n", "{ns}-none", "-f", "-", input=cm("a"))[2].startswith(
        "Error from server (NotFound)")
    for args in ((), ("-o", "json"), ("--dry-run=server",), ("-o", "json", "--dry-run=server")):
        one = twins.same("create", "-n", "{ns}", "-f", "-", *args, input=cm("A_B"))
        assert one[:2] == (1, "") and one[2].startswith(
            'The ConfigMap "A_B" is invalid: metadata.name: Invalid value: "A_B": '), one
        several = twins.same("create", "-n", "{ns}", "-f", "-", *args, input=json.dumps(
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
             "spec": {"type": "Bogus", "ports": [{"port": 0}]}}))
        assert several[2].startswith('The Service "s" is invalid: \n* spec.'), several
        assert several[2].count("\n* ") == 3, several
    assert twins.same("create", "-n", "{ns}", "-f", "-", "--validate=false", input=bogus)[0] == 0
    # The server's warnings, on stderr as kubectl prints them.
    assert twins.same("create", "-n", "{ns}", "-f", "-", "--validate=warn",
                      input=cm("e", bogus=1)) == (
        0, "configmap/e created\n", 'Warning: unknown field "bogus"\n')
    # Labels and annotations, with kubectl's words for each outcome.
    assert twins.same("label", "-n", "{ns}", "configmap", "a", "k=v")[1] == "configmap/a labeled\n"
    assert twins.same("label", "-n", "{ns}", "configmap", "a", "k=v")[1] == (
        "configmap/a not labeled\n")
    assert "--overwrite is false" in twins.same("label", "-n", "{ns}", "configmap", "a", "k=w",
                                                by_kubectl=True)[2]
    twins.same("label", "-n", "{ns}", "configmap/a", "k=w", "--overwrite")
    twins.same("label", "-n", "{ns}", "configmap", "c", "k=v", "j=u")
    assert twins.same("label", "-n", "{ns}", "configmap", "a", "k-")[1] == (
        "configmap/a unlabeled\n")
    twins.same("label", "-n", "{ns}", "configmap", "a", "k-", by_kubectl=True)  # not found
    assert twins.same("annotate", "-n", "{ns}", "configmap", "a", "k=v")[1] == (
        "configmap/a annotated\n")
    # Patches of each type, and one that changes nothing.
    patch = json.dumps({"data": {"x": "2"}})
    assert twins.same("patch", "-n", "{ns}", "configmap", "a", "--type=merge", "-p", patch)[1] \
        == "configmap/a patched\n"
    assert twins.same("patch", "-n", "{ns}", "configmap", "a", "--type=merge", "-p", patch)[1] \
        == "configmap/a patched (no change)\n"
    twins.same("patch", "-n", "{ns}", "configmap/c", "-p", json.dumps({"data": {"y": "3"}}))
    twins.same("patch", "-n", "{ns}", "configmap", "c", "--type=json", "-p",
               json.dumps([{"op": "remove", "path": "/data/y"}]))
    assert twins.same("patch", "-n", "{ns}", "configmap", "nope", "--type=merge", "-p", patch,
                      by_kubectl=True)[0] == 1
    real, proc = twins.objects("configmaps")
    assert real == proc and len(real) == 4
    # Deletes: one, one not there (an error, or nothing with --ignore-not-found), all.
    assert twins.same("delete", "-n", "{ns}", "configmap", "a") == (
        0, 'configmap "a" deleted\n', "")
    assert twins.same("delete", "-n", "{ns}", "configmap", "a") == (
        1, "", 'Error from server (NotFound): configmaps "a" not found\n')
    assert twins.same("delete", "-n", "{ns}", "configmap", "a", "--ignore-not-found") == (
        0, "", "")
    assert twins.same("delete", "-n", "{ns}", "configmap,secret", "--all") == (
        0, 'configmap "c" deleted\nconfigmap "d" deleted\nconfigmap "e" deleted\n'
           'configmap "kube-root-ca.crt" deleted\n', "")
    assert twins.same("delete", "-n", "{ns}", "secret", "--all") == (
        0, "No resources found\n", "")
    assert twins.same("delete", "namespace", "{ns}", "--wait=false") == (
        0, 'namespace "{ns}" deleted\n', "")


def test_a_delete_waits_until_the_object_is_gone(testbed: Testbed, twins: Twins) -> None:
    """kubectl delete waits (its default) until a finalizer is removed; so does the writer."""
    hub = testbed.hub
    twins.same("create", "namespace", "{ns}")
    held = cm("held", metadata={"name": "held", "finalizers": ["testbed.local/hold"]})
    twins.same("create", "-n", "{ns}", "-f", "-", input=held)
    answers: dict[str, tuple[int, str, str]] = {}
    release = threading.Event()

    def delete() -> None:
        answers["proc"] = twins.proc("delete", "-n", "{ns}", "configmap", "held")
        release.set()

    thread = threading.Thread(target=delete)
    thread.start()
    # Still waiting while the finalizer holds the object (deleted, not gone).
    assert not release.wait(3), answers
    got = json.loads(hub.kubectl("get", "configmap", "held", "-n", twins.proc_ns, "-o",
                                 "json").stdout)
    assert got["metadata"].get("deletionTimestamp")
    hub.kubectl("patch", "configmap", "held", "-n", twins.proc_ns, "--type=json", "-p",
                json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]))
    thread.join(timeout=30)
    assert answers["proc"] == (0, 'configmap "held" deleted\n', "")
    assert hub.kubectl("get", "configmap", "held", "-n", twins.proc_ns, check=False).returncode == 1
