"""``model-serving-addon status|explain|clusters|rollout`` and ``kubectl modelserving ...``.

Reads the hub with the user's kubeconfig and context (``--kubeconfig``, ``--context``, else
``KUBECONFIG`` or ``~/.kube/config``), as the user: a read-only identity is enough for every
command but the rollout actions, which annotate the intent; ``render`` needs no hub at all.
Exit codes: 0 done (ready, for ``--wait-ready``; no difference, for ``diff``), 1 not ready
when the wait ended (or differences found), 2 bad arguments or input, 3 no kubeconfig or the
hub unreachable, 4 refused by the hub, 5 no such object.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from argcomplete import io as argcomplete_io
from argcomplete.finders import CompletionFinder
from kubernetes import config

from addon_api import constants as c
from addon_api.rollout import seconds
from addon_cli import check as checking
from addon_cli import endpoint, guard, offline, predict, views
from addon_cli import explain as explaining
from addon_cli.hub import (
    EXIT_NOT_FOUND,
    EXIT_NOT_READY,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    CliError,
    Hub,
)
from addon_manager.engine.status import ClusterInput, cluster_status
from addon_manager.facts import naming
from addon_manager.kinds.registry import parse as parse_work


def duration(text: str) -> float:
    """Seconds of a command-line duration: ``30``, ``2.5``, ``30s``, ``5m``, ``1h30m``."""
    try:
        value = float(text)
    except ValueError:
        try:
            value = seconds(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a duration such as 30, 30s, 5m or 1h30m") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration is not negative")
    return value


def _target(word: str | None) -> tuple[str | None, str | None]:
    """(kind, name) of ``KIND`` or ``KIND/NAME`` (None, None for nothing)."""
    if not word:
        return None, None
    kind, _, name = word.partition("/")
    try:
        return views.kind_of(kind), name or None
    except ValueError as err:
        raise CliError(EXIT_USAGE, str(err)) from err


def _namespace(args: argparse.Namespace) -> str | None:
    """The namespace to read: -n, none for -A, else the context's (as kubectl)."""
    if getattr(args, "all_namespaces", False):
        return None
    if args.namespace:
        return str(args.namespace)
    try:
        _, current = config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=args.kubeconfig)
        if args.context:
            contexts, _ = config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
                config_file=args.kubeconfig)
            current = next((x for x in contexts if x["name"] == args.context), current)
        return str((current.get("context") or {}).get("namespace") or "default")
    except Exception:
        return "default"


def _hub(args: argparse.Namespace) -> Hub:
    return Hub(args.kubeconfig, args.context, args.request_timeout)


def _colour(args: argparse.Namespace) -> bool:
    return bool(args.colour == "always" or (args.colour == "auto" and sys.stdout.isatty()))


def _print(text: str) -> None:
    sys.stdout.write(text.rstrip("\n") + "\n")
    sys.stdout.flush()


# status ---------------------------------------------------------------------------------------


def _read_intents(hub: Hub, kind: str | None, name: str | None, namespace: str | None
                  ) -> list[dict[str, Any]]:
    if kind and name:
        if namespace is None:
            found = [i for i in hub.intents(kind, None)
                     if (i.get("metadata") or {}).get("name") == name]
            if not found:
                raise CliError(5, f"not found: {views.short(kind)}/{name} in any namespace")
            return found
        return [hub.intent(kind, namespace, name)]
    out: list[dict[str, Any]] = []
    for each in [kind] if kind else list(views.KINDS):
        out += hub.intents(each, namespace)
    return out


