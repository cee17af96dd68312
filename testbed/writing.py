"""The commonest kubectl writes, done in process with the same API requests.

``delete``, ``create -f -``, ``create namespace``, ``patch``, ``label`` and ``annotate``.

A kubectl process costs the machine about 0.15 CPU-seconds (its start, the kubeconfig, the
discovery cache) for a request the API server answers in milliseconds; a full ``make test``
ran about 850 of them (2026-12-07), 580 of these writes. :class:`Writer` sends what kubectl
sends for the forms the tests use (the same verbs, the same field managers ``kubectl-create``,
``kubectl-patch``, ``kubectl-label``, ``kubectl-annotate``, strict field validation) and
answers with kubectl's exit code and words (``configmap/a created``, ``namespace "x"
deleted``, ``configmap/a patched (no change)``).

Anything else is :class:`~testbed.reading.NotHandled` and runs the real kubectl: a flag not
listed here (``--as`` among them: a tenant's requests always go through kubectl), several
objects in one input, a write other than a create that the API server refuses (nothing was
written, so kubectl sends it again and says why in its own words), a refused create whose
refusal :func:`refusal` cannot word as kubectl does, a label that would need ``--overwrite``.
``tests/integration/test_testbed_writing.py`` runs each form both ways and compares.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from testbed.reading import Answer, NotHandled, Reader, Resource, error_line

VERBS = frozenset({"delete", "create", "patch", "label", "annotate"})
"""The kubectl verbs :meth:`Writer.run` may do in process (for some of their forms)."""

PATCH_TYPES = {
    "strategic": "application/strategic-merge-patch+json",
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
}
"""``kubectl patch --type`` -> the request's content type (kubectl's default: strategic)."""

PAST = {"label": "labeled", "annotate": "annotated"}
"""What kubectl says it did."""

WAIT_INTERVAL = 0.2
"""Seconds between two looks at an object ``kubectl delete`` waits for (until it is gone)."""


QUOTABLE = frozenset(" !#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`"
                     "abcdefghijklmnopqrstuvwxyz{|}~")
"""Characters Go's ``%q`` prints as they are (no escape), as kubectl quotes an object's name."""


def refusal(doing: str, body: Any) -> str:
    """What kubectl prints on stderr when the API server refused a write of ``-f -``.

    An ``Invalid`` refusal names the object and lists the causes, one per line when there
    are several (``The ConfigMap "A_B" is invalid: metadata.name: Invalid value: ...``);
    any other reason is ``Error from server (Reason): error when creating "STDIN": message``.
    :class:`NotHandled` for an answer kubectl words otherwise (no Status, no reason, no
    details or causes, an unauthorised client, a name Go would escape).
    """
    if not isinstance(body, dict) or body.get("kind") != "Status":
        raise NotHandled(f"refusal: not a Status: {str(body)[:80]}")
    reason, message = body.get("reason") or "", str(body.get("message") or "")
    if not reason or reason == "Unauthorized":
        raise NotHandled(f"refusal: reason {reason!r}")
    if reason != "Invalid":
        said = f'Error from server ({reason}): error when {doing} "STDIN": {message}'
        return said if said.endswith("\n") else said + "\n"  # kubectl ends it with one
    details = body.get("details") or {}
    kind, name = str(details.get("kind") or ""), str(details.get("name") or "")
    causes = details.get("causes") or []
    if not (kind or name) or not causes or not set(kind + name) <= QUOTABLE:
        raise NotHandled("refusal: Invalid without kind, name or causes, or a quoted name")
    # kubectl lists each "field: message" once, in the server's order.
    lines = list(dict.fromkeys(f"{c.get('field', '')}: {c.get('message', '')}" for c in causes))
    head = f'The {kind} "{name}" is invalid: '
    if len(lines) == 1:
        return f"{head}{lines[0]}\n"
    return head + "\n" + "".join(f"* {line}\n" for line in lines)


@dataclass(frozen=True)
class Command:
    """One command line: its positional arguments and the flags it may have."""

    positional: tuple[str, ...]
    flags: dict[str, str]


def parse(args: tuple[str, ...], valued: frozenset[str], switches: frozenset[str]) -> Command:
    """Split ``args`` into positionals and flags; :class:`NotHandled` for any other flag.

    ``valued`` flags take a value (``-n NS`` or ``--namespace=NS``); ``switches`` may stand
    alone (``--all``) or carry one (``--wait=false``). Long names are the keys.
    """
    short = {"-n": "--namespace", "-p": "--patch", "-o": "--output", "-f": "--filename"}
    positional: list[str] = []
    flags: dict[str, str] = {}
    it = iter(args)
    for arg in it:
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        name, eq, value = arg.partition("=")
        name = short.get(name, name)
        if name in valued:
            flags[name] = value if eq else next(it, "")
        elif name in switches:
            flags[name] = value if eq else "true"
        else:
            raise NotHandled(arg)
    return Command(tuple(positional), flags)


def truthy(value: str | None) -> bool:
    """A boolean flag's value as kubectl reads it (``--wait`` is ``--wait=true``)."""
    if value is None:
        return False
    if value not in ("true", "false"):
        raise NotHandled(f"flag value {value}")
    return value == "true"


