"""Reading (and, for rollout commands, annotating) the hub as the user, with clear failures.

Every call goes through :class:`Hub`, which loads the user's kubeconfig and context the way
kubectl does and turns the API's refusals into :class:`CliError` with an exit code a script
can test: the hub unreachable, the user not allowed, the object not there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from addon_api import constants as c
from addon_cli.views import KINDS

EXIT_NOT_READY = 1
"""``--wait-ready`` timed out (or a check found what it looked for missing)."""
EXIT_USAGE = 2
"""Bad arguments (argparse's own code)."""
EXIT_UNREACHABLE = 3
"""No kubeconfig, or the hub did not answer."""
EXIT_FORBIDDEN = 4
"""The hub refused the user (401/403)."""
EXIT_NOT_FOUND = 5
"""The named object does not exist."""
WORK_READER_ROLE = "model-serving-addon-work-reader"
"""The chart's ClusterRole that reads ManifestWorks (cluster-wide: RBAC cannot select the
add-on's by label), apart from the viewer role (docs/security.md)."""

WORK = ("work.open-cluster-management.io", "v1", "manifestworks")
WORK_CRD = "manifestworks.work.open-cluster-management.io"
CLUSTER = ("cluster.open-cluster-management.io", "v1", "managedclusters")
ADDON = ("addon.open-cluster-management.io", "v1alpha1", "managedclusteraddons")
REGISTRATION = ("addon.open-cluster-management.io", "v1alpha1", "clustermanagementaddons")
PLACEMENT = ("cluster.open-cluster-management.io", "v1beta1", "placements")
DECISION = ("cluster.open-cluster-management.io", "v1beta1", "placementdecisions")
BINDING = ("cluster.open-cluster-management.io", "v1beta2", "managedclustersetbindings")


class CliError(Exception):
    """A failure to report in one line, with the exit code to end with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Hub:
    """The hub, as the user's kubeconfig (``KUBECONFIG`` or ``~/.kube/config``) reaches it."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None,
                 timeout: float = 15.0, configuration: client.Configuration | None = None
                 ) -> None:
        if configuration is not None:  # a caller that knows the user's credentials (console)
            self._connect(configuration, timeout)
            return
        cfg = client.Configuration()
        try:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context, client_configuration=cfg)
        except (ConfigException, OSError, TypeError) as err:
            if kubeconfig or context or "KUBERNETES_SERVICE_HOST" not in os.environ:
                raise CliError(EXIT_UNREACHABLE, f"no usable kubeconfig: {err}") from err
            # In a pod without a kubeconfig (the chart's `helm test`): its ServiceAccount.
            try:
                config.load_incluster_config(  # type: ignore[no-untyped-call]
                    client_configuration=cfg)
            except ConfigException as inner:
                raise CliError(EXIT_UNREACHABLE, f"no usable kubeconfig ({err}) and no "
                               f"in-cluster ServiceAccount ({inner})") from inner
        self._connect(cfg, timeout)

    def _connect(self, cfg: client.Configuration, timeout: float) -> None:
        cfg.retries = 0
        self.host = str(cfg.host)
        self.api = client.ApiClient(cfg)
        self.custom = client.CustomObjectsApi(self.api)
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.timeout = timeout

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, _request_timeout=self.timeout, **kwargs)
        except ApiException as err:
            if err.status in (401, 403):
                raise CliError(EXIT_FORBIDDEN, f"the hub refused to let you {what}: "
                               f"{_message(err)}") from err
            if err.status == 404:
                raise CliError(EXIT_NOT_FOUND, f"not found: {what} ({_message(err)})") from err
            raise CliError(EXIT_UNREACHABLE, f"could not {what}: HTTP {err.status} "
                           f"{_message(err)}") from err
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise CliError(EXIT_UNREACHABLE,
                           f"could not reach the hub at {self.host} to {what}: {err}") from err

    # intents ----------------------------------------------------------------------------------

    def intents(self, kind: str, namespace: str | None) -> list[dict[str, Any]]:
        """Every intent of ``kind`` (in ``namespace``; None: all namespaces)."""
        plural = KINDS[kind].plural
        what = f"list {plural}" + (f" in namespace {namespace}" if namespace else "")
        if namespace:
            got = self._call(what, self.custom.list_namespaced_custom_object, c.GROUP,
                             c.VERSION, namespace, plural)
        else:
            got = self._call(what, self.custom.list_cluster_custom_object, c.GROUP, c.VERSION,
                             plural)
        return [dict(i) for i in got.get("items") or []]

    def intent(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        """One intent."""
        plural = KINDS[kind].plural
        got: dict[str, Any] = self._call(
            f"get {plural} {name} in namespace {namespace}",
            self.custom.get_namespaced_custom_object, c.GROUP, c.VERSION, namespace, plural,
            name)
        return got

    def annotate(self, kind: str, namespace: str, name: str,
                 annotations: dict[str, str | None]) -> None:
        """Set (or, for None, remove) annotations of one intent."""
        plural = KINDS[kind].plural
        self._call(f"annotate {plural} {name} in namespace {namespace}",
                   self.custom.patch_namespaced_custom_object, c.GROUP, c.VERSION, namespace,
                   plural, name, {"metadata": {"annotations": annotations}})

    def events(self, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
        """The hub's Events about one object, oldest first."""
        got = self._call(
            f"list events in namespace {namespace}", self.core.list_namespaced_event, namespace,
            field_selector=f"involvedObject.kind={kind},involvedObject.name={name}")
        items = [self.api.sanitize_for_serialization(e)  # type: ignore[no-untyped-call]
                 for e in got.items]
        return sorted(items, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime")
                                               or ""))

    def revisions(self, kind: str, namespace: str, name: str) -> list[dict[str, Any]]:
        """The ControllerRevisions the manager keeps for one intent, oldest first."""
        got = self._call(
            f"list controllerrevisions in namespace {namespace}",
            self.apps.list_namespaced_controller_revision, namespace,
            label_selector=f"{c.LABEL_INTENT_KIND}={kind},{c.LABEL_INTENT_NAME}={name}")
        items = [self.api.sanitize_for_serialization(r)  # type: ignore[no-untyped-call]
                 for r in got.items]
        return sorted(items, key=lambda r: int(r.get("revision") or 0))

    # the fleet --------------------------------------------------------------------------------

    def _list(self, what: str, resource: tuple[str, str, str], namespace: str | None = None,
              **kwargs: Any) -> list[dict[str, Any]]:
        group, version, plural = resource
        if namespace:
            got = self._call(what, self.custom.list_namespaced_custom_object, group, version,
                             namespace, plural, **kwargs)
        else:
            got = self._call(what, self.custom.list_cluster_custom_object, group, version,
                             plural, **kwargs)
        return [dict(i) for i in got.get("items") or []]

    def _get(self, what: str, resource: tuple[str, str, str], namespace: str | None,
             name: str) -> dict[str, Any]:
        group, version, plural = resource
        if namespace:
            got: dict[str, Any] = self._call(
                what, self.custom.get_namespaced_custom_object, group, version, namespace,
                plural, name)
        else:
            got = self._call(what, self.custom.get_cluster_custom_object, group, version,
                             plural, name)
        return got

    def clusters(self) -> list[dict[str, Any]]:
        """Every ManagedCluster."""
        return self._list("list managedclusters", CLUSTER)

    def cluster(self, name: str) -> dict[str, Any]:
        """One ManagedCluster."""
        return self._get(f"get managedcluster {name}", CLUSTER, None, name)

    def server_version(self) -> str:
        """The hub's Kubernetes version (``v1.34.12``)."""
        got = self._call("read the server version", client.VersionApi(self.api).get_code)
        return str(got.git_version)

    def served(self, group_version: str) -> list[str]:
        """The resources the hub serves in one API group version (discovery)."""
        group, _, version = group_version.partition("/")
        got = self._call(f"discover {group_version}", self.custom.get_api_resources, group,
                         version)
        found = self.api.sanitize_for_serialization(got)  # type: ignore[no-untyped-call]
        return [str(r["name"]) for r in found.get("resources") or []
                if "/" not in str(r["name"])]

    def registration(self) -> dict[str, Any]:
        """The add-on's ClusterManagementAddOn (the chart labels it with its versions)."""
        return self._get(f"get clustermanagementaddon {c.ADDON_NAME}", REGISTRATION, None,
                         c.ADDON_NAME)

    def addons(self) -> list[dict[str, Any]]:
        """The add-on's ManagedClusterAddOn on every cluster where it is enabled."""
        return self._list("list managedclusteraddons", ADDON,
                          field_selector=f"metadata.name={c.ADDON_NAME}")

    def works(self, selector: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """The add-on's ManifestWorks that ``selector`` selects.

        Needs the chart's :data:`WORK_READER_ROLE` (or more): the fleet viewer role reads no
        ManifestWorks, and a refusal says which role reads them.
        """
        try:
            return self._list("list manifestworks", WORK, namespace,
                              label_selector=f"{c.LABEL_MANAGED_BY}={c.FIELD_MANAGER},{selector}")
        except CliError as err:
            raise _work_refusal(err) from err

    def work_schema(self) -> dict[str, Any]:
        """The hub's ManifestWork schema (its OpenAPI v3 schema, served version v1)."""
        api = client.ApiextensionsV1Api(self.api)
        try:
            crd = self._call(f"get customresourcedefinition {WORK_CRD}",
                             api.read_custom_resource_definition, WORK_CRD)
        except CliError as err:
            raise _work_refusal(err) from err
        for version in crd.spec.versions:
            if version.name == WORK[1] and version.schema is not None:
                schema: dict[str, Any] = self.api.sanitize_for_serialization(  # type: ignore[no-untyped-call]
                    version.schema.open_apiv3_schema)
                return schema
        raise CliError(EXIT_NOT_FOUND, f"{WORK_CRD} serves no {WORK[1]} schema")

    def placement(self, namespace: str, name: str) -> dict[str, Any]:
        """One Placement."""
        return self._get(f"get placement {name} in namespace {namespace}", PLACEMENT,
                         namespace, name)

    def decisions(self, namespace: str, placement: str) -> list[dict[str, Any]]:
        """The PlacementDecisions of one Placement."""
        return self._list(f"list placementdecisions in namespace {namespace}", DECISION,
                          namespace,
                          label_selector=f"cluster.open-cluster-management.io/placement={placement}")

    def bindings(self, namespace: str) -> list[dict[str, Any]]:
        """The ManagedClusterSetBindings of a namespace."""
        return self._list(f"list managedclustersetbindings in namespace {namespace}", BINDING,
                          namespace)


def _work_refusal(err: CliError) -> CliError:
    """``err``, saying which role reads ManifestWorks when the hub refused the user."""
    if err.code != EXIT_FORBIDDEN:
        return err
    return CliError(EXIT_FORBIDDEN, f"{err} (ManifestWorks are read with the {WORK_READER_ROLE} "
                    "ClusterRole, not the viewer role)")


def _message(err: ApiException) -> str:
    try:
        return str(json.loads(err.body or "{}").get("message") or err.reason)
    except ValueError:
        return str(err.reason)