def _beyond_the_cap(hub: Hub, intents: list[dict[str, Any]], cluster: str | None
                    ) -> list[views.Row]:
    """Rows for ``cluster`` of the intents whose status left it out (past its entry cap).

    An intent's status keeps at most 100 cluster entries (``clustersOmitted`` counts the
    rest): for one that omits clusters and has no entry for ``cluster``, its ManifestWork
    there is read and judged as the manager judges it. Without the rights to read works the
    row says so instead of the intent vanishing from the answer.
    """
    if cluster is None:
        return []
    out = []
    for intent in intents:
        status = intent.get("status") or {}
        if not status.get("clustersOmitted") or any(
                e.get("cluster") == cluster for e in status.get("clusters") or []):
            continue
        meta = intent.get("metadata") or {}
        kind, ns, name = str(intent.get("kind")), str(meta.get("namespace")), str(meta.get("name"))
        shown = len(status.get("clusters") or [])
        note = (f"not among the {shown} entries of its status "
                f"({status['clustersOmitted']} omitted)")
        try:
            works = hub.works(f"{c.LABEL_INTENT_KIND}={kind},{c.LABEL_INTENT_NAME}={name}",
                              cluster)
        except CliError as err:
            out.append(views.Row(kind, ns, name, cluster, "Unknown", False,
                                 detail=f"{note}; {err}"))
            continue
        wanted = naming.work_name(kind, ns, name)
        fact = next((parse_work(w) for w in works
                     if (w.get("metadata") or {}).get("name") == wanted), None)
        if fact is None:
            continue  # no work there: the intent is not on this cluster
        entry, _ = cluster_status(kind, ClusterInput(cluster, work=fact))
        row = views.rows([{**intent, "status": {"clusters": [entry.to_dict()]}}], cluster)
        out += [views.Row(**{**r.__dict__, "detail": f"{r.detail} ({note}; from its "
                             "ManifestWork)".strip()}) for r in row]
    return out


def _status_text(args: argparse.Namespace, intents: list[dict[str, Any]],
                 extra: Sequence[views.Row] = ()) -> str:
    found = sorted([*views.rows(intents, args.cluster), *extra], key=views.sort_key)
    if args.output in ("json", "yaml"):
        return _document({"items": [r.__dict__ for r in found]}, args.output)
    if args.output == "name":
        return "\n".join(views.object_names(found))
    if not found:
        return "no intents found" + (f" on cluster {args.cluster}" if args.cluster else "")
    return views.status_table(found, _colour(args), wide=args.output == "wide")


def cmd_status(args: argparse.Namespace) -> int:
    """The fleet as a table of intents x clusters (or wait until it is Ready)."""
    kind, name = _target(args.target)
    namespace = _namespace(args)
    hub = _hub(args)
    if args.wait_ready:
        deadline = time.monotonic() + args.timeout
        while True:
            intents = _read_intents(hub, kind, name, namespace)
            missing = views.not_ready(intents) if intents else ["no intents found"]
            if not missing:
                _print(_status_text(args, intents))
                return 0
            if time.monotonic() >= deadline:
                _print(_status_text(args, intents))
                listed = "\n  ".join(missing)
                sys.stderr.write(f"not ready after {args.timeout:.0f}s:\n  {listed}\n")
                return EXIT_NOT_READY
            time.sleep(args.interval)
    shown = ""
    while True:
        intents = _read_intents(hub, kind, name, namespace)
        text = _status_text(args, intents, _beyond_the_cap(hub, intents, args.cluster))
        if text != shown:
            if shown:
                _print(f"--- {time.strftime('%H:%M:%S')}")
            _print(text)
            shown = text
        if not args.watch:
            return 0
        time.sleep(args.interval)


# clusters -------------------------------------------------------------------------------------


def cmd_clusters(args: argparse.Namespace) -> int:
    """Each managed cluster: add-on health, platform and version, intents on it, stale."""
    hub = _hub(args)
    addons = {str((a.get("metadata") or {}).get("namespace")): a for a in hub.addons()}
    intents = _read_intents(hub, None, None, None)
    platforms = explaining.platforms(i for i in intents if i.get("kind") == c.KIND_MODEL_SERVING)
    found = views.cluster_rows(hub.clusters(), addons, platforms, intents)
    if args.output in ("json", "yaml"):
        _print(_document({"items": [r.__dict__ for r in found]}, args.output))
    else:
        _print(views.clusters_table(found, _colour(args)) if found else "no managed clusters")
    return 0


# explain --------------------------------------------------------------------------------------


def _named(args: argparse.Namespace, verb: str) -> tuple[Hub, str, str, str]:
    """(hub, kind, namespace, name) of a command about one intent (``KIND/NAME``)."""
    kind, name = _target(args.target)
    if not (kind and name):
        raise CliError(EXIT_USAGE, f"{verb} needs KIND/NAME (for example mcisvc/sklearn-iris)")
    return _hub(args), kind, _namespace(args) or "default", name