def printed(res: Resource) -> str:
    """How kubectl names a type in what it prints: ``configmap``, ``deployment.apps``."""
    return f"{res.kind.lower()}.{res.group}" if res.group else res.kind.lower()


class Writer:
    """kubectl's writes for one cluster, through its :class:`~testbed.reading.Reader`."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader

    def run(self, args: tuple[str, ...], input: str | None, timeout: float) -> Answer:
        """What ``kubectl <args>`` would answer, having done what it does.

        The server's warnings come first on stderr (``Warning: ...``), as kubectl prints them.
        """
        verb, rest = args[0], args[1:]
        warned: list[str] = []
        if verb == "delete" and input is None:
            answer = self.delete(rest, timeout, warned)
        elif verb == "create" and rest[:1] == ("namespace",) and input is None:
            answer = self.create_namespace(rest[1:], timeout, warned)
        elif verb == "create" and input is not None:
            answer = self.create(rest, input, timeout, warned)
        elif verb == "patch" and input is None:
            answer = self.patch(rest, timeout, warned)
        elif verb in ("label", "annotate") and input is None:
            answer = self.label(verb, rest, timeout, warned)
        else:
            raise NotHandled(verb)
        said = "".join(f"Warning: {text}\n" for text in warned)
        return Answer(answer.returncode, answer.stdout, said + answer.stderr)

    # create -------------------------------------------------------------------------------

    def create(self, args: tuple[str, ...], text: str, timeout: float,
               warned: list[str]) -> Answer:
        """``create [-n NS] -f - [-o json] [--dry-run=server] [--validate=...]``."""
        import yaml

        cmd = parse(args, frozenset({"--namespace", "--filename", "--output", "--dry-run",
                                     "--validate"}), frozenset())
        if cmd.positional or cmd.flags.get("--filename") != "-":
            raise NotHandled("create: not -f -")
        output = cmd.flags.get("--output")
        dry_run = cmd.flags.get("--dry-run")
        if output not in (None, "json") or dry_run not in (None, "server"):
            raise NotHandled("create: output or dry run")
        validation = {None: "Strict", "true": "Strict", "strict": "Strict",
                      "false": "Ignore", "ignore": "Ignore", "warn": "Warn"}
        if cmd.flags.get("--validate") not in validation:
            raise NotHandled("create: --validate")
        try:
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
        except (yaml.YAMLError, RecursionError) as err:  # deeper than PyYAML goes: kubectl's
            raise NotHandled(f"create: {type(err).__name__}") from err
        if len(docs) != 1 or not isinstance(docs[0], dict):
            raise NotHandled("create: not one object")
        obj = docs[0]
        res = self._resource_of(obj, timeout)
        meta = obj.get("metadata") or {}
        namespace = None
        if res.namespaced:
            given = cmd.flags.get("--namespace")
            namespace = meta.get("namespace") or given or self.reader.default_namespace
            if given and namespace != given:
                raise NotHandled("create: the object names another namespace")
        query = {"fieldManager": "kubectl-create",
                 "fieldValidation": validation[cmd.flags.get("--validate")]}
        if dry_run:
            query["dryRun"] = "All"
        status, body = self._request(res.path(namespace, None), timeout, query, "POST", obj,
                                     warned=warned)
        if status >= 400:
            return Answer(1, "", refusal("creating", body))
        if output == "json":
            return Answer(0, json.dumps(body, indent=4) + "\n", "")
        suffix = " (server dry run)" if dry_run else ""
        return Answer(0, f"{printed(res)}/{body['metadata']['name']} created{suffix}\n", "")

    def create_namespace(self, args: tuple[str, ...], timeout: float,
                         warned: list[str]) -> Answer:
        """``create namespace NAME``."""
        cmd = parse(args, frozenset(), frozenset())
        if len(cmd.positional) != 1:
            raise NotHandled("create namespace")
        name = cmd.positional[0]
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        status, _ = self._request("/api/v1/namespaces", timeout,
                                  {"fieldManager": "kubectl-create"}, "POST", body,
                                  warned=warned)
        if status >= 400:
            raise NotHandled(f"create namespace refused: {status}")
        return Answer(0, f"namespace/{name} created\n", "")

    # delete -------------------------------------------------------------------------------

    def delete(self, args: tuple[str, ...], timeout: float, warned: list[str]) -> Answer:
        """``delete TYPE[,TYPE] (NAME... | --all) | TYPE/NAME...``.

        With ``-n``, ``--wait`` and ``--ignore-not-found``; waiting (the default) until each
        object is gone.
        """
        cmd = parse(args, frozenset({"--namespace"}),
                    frozenset({"--all", "--wait", "--ignore-not-found"}))
        wait = truthy(cmd.flags.get("--wait", "true"))
        ignore = truthy(cmd.flags.get("--ignore-not-found"))
        every = truthy(cmd.flags.get("--all"))
        namespace = cmd.flags.get("--namespace") or self.reader.default_namespace
        targets = list(self._targets(cmd.positional, every, timeout))
        out: list[str] = []
        err: list[str] = []
        gone: list[tuple[Resource, str, str]] = []
        for res, name in targets:
            if name is None:  # --all: each object by name, as kubectl does
                status, listing = self._request(res.path(namespace, None), timeout)
                if status >= 400:
                    if not out and not err:
                        raise NotHandled(f"delete --all: list refused: {status}")
                    err.append(error_line(listing))
                    continue
                names = [str(i["metadata"]["name"]) for i in listing.get("items") or []]
            else:
                names = [name]
            for one in names:
                status, body = self._request(
                    res.path(namespace, one), timeout, None, "DELETE",
                    {"kind": "DeleteOptions", "apiVersion": "v1",
                     "propagationPolicy": "Background"}, warned=warned)
                if status == 404 and (ignore or every):
                    continue
                if status >= 400:
                    if not out and not err and status != 404:
                        raise NotHandled(f"delete refused: {status}")  # kubectl says why
                    err.append(error_line(body))
                    continue
                out.append(f'{printed(res)} "{one}" deleted\n')
                uid = (body.get("details") or {}).get("uid") if body.get("kind") == "Status" \
                    else (body.get("metadata") or {}).get("uid")
                gone.append((res, one, str(uid or "")))
        if every and not out and not err:
            return Answer(0, "No resources found\n", "")
        if wait:
            self._wait_gone(gone, namespace, timeout, args)
        return Answer(1 if err else 0, "".join(out), "".join(err))

    def _targets(self, positional: tuple[str, ...], every: bool, timeout: float
                 ) -> Iterator[tuple[Resource, str | None]]:
        if not positional:
            raise NotHandled("delete: nothing named")
        if all("/" in p for p in positional):
            if every:
                raise NotHandled("delete: --all with TYPE/NAME")
            for p in positional:
                kind, name = p.split("/", 1)
                yield self._resolve(kind, timeout), name
            return
        types = [self._resolve(t, timeout) for t in positional[0].split(",")]
        names = positional[1:]
        if every == bool(names) or (names and len(types) != 1):
            raise NotHandled("delete: names and --all, or several types with names")
        for res in types:
            if every:
                yield res, None
            for name in names:
                yield res, name

    def _wait_gone(self, gone: list[tuple[Resource, str, str]], namespace: str,
                   timeout: float, args: tuple[str, ...]) -> None:
        """Block until each deleted object is gone (or replaced by a new one of its name)."""
        deadline = time.monotonic() + timeout
        for res, name, uid in gone:
            while True:
                status, body = self._request(res.path(namespace, name), timeout)
                if status == 404 or (uid and (body.get("metadata") or {}).get("uid") != uid):
                    break
                if time.monotonic() > deadline:  # what the kubectl process would have hit
                    raise subprocess.TimeoutExpired(["kubectl", "delete", *args], timeout)
                time.sleep(WAIT_INTERVAL)

    # patch, label, annotate ---------------------------------------------------------------

    def patch(self, args: tuple[str, ...], timeout: float, warned: list[str]) -> Answer:
        """``patch TYPE NAME | TYPE/NAME -p PATCH [--type=...] [--subresource=...] [-n NS]``."""
        cmd = parse(args, frozenset({"--namespace", "--patch", "--type", "--subresource"}),
                    frozenset())
        res, name = self._one(cmd.positional, timeout)
        content_type = PATCH_TYPES.get(cmd.flags.get("--type", "strategic"))
        subresource = cmd.flags.get("--subresource")
        if content_type is None or "--patch" not in cmd.flags or subresource not in (
                None, "status", "scale"):
            raise NotHandled("patch: type, patch or subresource")
        try:
            patch = json.loads(cmd.flags["--patch"])
        except ValueError as err:
            raise NotHandled("patch: not JSON") from err
        path = res.path(self._namespace(res, cmd), name)
        if subresource:
            path += f"/{subresource}"
        status, before = self._request(path, timeout)
        if status >= 400:
            raise NotHandled(f"patch: read refused: {status}")
        status, after = self._request(
            path, timeout, {"fieldManager": "kubectl-patch", "fieldValidation": "Strict"},
            "PATCH", patch, content_type, warned=warned)
        if status >= 400:
            raise NotHandled(f"patch refused: {status}")  # nothing written: kubectl says why
        same = _version(before) == _version(after)
        return Answer(0, f"{printed(res)}/{name} patched{' (no change)' if same else ''}\n",
                      "")

    def label(self, verb: str, args: tuple[str, ...], timeout: float,
              warned: list[str]) -> Answer:
        """``label|annotate TYPE NAME KEY=VALUE... KEY-... [--overwrite] [-n NS]``."""
        cmd = parse(args, frozenset({"--namespace"}), frozenset({"--overwrite"}))
        split = 1 if cmd.positional and "/" in cmd.positional[0] else 2
        res, name = self._one(cmd.positional[:split], timeout)
        changes = cmd.positional[split:]
        overwrite = truthy(cmd.flags.get("--overwrite"))
        field = "labels" if verb == "label" else "annotations"
        if not changes:
            raise NotHandled(f"{verb}: nothing to change")
        path = res.path(self._namespace(res, cmd), name)
        status, live = self._request(path, timeout)
        if status >= 400:
            raise NotHandled(f"{verb}: read refused")
        current = dict((live.get("metadata") or {}).get(field) or {})
        wanted: dict[str, str | None] = {}
        for change in changes:
            key, eq, value = change.partition("=")
            if eq:
                if key in current and current[key] != value and not overwrite:
                    raise NotHandled(f"{verb}: {key} needs --overwrite")  # kubectl's error
                wanted[key] = value
            elif change.endswith("-") and change[:-1] in current:
                wanted[change[:-1]] = None
            else:
                raise NotHandled(f"{verb}: {change}")  # a removal of nothing, kubectl's words
        if all(current.get(k) == v for k, v in wanted.items()):
            return Answer(0, f"{printed(res)}/{name} not {PAST[verb]}\n", "")
        status, _ = self._request(
            path, timeout, {"fieldManager": f"kubectl-{verb}"}, "PATCH",
            {"metadata": {field: wanted}}, PATCH_TYPES["merge"], warned=warned)
        if status >= 400:
            raise NotHandled(f"{verb} refused: {status}")
        removed_only = all(v is None for v in wanted.values())
        done = "unlabeled" if removed_only and verb == "label" else PAST[verb]
        return Answer(0, f"{printed(res)}/{name} {done}\n", "")

    # helpers ------------------------------------------------------------------------------

    def _one(self, positional: tuple[str, ...], timeout: float) -> tuple[Resource, str]:
        if len(positional) == 1 and "/" in positional[0]:
            kind, name = positional[0].split("/", 1)
        elif len(positional) == 2 and "/" not in positional[0] and "," not in positional[0]:
            kind, name = positional
        else:
            raise NotHandled("not one TYPE NAME")
        return self._resolve(kind, timeout), name

    def _namespace(self, res: Resource, cmd: Command) -> str | None:
        if not res.namespaced:
            return None
        return cmd.flags.get("--namespace") or self.reader.default_namespace

    def _resolve(self, token: str, timeout: float) -> Resource:
        try:
            return self.reader.resolve(token, timeout)
        except (LookupError, OSError) as err:
            raise NotHandled(str(err)) from err

    def _resource_of(self, obj: dict[str, Any], timeout: float) -> Resource:
        api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
        group, _, version = api_version.rpartition("/")
        if not version or not kind:
            raise NotHandled("no apiVersion or kind")
        res = self._resolve(f"{kind}.{version}.{group}" if group else kind, timeout)
        if (res.group, res.version, res.kind) != (group, version, kind):
            raise NotHandled(f"{api_version} {kind} resolves to {res.api_version} {res.kind}")
        return res

    def _request(self, path: str, timeout: float, query: dict[str, str] | None = None,
                 method: str = "GET", body: Any = None, content_type: str = "application/json",
                 warned: list[str] | None = None) -> tuple[int, Any]:
        try:
            # The client encodes the body itself for every JSON content type.
            return self.reader.request(path, timeout, query, method=method, body=body,
                                       content_type=content_type if body is not None else None,
                                       warnings=warned)
        except OSError as err:  # unreachable: kubectl tries, and fails in its words
            raise NotHandled(str(err)) from err


def _version(obj: Any) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return str(meta.get("resourceVersion")) if isinstance(meta, dict) else None