def _document(doc: dict[str, Any], output: str) -> str:
    """``doc`` as ``-o json`` or ``-o yaml`` prints it."""
    return json.dumps(doc, indent=2) if output == "json" else yaml.safe_dump(doc, sort_keys=False)


def cmd_explain(args: argparse.Namespace) -> int:
    """The chain from the intent to one cluster, each link with its evidence."""
    hub, kind, namespace, name = _named(args, "explain")
    links = explaining.chain(hub, hub.intent(kind, namespace, name), args.cluster)
    if args.output in ("json", "yaml"):
        _print(_document({"links": [link.__dict__ for link in links]}, args.output))
    else:
        _print(explaining.render(links, _colour(args)))
    return 0


# predict --------------------------------------------------------------------------------------


def cmd_predict(args: argparse.Namespace) -> int:
    """Send one input to the model on each cluster (or those named); print the answers.

    Exit 0 when every cluster answered with a 2xx, 1 otherwise.
    """
    hub, kind, namespace, name = _named(args, "predict")
    if kind != c.KIND_INFERENCE_SERVICE:
        raise CliError(EXIT_USAGE, "predict sends to models: give mcisvc/NAME")
    try:
        raw = sys.stdin.read() if args.filename == "-" else Path(args.filename).read_text()
        body = json.loads(raw)
    except (OSError, ValueError) as err:
        raise CliError(EXIT_USAGE, f"cannot read the input {args.filename}: {err}") from err
    if not isinstance(body, dict):
        raise CliError(EXIT_USAGE, "the input must be a JSON object")
    path = predict.path_of(predict.protocol_of(body, args.protocol), name)
    if args.endpoint:
        if args.cluster or args.via:
            raise CliError(EXIT_USAGE, "--endpoint sends through the fleet endpoint, which "
                           "picks the cluster: not with --cluster or --via")
        sent = [predict.fleet_target(name, namespace, path, args.endpoint, args.domain)]
    else:
        sent = predict.targets(hub.intent(kind, namespace, name), path, args.cluster or [],
                               predict.parse_via(args.via or []))
    answers = [predict.send(t, body, args.timeout) for t in sent]
    if args.output in ("json", "yaml"):
        _print(_document({"items": [{**a.__dict__, "url": t.url, "host": t.host}
                                    for a, t in zip(answers, sent, strict=True)]},
                         args.output))
    else:
        _print(predict.table(answers))
    return 0 if all(a.ok for a in answers) else EXIT_NOT_READY


# endpoint -------------------------------------------------------------------------------------


def cmd_endpoint(args: argparse.Namespace) -> int:
    """A model's fleet endpoint.

    ``endpoint show mcisvc/NAME``: its serving set; ``endpoint serve``: HAProxy as the fleet's
    endpoint for every model, kept to the hub's serving sets.
    """
    if args.action == "serve":
        from addon_cli import endpoint_serve

        try:
            via = endpoint.parse_via(args.via or [])
        except ValueError as err:
            raise CliError(EXIT_USAGE, str(err)) from err
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
        hub = Hub(args.kubeconfig, args.context, timeout=args.request_timeout)
        return endpoint_serve.run(hub, args.haproxy, Path(args.run_dir), via, args.domain,
                                  args.listen, int(args.check_interval * 1000))
    if not args.target:
        raise CliError(EXIT_USAGE, "endpoint show needs mcisvc/NAME")
    hub, kind, namespace, name = _named(args, "endpoint")
    if kind != c.KIND_INFERENCE_SERVICE:
        raise CliError(EXIT_USAGE, "only models have endpoints: give mcisvc/NAME")
    intent = hub.intent(kind, namespace, name)
    found = (intent.get("status") or {}).get("endpoint")
    if args.output in ("json", "yaml"):
        _print(_document(found or {}, args.output))
    else:
        _print(endpoint.show(intent))
    return 0 if found and found.get("serving") else EXIT_NOT_READY


# rollout --------------------------------------------------------------------------------------


def cmd_rollout(args: argparse.Namespace) -> int:
    """Status, history and the manual actions of a progressive rollout."""
    hub, kind, namespace, name = _named(args, "rollout")
    intent = hub.intent(kind, namespace, name)
    roll = (intent.get("status") or {}).get("rollout") or {}
    what = f"{views.short(kind)}/{name}"
    if args.action == "status":
        return _rollout_status(args, hub, (kind, namespace, name), intent)
    if args.action == "history":
        revisions = hub.revisions(kind, namespace, name)
        _print(explaining.history_text(revisions, roll) if revisions
               else f"{what} has no revisions (its rollout strategy is All)")
        return 0
    try:
        annotations, done = views.rollout_action(args.action, what, roll, args.to_revision)
    except ValueError as err:
        raise CliError(EXIT_USAGE, str(err)) from err
    hub.annotate(kind, namespace, name, annotations)
    _print(done)
    return 0


def _rollout_status(args: argparse.Namespace, hub: Hub, key: tuple[str, str, str],
                    intent: dict[str, Any]) -> int:
    """Print where the rollout stands, on every change; with --watch, until it is done.

    Exit 0 when done, 1 when it failed or the wait ended first (``--timeout``).
    """
    deadline, shown = time.monotonic() + args.timeout, ""
    while True:
        outcome, why = explaining.rollout_outcome(intent)
        if args.output in ("json", "yaml"):
            text = _document({"outcome": outcome, "reason": why,
                              "rollout": (intent.get("status") or {}).get("rollout") or {}},
                             args.output)
        else:
            text = explaining.rollout_text(intent)
        if text != shown and (args.output == "table" or outcome != "waiting"
                              or not args.watch):
            _print(text)
            shown = text
        if outcome == "failed":
            return EXIT_NOT_READY
        if outcome == "done" or not args.watch:
            return 0
        if time.monotonic() >= deadline:
            if text != shown:
                _print(text)
            sys.stderr.write(f"not done after {args.timeout:.0f}s: {why}\n")
            return EXIT_NOT_READY
        time.sleep(args.interval)
        intent = hub.intent(*key)


# check ----------------------------------------------------------------------------------------


def _read(fn: Callable[[], Any]) -> Any:
    """What ``fn`` read, or :class:`checking.Unreadable` with why not."""
    try:
        return fn()
    except CliError as err:
        return checking.Unreadable(str(err))


def cmd_check(args: argparse.Namespace) -> int:
    """Preflight and health: the hub, OCM, the chart, the manager, each cluster's add-on.

    Exit 1 when a check failed; a read refused to the user is UNKNOWN, not a failure.
    """
    hub = _hub(args)
    version = _read(hub.server_version)
    if isinstance(version, checking.Unreadable) and "could not reach" in str(version):
        raise CliError(EXIT_UNREACHABLE, str(version))
    found: list[checking.Check] = [
        checking.kubernetes(version) if isinstance(version, str) else
        checking.Check("hub Kubernetes version", "UNKNOWN", str(version))]
    served = {gv: _read(functools.partial(hub.served, gv))
              for gv in [*checking.OCM_APIS, f"{c.GROUP}/{c.VERSION}"]}
    found += checking.apis(served)
    found.append(checking.executor(_read(hub.work_schema)))
    found.append(checking.registration(_read(hub.registration)))
    found.append(checking.manager(_read(lambda: _read_intents(hub, None, None, None))))
    found.append(checking.clusters(_read(hub.addons)))
    if args.output in ("json", "yaml"):
        _print(_document({"checks": [x.__dict__ for x in found]}, args.output))
    else:
        _print(views.table(["STATE", "CHECK", "SEEN", "WHAT TO DO"],
                           [[x.state, x.name, x.seen, x.todo] for x in found],
                           _colour(args), coloured=(0,)))
    return EXIT_NOT_READY if checking.failed(found) else 0


# uninstall-guard ------------------------------------------------------------------------------


def cmd_uninstall_guard(args: argparse.Namespace) -> int:
    """The chart's pre-delete hook: exit 0 only when no intent is left on the hub.

    Intents being deleted are waited for (the manager still runs during the hook) up to
    ``--timeout``; any other intent refuses the uninstall (exit 1), naming them. A hub it
    cannot read refuses too (the error's exit code): the guard never lets an uninstall through
    on what it could not see. A kind the hub does not serve (its CRD deleted) has none left.
    """
    hub = _hub(args)
    deadline = time.monotonic() + args.timeout

    def intents() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for kind in views.KINDS:
            try:
                out += hub.intents(kind, None)
            except CliError as err:
                if err.code != EXIT_NOT_FOUND:
                    raise
                # The kind is not served (its CRD was deleted): none of it is left.
        return out

    while True:
        decided = guard.verdict(intents())
        _print(decided.message)
        if decided.proceed:
            return 0
        if not decided.wait:
            return EXIT_NOT_READY
        if time.monotonic() + args.interval > deadline:
            _print(f"refusing to uninstall: the intents being deleted were not gone after "
                   f"{args.timeout:.0f}s; see `model-serving-addon status -A`")
            return EXIT_NOT_READY
        time.sleep(args.interval)


# version --------------------------------------------------------------------------------------


def cmd_version(args: argparse.Namespace) -> int:
    """Print the command's version and the chart's on the hub (from the registration)."""
    try:
        client = metadata.version("model-serving-addon")
    except metadata.PackageNotFoundError:
        client = "unknown (not installed as a package)"
    found: dict[str, Any] = {"client": client}
    code = 0
    if not args.client:
        try:
            labels = (_hub(args).registration().get("metadata") or {}).get("labels") or {}
            found["hub"] = {"chart": labels.get("helm.sh/chart", "unknown"),
                            "appVersion": labels.get("app.kubernetes.io/version", "unknown")}
        except CliError as err:
            found["hub"] = {"error": str(err)}
            code = err.code
    if args.output in ("json", "yaml"):
        _print(_document(found, args.output))
    else:
        lines = [f"client: {client}"]
        hub = found.get("hub")
        if hub and "error" in hub:
            lines.append(f"hub: {hub['error']}")
        elif hub:
            lines.append(f"hub: chart {hub['chart']}, app {hub['appVersion']}")
        _print("\n".join(lines))
    return code


# render and diff ------------------------------------------------------------------------------


def _intents_in(files: Sequence[str], namespace: str | None) -> list[Any]:
    out = []
    for path in files:
        try:
            text = sys.stdin.read() if path == "-" else Path(path).read_text()
            docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
        except (OSError, yaml.YAMLError) as err:
            raise CliError(EXIT_USAGE, f"cannot read {path}: {err}") from err
        for doc in docs:
            if doc.get("kind") not in views.MODELS:
                sys.stderr.write(f"{path}: skipping {doc.get('kind')} "
                                 f"{(doc.get('metadata') or {}).get('name')} (not an intent)\n")
                continue
            try:
                out.append(offline.intent_of(doc, namespace))
            except offline.RenderFailed as err:
                raise CliError(EXIT_USAGE, f"{path}: {err}") from err
    if not out:
        raise CliError(EXIT_USAGE, f"no intent in {', '.join(files)}")
    return out


def _dump(docs: list[dict[str, Any]], output: str) -> str:
    if output == "json":
        return json.dumps(docs[0] if len(docs) == 1 else {"items": docs}, indent=2)
    return yaml.safe_dump_all(docs, sort_keys=False)


def cmd_render(args: argparse.Namespace) -> int:
    """The ManifestWorks the manager would write, offline."""
    if not args.cluster:
        raise CliError(EXIT_USAGE, "name at least one --cluster NAME[=KEY=VALUE,...]")
    try:
        clusters = [offline.parse_cluster(a) for a in args.cluster]
        works = [w for intent in _intents_in(args.filename, args.namespace)
                 for w in offline.render_all(intent, clusters, args.revision,
                                             args.target_namespaces, args.agent_namespace)]
    except offline.RenderFailed as err:
        raise CliError(EXIT_USAGE, str(err)) from err
    _print(_dump(works, args.output))
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    """Each cluster's difference between the hub's works and what the files render."""
    hub = _hub(args)
    labels = {str((m.get("metadata") or {}).get("name")): dict(
        (m.get("metadata") or {}).get("labels") or {}) for m in hub.clusters()}
    changed = False
    schema = hub.work_schema()
    for intent in _intents_in(args.filename, _namespace(args)):
        kind, ns, name = type(intent).__name__, str(intent.metadata.namespace), str(
            intent.metadata.name)
        placement = intent.spec.placement_ref.name
        selected = sorted({str(d.get("clusterName")) for pd in hub.decisions(ns, placement)
                           for d in (pd.get("status") or {}).get("decisions") or []})
        on_hub = {str((w.get("metadata") or {}).get("namespace")): w for w in hub.works(
            f"{c.LABEL_INTENT_KIND}={kind},{c.LABEL_INTENT_NAMESPACE}={ns},"
            f"{c.LABEL_INTENT_NAME}={name}")}
        try:
            diffs = offline.diff(intent, [(cl, labels.get(cl, {})) for cl in selected], on_hub,
                                 schema)
        except offline.RenderFailed as err:
            raise CliError(EXIT_USAGE, str(err)) from err
        what = f"{views.short(kind)}/{name} in {ns}"
        if not any(diffs.values()):
            _print(f"{what}: no difference on {len(diffs)} cluster(s)")
        for cluster, text in diffs.items():
            if text:
                changed = True
                _print(f"{what} on {cluster}:\n{text}")
    return EXIT_NOT_READY if changed else 0


# the command line -----------------------------------------------------------------------------


def _common(p: argparse.ArgumentParser, namespaced: bool = True,
            outputs: Sequence[str] = ("table", "json", "yaml")) -> None:
    p.add_argument("--kubeconfig", help="kubeconfig file (default: KUBECONFIG, ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: the current one)")
    p.add_argument("--request-timeout", type=duration, default=15.0, metavar="D",
                   help="how long one request to the hub may take (default 15s)")
    p.add_argument("-o", "--output", choices=outputs, default="table")
    p.add_argument("--colour", "--color", choices=("auto", "always", "never"), default="auto",
                   help="colour the phases (auto: when writing to a terminal)")
    if namespaced:
        p.add_argument("-n", "--namespace", help="the intents' namespace (default: the "
                       "context's)")


def _waits(p: argparse.ArgumentParser, timeout: str, timeout_help: str,
           interval_help: str) -> None:
    """``--timeout`` (default ``timeout``) and ``--interval`` (default 2s) of a waiting command."""
    p.add_argument("--timeout", type=duration, default=duration(timeout), metavar="D",
                   help=f"{timeout_help} (30s, 5m; default {timeout})")
    p.add_argument("--interval", type=duration, default=2.0, metavar="D",
                   help=f"{interval_help} (default 2s)")


def _short_duration(text: str) -> float:
    """Seconds of a duration that may also be in milliseconds (``500ms``)."""
    if text.endswith("ms") and text[:-2].isdigit() and int(text[:-2]) > 0:
        return int(text[:-2]) / 1000
    return duration(text)


def parser(prog: str = "model-serving-addon") -> argparse.ArgumentParser:
    """The fleet commands' parser."""
    top = argparse.ArgumentParser(prog=prog, description="The model-serving fleet, from the hub.")
    add_commands(top.add_subparsers(dest="command", required=True))
    return top


def add_commands(sub: Any) -> None:
    """Add the fleet commands to ``sub`` (an argparse subparsers action)."""
    st = sub.add_parser("status", help="intents x clusters: phase, ready, URL, revision, why not")
    _common(st, outputs=("table", "wide", "name", "json", "yaml"))
    st.add_argument("target", nargs="?", help="KIND or KIND/NAME (default: every intent)")
    st.add_argument("-A", "--all-namespaces", action="store_true")
    st.add_argument("--cluster", help="only this cluster's rows")
    st.add_argument("--watch", "-w", action="store_true", help="print again on every change")
    st.add_argument("--wait-ready", action="store_true",
                    help="wait until every intent shown is Ready everywhere; exit 1 if not "
                    "within --timeout")
    _waits(st, "5m", "how long --wait-ready waits",
           "time between reads for --watch and --wait-ready")
    st.set_defaults(run=cmd_status)

    ex = sub.add_parser("explain", help="why an intent is (not) serving on one cluster")
    _common(ex)
    ex.add_argument("target", help="KIND/NAME")
    ex.add_argument("--cluster", required=True)
    ex.set_defaults(run=cmd_explain)

    pr = sub.add_parser("predict", help="send a JSON input to a model on each cluster, print "
                        "the answers and latency (exit 1 unless every cluster answered)")
    _common(pr)
    pr.add_argument("target", help="mcisvc/NAME")
    pr.add_argument("-f", "--filename", required=True,
                    help="the JSON input (V1 instances or V2 inputs; - for stdin)")
    pr.add_argument("--cluster", action="append",
                    help="send only to this cluster (repeatable; default: every cluster with "
                    "a URL on the hub)")
    pr.add_argument("--via", action="append", metavar="CLUSTER=BASE",
                    help="send CLUSTER's request to BASE (an ingress) with the model's host "
                    "in the Host header (repeatable)")
    pr.add_argument("--protocol", choices=("v1", "v2"),
                    help="the inference protocol (default: from the input's shape)")
    pr.add_argument("--endpoint", metavar="BASE",
                    help="send one request through the fleet endpoint at BASE (endpoint "
                    "serve's http://HOST:PORT), which picks the cluster and names it")
    pr.add_argument("--domain", default="fleet.local",
                    help="the fleet endpoint's domain (its --domain; default fleet.local)")
    pr.add_argument("--timeout", type=duration, default=30.0, metavar="D",
                    help="how long each cluster may take to answer (default 30s)")
    pr.set_defaults(run=cmd_predict)

    en = sub.add_parser("endpoint", help="a model's fleet endpoint: show its serving set, or "
                        "serve every model through HAProxy kept to the hub")
    _common(en)
    en.add_argument("action", choices=("show", "serve"))
    en.add_argument("target", nargs="?", help="mcisvc/NAME (show)")
    en.add_argument("--listen", default="127.0.0.1:8088",
                    help="serve: where HAProxy listens (default 127.0.0.1:8088)")
    en.add_argument("--domain", default="fleet.local",
                    help="serve: a model answers at NAME.NAMESPACE.DOMAIN (default fleet.local)")
    en.add_argument("--via", action="append", metavar="CLUSTER=BASE",
                    help="serve: send CLUSTER's requests to BASE (its ingress) with the model's "
                    "host (repeatable; default: the host of the model's URL)")
    en.add_argument("--haproxy", default="haproxy", help="serve: the HAProxy binary")
    en.add_argument("--run-dir", default="./endpoint-run",
                    help="serve: HAProxy's configuration, map, sockets and saved state")
    en.add_argument("--check-interval", type=_short_duration, default=0.5, metavar="D",
                    help="serve: HAProxy's health checks of each cluster (500ms, 2s; default "
                    "500ms)")
    en.set_defaults(run=cmd_endpoint)

    cl = sub.add_parser("clusters", help="managed clusters: add-on, platform, intents, stale")
    _common(cl, namespaced=False)
    cl.set_defaults(run=cmd_clusters)

    ro = sub.add_parser("rollout", help="a progressive rollout: status, history, actions")
    ro.add_argument("action", choices=("status", "history", "pause", "resume", "undo",
                                       "approve"))
    ro.add_argument("target", help="KIND/NAME")
    _common(ro)
    ro.add_argument("--to-revision", type=int, help="undo: the revision to return to "
                    "(default: the last good one)")
    ro.add_argument("--watch", "-w", action=argparse.BooleanOptionalAction, default=True,
                    help="status: wait until the rollout is done (exit 0) or failed (exit 1); "
                    "--no-watch prints where it stands once")
    _waits(ro, "10m", "status: how long to wait (then exit 1)", "status: time between reads")
    ro.set_defaults(run=cmd_rollout)

    rd = sub.add_parser("render", help="the ManifestWorks the manager would write (no hub)")
    rd.add_argument("-f", "--filename", action="append", required=True,
                    help="intent YAML (several documents allowed; - for stdin)")
    rd.add_argument("--cluster", action="append", default=[], metavar="NAME[=K=V,...]",
                    help="a cluster and its labels (repeat for more)")
    rd.add_argument("-n", "--namespace", help="for intents that name none (default: default)")
    rd.add_argument("--revision", type=int, help="mark the works with this rollout revision")
    rd.add_argument("--target-namespaces", default="", metavar="POLICY",
                    help="the manager's --target-namespaces (chart: manager.policy."
                    "targetNamespaces): a tenant's works are applied as its executor unless "
                    "it may target any namespace (default: empty, as the manager's)")
    rd.add_argument("--agent-namespace", default=c.AGENT_NAMESPACE,
                    help="the clusters' agent namespace (where executors and sealed "
                    f"connections live; default {c.AGENT_NAMESPACE})")
    rd.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    rd.set_defaults(run=cmd_render)

    ck = sub.add_parser("check", help="preflight and health: hub version, OCM APIs, the chart, "
                        "the manager, the add-on on each cluster (exit 1 when a check fails)")
    _common(ck, namespaced=False)
    ck.set_defaults(run=cmd_check)

    ug = sub.add_parser("uninstall-guard", help="the chart's pre-delete hook: exit 0 when no "
                        "intent is left on the hub, wait for those being deleted, else refuse "
                        "(exit 1) naming them")
    _common(ug, namespaced=False, outputs=("table",))
    _waits(ug, "5m", "how long to wait for the intents being deleted",
           "how often to read them again")
    ug.set_defaults(run=cmd_uninstall_guard)

    ve = sub.add_parser("version", help="this command's version and the hub's (the chart "
                        "installed there)")
    _common(ve, namespaced=False)
    ve.add_argument("--client", action="store_true", help="only this command's version")
    ve.set_defaults(run=cmd_version)

    df = sub.add_parser("diff", help="what the files would change in the hub's works, per "
                        "cluster (exit 1 when anything would)")
    _common(df)
    df.add_argument("-f", "--filename", action="append", required=True)
    df.set_defaults(run=cmd_diff)


def main(argv: Sequence[str] | None = None, prog: str = "model-serving-addon") -> int:
    """Run one fleet command; its exit code."""
    args = parser(prog).parse_args(list(sys.argv[1:] if argv is None else argv))
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except CliError as err:
        sys.stderr.write(f"error: {err}\n")
        return err.code
    except KeyboardInterrupt:
        return 130


class _Finder(CompletionFinder):
    """argcomplete's finder, its debug output on the current stderr.

    Its default opens file descriptor 9 (the shell's debug channel) and closes it when done;
    in a process that did not get fd 9 from argcomplete's shell code it is someone else's.
    """

    def _init_debug_stream(self) -> None:
        argcomplete_io.debug_stream = sys.stderr  # this process's stderr now


_FINDER = _Finder()


def complete(top: argparse.ArgumentParser, words: Sequence[str]) -> list[str]:
    """Complete the last of ``words`` (the command line after the program) for ``top``.

    The completions argcomplete computes, without their descriptions.
    """
    line = " ".join(["prog", *words])
    out = io.StringIO()
    saved = dict(os.environ)
    os.environ.update({"_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line)),
                       "_ARGCOMPLETE_IFS": "\n", "_ARGCOMPLETE_SHELL": "fish"})
    try:
        _FINDER(top, exit_method=lambda code: None, output_stream=out)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return [w.split("\t")[0].strip() for w in out.getvalue().split("\n") if w.strip()]


def kubectl_complete() -> int:
    """Complete ``kubectl modelserving`` arguments (``kubectl_complete-modelserving``).

    kubectl (1.26+) runs it with the words typed so far and reads one completion per line,
    then cobra's directive (4: no file names).
    """
    args = sys.argv[1:]
    if args[:1] == ["__complete"]:
        args = args[1:]
    for word in complete(parser("kubectl modelserving"), args):
        sys.stdout.write(word + "\n")
    sys.stdout.write(":4\n")
    return 0


def kubectl_plugin() -> int:
    """``kubectl modelserving ...`` (the ``kubectl-modelserving`` executable)."""
    return main(prog="kubectl modelserving")
