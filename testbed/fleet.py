"""The local fleet: one etcd, a hub with OCM, and N spokes joined through real OCM agents.

Everything runs as plain processes on loopback ports; ``Testbed`` is a context
manager that starts them all and stops every one of them on exit.

Startup order (each step in parallel across clusters where it can be):

1. etcd (one server, a key prefix per API server);
2. every kube-apiserver;
3. hub: kube-controller-manager (it also signs the agents' CSRs), OCM CRDs,
   registration controller, placement controller; spokes: kube-controller-manager,
   kube-scheduler, kwok with one fake node, the OCM spoke CRDs;
4. per spoke, the OCM registration agent joins the hub with a bootstrap
   kubeconfig; the testbed accepts it as ``clusteradm accept`` would (approve the
   CSR, set ``hubAcceptsClient``);
5. per spoke, the OCM work agent with the hub kubeconfig that registration wrote.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from addon_agent.config import DEV_EXTERNAL_WEBHOOK_CA_FILE, DEV_EXTERNAL_WEBHOOK_URL
from testbed import identities, upstream, versions
from testbed.build import binary
from testbed.cluster import Cluster, write_kubeconfig
from testbed.dataplane import envs, kwok, podspec
from testbed.dataplane.ingress import Ingress
from testbed.dataplane.kubelet import SpokeDataPlane
from testbed.dataplane.s3 import S3Server
from testbed.kservepod import ReleaseFollower
from testbed.pki import CertificateAuthority, KeyPair, service_account_key
from testbed.processes import Process, ProcessFailed, free_port, wait_until

HUB_NAMESPACE = "open-cluster-management-hub"
AGENT_NAMESPACE = "open-cluster-management-agent"
WORKSPACE_NAMESPACE = "model-serving"
"""Hub namespace with a ManagedClusterSetBinding for the default cluster set."""
BOOTSTRAP_GROUP = "system:bootstrappers:managedcluster"
CLUSTERSET_LABEL = "cluster.open-cluster-management.io/clusterset"
KSERVE_NAMESPACE = "kserve"
KSERVE_SERVICE_ACCOUNT = "kserve-controller-manager"
"""The ServiceAccount of KServe's controller pod in its bundle (config/manager)."""


@dataclass(frozen=True)
class KServeController:
    """KServe's controller manager running outside a spoke, and where its webhooks listen."""

    process: Process
    webhook_url: str
    """Base URL of the webhook server (paths as in KServe's webhook configurations)."""
    ca_file: Path
    """CA that signed the webhook server's certificate (the caBundle to use)."""
    metrics_proxy: Process
    """kube-rbac-proxy in front of the controller's plain-HTTP metrics, as the bundle's
    sidecar is: HTTPS, and only for tokens allowed to ``get`` the ``/metrics`` URL."""
    metrics_address: str
    """``host:port`` of the proxy (the pod's ``https`` port)."""

    def agent_env(self) -> dict[str, str]:
        """Environment for the spoke's agent so the webhooks it installs call this controller.

        These are the agent's development-only settings (:mod:`addon_agent.config`): they
        exist for this out-of-cluster controller alone and are not on the agent's command line.
        """
        return {
            DEV_EXTERNAL_WEBHOOK_URL: self.webhook_url,
            DEV_EXTERNAL_WEBHOOK_CA_FILE: str(self.ca_file),
        }


CONTROLLERS = (
    "*",
    # Nothing here counts quota, binds or attaches volumes (no storage), runs CronJobs or
    # ReplicationControllers, or guards disruption budgets; these controllers only cost the
    # testbed CPU. The resource quota controller alone watched every kind of every CRD
    # installed (KServe's too) and ran a discovery every 30 s.
    *(f"-{name}-controller" for name in (
        "resourcequota", "cronjob", "replicationcontroller",
        "disruption", "ttl", "persistentvolume-binder", "persistentvolume-attach-detach",
        "persistentvolume-expander", "ephemeral-volume", "endpointslice-mirroring",
        "resourceclaim", "device-taint-eviction", "storage-version-migrator",
        "storageversion-garbage-collector", "legacy-serviceaccount-token-cleaner",
        "volumeattributesclass-protection", "podcertificaterequest-cleaner",
        "kube-apiserver-serving-clustertrustbundle-publisher", "service-lb", "node-route",
        "cloud-node-lifecycle", "node-ipam")),
)
"""The kube-controller-manager's controllers: the default set less those no test needs (the
namespace, garbage collector, Deployment, Job, CSR, ServiceAccount, node lifecycle,
HorizontalPodAutoscaler and PersistentVolumeClaim protection controllers stay: namespaces are
deleted, hook Jobs run, OCM registers through CSRs, KServe's raw Deployments reach their
replica count through the HPA it makes (test_dataplane_fleet's two replicas), and a namespace
holding a PVC is deleted in the agent's tests)."""


APISERVER_STOP_GRACE = 3.0
"""Seconds a testbed's API server is given to exit on SIGTERM when the testbed stops (its
clients have stopped; etcd goes after it). An idle one exits in about 1.3 s; a data-plane
spoke's never did within 10 s (its shutdown started at once, then waited on something not
found yet; one bare fleet's in three waited too, while its etcd was stopped beside it), and
nothing needs it by then."""


INOTIFY_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")
INOTIFY_WANTED = 1024
"""Each cluster's API server and controller-manager hold about a dozen inotify instances (cert
file watchers), KServe's controller one more; the default limit of 128 per user is reached by
three parallel testbeds (``make test``), and the next process fails with "too many open
files"."""


def _raise_inotify_instances(log: Any) -> None:
    """Raise the per-user inotify instance limit when it is low and this process may."""
    try:
        current = int(INOTIFY_INSTANCES.read_text())
        if current < INOTIFY_WANTED:
            INOTIFY_INSTANCES.write_text(str(INOTIFY_WANTED))
            log(f"[testbed] fs.inotify.max_user_instances {current} -> {INOTIFY_WANTED}")
    except (OSError, ValueError) as err:
        log(f"[testbed] cannot raise fs.inotify.max_user_instances ({err}); parallel testbeds "
            "may fail with 'too many open files' (PYTEST_WORKERS=1 avoids it)")


class Testbed:
    """A hub and ``spokes`` managed clusters on real control-plane binaries."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        spokes: int = 2,
        run_dir: Path | None = None,
        log: Any = print,
        status_sync_interval: str = "10s",
        dataplane: bool = False,
    ) -> None:
        self.spoke_count = spokes
        self.dataplane = dataplane
        """Run predictor pods of known runtimes as real servers (issue 30), with an S3 server
        and an ingress per spoke; off by default (kwok fakes every pod)."""
        self.dataplanes: dict[str, SpokeDataPlane] = {}
        """Spoke name -> the testbed's kubelet for the pods it runs there."""
        self.ingresses: dict[str, Ingress] = {}
        """Spoke name -> its ingress (Caddy on a loopback port, routing by Host)."""
        self.s3: S3Server | None = None
        """The data plane's S3 server, with the trained models in its ``models`` bucket."""
        self._own_run_dir = run_dir is None
        self.run_dir = run_dir or Path(tempfile.mkdtemp(prefix="testbed-"))
        self.log_dir = self.run_dir / "logs"
        self.log = log
        self.status_sync_interval = status_sync_interval
        """How often each spoke's OCM work agent polls what it applied
        (``--status-sync-interval``): OCM's default, 10 s. The hub learns a change as it
        happens from the watches the manager asks for (``feedbackScrapeType: Watch``); the
        poll only refreshes each manifest's Available condition. At 1 s (the testbed's
        setting until 2026-12-06) every work agent read every object of every work each
        second (about 750 requests a minute per spoke on an idle demo fleet), and the
        suite's processes used 934 CPU-seconds instead of 989 to 1,011 (README's timing
        note)."""
        self.processes: list[Process] = []
        self.metrics_addresses: dict[str, str] = {}
        """Component (``manager``, ``<spoke>-agent``) -> ``host:port`` of its /metrics."""
        self.hub: Cluster
        self.spokes: list[Cluster] = []
        self._kserve: dict[str, KServeController] = {}
        self.kserve_followers: dict[str, ReleaseFollower] = {}
        """Spoke -> what runs the release of its KServe controller Deployment's image."""
        self._kserve_lock = threading.RLock()
        self.startup_seconds = 0.0

    # ----------------------------------------------------------------- lifecycle
    def __enter__(self) -> Testbed:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _spawn(
        self, name: str, argv: list[str | Path], env: dict[str, str] | None = None
    ) -> Process:
        proc = Process(name, [str(a) for a in argv], self.log_dir, env=env).start()
        self.processes.append(proc)
        return proc

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every process the testbed started, clients before servers.

        The data plane's pods first (their processes, then the watches); then SIGTERM goes to
        every client of the API servers (controllers, agents, the manager), newest first, then
        to the API servers, then to etcd; each wave is waited for together, and a process
        still running ``timeout`` seconds later gets SIGKILL: the API servers
        :data:`APISERVER_STOP_GRACE` seconds later.
        """
        for plane in self.dataplanes.values():
            plane.stop()
        self.dataplanes.clear()
        store = getattr(self, "etcd", None)
        servers = [c.processes.get("kube-apiserver") for c in getattr(self, "all_clusters", [])]
        waves = ([p for p in reversed(self.processes) if p is not store and p not in servers],
                 [p for p in self.processes if p in servers],
                 [p for p in self.processes if p is store])
        for wave, grace in zip(waves, (timeout, min(timeout, APISERVER_STOP_GRACE), timeout),
                               strict=True):
            signalled = [proc for proc in wave if proc.terminate()]
            deadline = time.monotonic() + grace
            killed = [proc.name for proc in signalled if proc.reap(deadline)]
            if killed:
                self.log(f"[testbed] still running {grace:g}s after SIGTERM, killed: "
                         f"{', '.join(killed)}")
        self.processes.clear()
        # Last: a follower's thread ending kills what it forked (the parent-death signal).
        for follower in self.kserve_followers.values():
            follower.stop()
        self.kserve_followers.clear()

    def cleanup(self) -> None:
        """Stop everything and remove the run directory if the testbed created it."""
        self.stop()
        if self._own_run_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def start(self) -> None:
        """Bring the whole fleet up; raises ProcessFailed with the failing log tail."""
        t0 = time.monotonic()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        _raise_inotify_instances(self.log)
        self.ca = CertificateAuthority(self.run_dir / "pki")
        self.admin = self.ca.issue(
            "admin", "testbed-admin", organizations=("system:masters",), client=True
        )
        self._start_etcd()
        self.hub = self._start_apiserver("hub")
        self.spokes = [self._start_apiserver(f"cluster{i + 1}") for i in range(self.spoke_count)]
        for cluster in self.all_clusters:
            self._wait_apiserver(cluster)
        self.log(f"[testbed] API servers ready after {time.monotonic() - t0:.1f}s")

        self._start_controller_manager(self.hub)
        for spoke in self.spokes:
            self._start_controller_manager(spoke)
            self._start_scheduler(spoke)
            self._start_kwok(spoke)
        with ThreadPoolExecutor(max_workers=1 + len(self.spokes)) as pool:
            jobs = [pool.submit(self._prepare_hub)]
            jobs += [pool.submit(self._prepare_spoke, s) for s in self.spokes]
            for job in jobs:
                job.result()
        self._start_ocm_hub()
        for spoke in self.spokes:
            self._start_registration_agent(spoke)
        self._accept_spokes()
        for spoke in self.spokes:
            self._start_work_agent(spoke)
        self._wait_clusters_available()
        self.bind_clusterset(WORKSPACE_NAMESPACE)
        if self.dataplane:
            self._start_dataplane()
        self.startup_seconds = time.monotonic() - t0
        self.log(f"[testbed] hub + {self.spoke_count} spokes ready in {self.startup_seconds:.1f}s")

    @property
    def all_clusters(self) -> list[Cluster]:
        """The hub followed by the spokes."""
        return [self.hub, *self.spokes]

    def check_processes(self) -> None:
        """Raise ProcessFailed if any testbed process has exited (or the data plane failed)."""
        for proc in self.processes:
            proc.check()
        for name, plane in self.dataplanes.items():
            if plane.failed:
                raise ProcessFailed(f"the data plane of {name} failed: {plane.failed}")
        for name, follower in self.kserve_followers.items():
            if follower.failed:
                raise ProcessFailed(f"KServe's controller on {name} no longer follows its "
                                    f"Deployment: {follower.failed}")

    # ------------------------------------------------------------------- etcd
    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        self.etcd = self._spawn(
            "etcd",
            [
                binary("etcd"),
                "--name=testbed",
                f"--data-dir={self.run_dir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=testbed=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=8589934592",
                "--log-level=warn",
            ],
        )

    # ------------------------------------------- control-plane restarts (fault injection)
    def restart_apiserver(self, cluster: Cluster, *, kill: bool = False) -> float:
        """Restart ``cluster``'s kube-apiserver; return the seconds until /readyz answers.

        Same port, certificates and etcd prefix. ``kill`` sends SIGKILL instead of a
        graceful SIGTERM.
        """
        proc = cluster.processes["kube-apiserver"]
        t0 = time.monotonic()
        if kill:
            proc.kill()
        else:
            proc.stop()
        proc.start()
        self._wait_apiserver(cluster)
        return time.monotonic() - t0

    def restart_etcd(self, *, kill: bool = False) -> float:
        """Restart etcd; return the seconds until every API server is ready again.

        Same ports and data directory. ``kill`` sends SIGKILL instead of a graceful SIGTERM.
        """
        t0 = time.monotonic()
        if kill:
            self.etcd.kill()
        else:
            self.etcd.stop()
        self.etcd.start()
        for cluster in self.all_clusters:
            self._wait_apiserver(cluster)
        return time.monotonic() - t0

    # --------------------------------------------------------- control planes
    def _start_apiserver(self, name: str) -> Cluster:
        directory = self.run_dir / name
        directory.mkdir(parents=True, exist_ok=True)
        port = free_port()
        serving = self.ca.issue(
            f"{name}-apiserver", f"{name}-apiserver", hosts=("127.0.0.1", "localhost"), server=True
        )
        sa_key = service_account_key(directory / "sa.key")
        kubeconfig = write_kubeconfig(
            directory / "admin.kubeconfig",
            name,
            f"https://127.0.0.1:{port}",
            self.ca.pair.cert,
            self.admin,
        )
        cluster = Cluster(name=name, directory=directory, port=port, kubeconfig=kubeconfig)
        cluster.processes["kube-apiserver"] = self._spawn(
            f"{name}-kube-apiserver",
            [
                binary("kube-apiserver"),
                f"--etcd-servers={self.etcd_url}",
                f"--etcd-prefix=/{name}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={self.ca.pair.cert}",
                f"--requestheader-client-ca-file={self.ca.pair.cert}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--service-account-issuer=https://{name}.testbed.local",
                f"--service-account-key-file={sa_key}",
                f"--service-account-signing-key-file={sa_key}",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--authorization-mode=RBAC",
                "--allow-privileged=true",
                "--endpoint-reconciler-type=none",
                # TESTBED_PROFILING=1 serves /debug/pprof (to find what costs the API servers
                # CPU: `kubectl get --raw '/debug/pprof/profile?seconds=30'`).
                f"--profiling={'true' if os.environ.get('TESTBED_PROFILING') else 'false'}",
                f"--cert-dir={directory / 'certs'}",
                *self._audit_flags(directory),
            ],
        )
        return cluster

    def _audit_flags(self, directory: Path) -> list[str]:
        """The API server's audit flags when ``TESTBED_AUDIT`` is set, else none.

        Each API server then logs every request's metadata (user, user agent, verb, resource)
        to ``audit.log`` in its cluster's directory: what told who loads the testbed's API
        servers (on the end-to-end fleet, 43 % of a spoke's requests were the OCM work agent's).
        """
        if not os.environ.get("TESTBED_AUDIT"):
            return []
        policy = directory / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump({
            "apiVersion": "audit.k8s.io/v1", "kind": "Policy",
            "omitStages": ["RequestReceived"], "rules": [{"level": "Metadata"}]}))
        return [f"--audit-policy-file={policy}", f"--audit-log-path={directory / 'audit.log'}",
                "--audit-log-format=json", "--audit-log-maxsize=0"]

    def _wait_apiserver(self, cluster: Cluster) -> None:
        proc = cluster.processes["kube-apiserver"]
        wait_until(
            f"{cluster.name} kube-apiserver /readyz",
            cluster.ready,
            timeout=120,
            watch=[self.etcd, proc],
            interval=0.5,
        )

    def _component_kubeconfig(self, cluster: Cluster, component: str) -> list[str]:
        """Flags giving a control-plane component its own identity, ``system:<component>``.

        The API server's bootstrap RBAC has exactly the roles for these users (as kubeadm
        sets them up), so neither component needs ``system:masters``.
        """
        pair = self.ca.issue(f"{cluster.name}-{component}", f"system:{component}", client=True)
        kc = write_kubeconfig(
            cluster.directory / f"{component}.kubeconfig", cluster.name, cluster.server,
            self.ca.pair.cert, pair,
        )
        cluster.identities[component] = kc
        return [
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
        ]

    def _start_controller_manager(self, cluster: Cluster) -> None:
        cluster.processes["kube-controller-manager"] = self._spawn(
            f"{cluster.name}-kube-controller-manager",
            [
                binary("kube-controller-manager"),
                *self._component_kubeconfig(cluster, "kube-controller-manager"),
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--service-account-private-key-file={cluster.directory / 'sa.key'}",
                f"--root-ca-file={self.ca.pair.cert}",
                "--use-service-account-credentials=true",
                f"--cluster-signing-cert-file={self.ca.pair.cert}",
                f"--cluster-signing-key-file={self.ca.pair.key}",
                f"--controllers={','.join(CONTROLLERS)}",
                "--concurrent-deployment-syncs=10",
                "--node-monitor-grace-period=60s",
            ],
        )

    def _start_scheduler(self, cluster: Cluster) -> None:
        cluster.processes["kube-scheduler"] = self._spawn(
            f"{cluster.name}-kube-scheduler",
            [
                binary("kube-scheduler"),
                *self._component_kubeconfig(cluster, "kube-scheduler"),
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
            ],
        )

    def _start_kwok(self, cluster: Cluster, runners: tuple[str, ...] | None = None) -> None:
        # With a data plane, kwok's pod stages leave the pods the testbed runs alone (of every
        # runner, or of ``runners`` while a kubelet of those runs: release_hook_kubelet).
        config = []
        if self.dataplane or runners:
            path = kwok.write_config(cluster.directory / "kwok.yaml",
                                     None if self.dataplane else runners)
            config = [f"--config={path}"]
        cluster.processes["kwok"] = self._spawn(
            f"{cluster.name}-kwok",
            [
                binary("kwok"),
                f"--kubeconfig={cluster.kubeconfig}",
                "--manage-all-nodes=true",
                # Renew node Leases as a kubelet does; without them the node goes NotReady
                # after the controller-manager's grace period and kwok stops readying pods.
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{free_port()}",
                "--cidr=10.244.0.1/16",
                "--node-ip=10.0.0.2",
                *config,
            ],
        )

    def _restart_kwok(self, cluster: Cluster, runners: tuple[str, ...] | None) -> None:
        old = cluster.processes.pop("kwok", None)
        if old is not None:
            old.stop()
            self.processes.remove(old)
        self._start_kwok(cluster, runners)

    # ------------------------------------------------------------ data plane
    @contextlib.contextmanager
    def release_hook_kubelet(self, spoke: Cluster) -> Iterator[SpokeDataPlane]:
        """The testbed as the kubelet of OCM's pre-delete hook pods on ``spoke``, for a while.

        The hook Job's pod (the add-on's image with ``args: [agent-release]``) then runs as a
        real ``model-serving-addon agent-release`` process with a token of the pod's
        ServiceAccount, and its status (exit code included) is the testbed's, not kwok's. In a
        fleet with a data plane the spoke's kubelet does this already. Otherwise kwok is
        restarted with its status stages kept off those pods (the same rules,
        :func:`testbed.dataplane.podspec.served_rules`) and a kubelet of those pods alone is
        started; on leaving, it is stopped and kwok restarted as it was (other pods keep
        kwok's simulated status throughout).
        """
        with self.hook_kubelet(spoke, podspec.RELEASE_HOOK_RUNNER) as plane:
            yield plane

    @contextlib.contextmanager
    def hook_kubelet(self, cluster: Cluster, runner: str) -> Iterator[SpokeDataPlane]:
        """The testbed as the kubelet of ``runner``'s hook pods on ``cluster``, for a while.

        On a spoke, kwok is restarted with its status stages kept off those pods and
        restarted as it was on leaving (:meth:`release_hook_kubelet`). The hub has no nodes,
        scheduler or kwok: the kubelet binds those pods to a node name of its own
        (``testbed-hooks``) as a scheduler would, then runs them (the chart's uninstall guard).
        """
        if cluster.name in self.dataplanes:
            yield self.dataplanes[cluster.name]
            return
        t0 = time.monotonic()
        runners = (runner,)
        simulated = "kwok" in cluster.processes
        if simulated:
            self._restart_kwok(cluster, runners)
        plane = SpokeDataPlane(
            cluster, cluster.directory / "hook-pods", self.log_dir / f"{cluster.name}-hook-pods",
            envs.environments(), log=self.log, runners=runners,
            node=None if simulated else "testbed-hooks").start()
        self.dataplanes[cluster.name] = plane
        self.log(f"[testbed] {cluster.name}: kubelet of the {runner} pods started in "
                 f"{time.monotonic() - t0:.2f}s")
        try:
            yield plane
        finally:
            t1 = time.monotonic()
            plane.stop()
            self.dataplanes.pop(cluster.name, None)
            if simulated:
                self._restart_kwok(cluster, None)
            self.log(f"[testbed] {cluster.name}: kubelet of the {runner} pods stopped"
                     f"{', kwok restarted' if simulated else ''} in "
                     f"{time.monotonic() - t1:.2f}s")

    def _start_dataplane(self) -> None:
        """The S3 server with the models, then per spoke an ingress and the pods' kubelet.

        Processes are started from this (the main) thread; the pods' processes from their
        runners' threads, which live as long as the pods.
        """
        if not all(env.is_built() for env in envs.ENVS) or not (
                envs.models_dir() / ".complete").exists():
            raise ProcessFailed("the data plane's model servers are not built: run "
                                "`python -m testbed build dataplane` (or `make binaries`)")
        self.s3 = S3Server(self.run_dir / "s3", self.log_dir, name="s3").start()
        assert self.s3.process is not None
        self.processes.append(self.s3.process)
        self.s3.seed_models()
        for spoke in self.spokes:
            ingress = Ingress(spoke.name, spoke.directory / "ingress", self.log_dir).start()
            self.processes.append(ingress.process)
            spoke.processes["ingress"] = ingress.process
            self.ingresses[spoke.name] = ingress
            self.dataplanes[spoke.name] = SpokeDataPlane(
                spoke, spoke.directory / "pods", self.log_dir / f"{spoke.name}-pods",
                envs.environments(), ingress, log=self.log,
            ).start()
        self.log(f"[testbed] data plane: S3 at {self.s3.endpoint}; ingress "
                 + ", ".join(f"{n} {i.url}" for n, i in self.ingresses.items()))

    # ------------------------------------------------------------------- OCM
    def _prepare_hub(self) -> None:
        hub = self.hub
        hub.apply_files(upstream.ocm_hub_crds())
        hub.apply_objects(
            [
                _namespace(HUB_NAMESPACE),
                _namespace(WORKSPACE_NAMESPACE),
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRole",
                    "metadata": {"name": "testbed:ocm-bootstrap"},
                    "rules": [
                        {
                            "apiGroups": ["certificates.k8s.io"],
                            "resources": ["certificatesigningrequests"],
                            "verbs": ["create", "get", "list", "watch"],
                        },
                        {
                            "apiGroups": ["cluster.open-cluster-management.io"],
                            "resources": ["managedclusters"],
                            "verbs": ["create", "get", "list", "watch"],
                        },
                    ],
                },
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": "testbed:ocm-bootstrap"},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "testbed:ocm-bootstrap",
                    },
                    "subjects": [
                        {
                            "apiGroup": "rbac.authorization.k8s.io",
                            "kind": "Group",
                            "name": BOOTSTRAP_GROUP,
                        }
                    ],
                },
            ]
        )
        hub.wait_crds_established()
        # OCM's hub controllers run as the cluster-manager's ServiceAccounts and roles.
        hub.apply_objects(identities.cluster_manager_rbac())
        for component, account in identities.HUB_CONTROLLERS.items():
            hub.identities[component] = identities.token_kubeconfig(
                hub, HUB_NAMESPACE, account, hub.directory / f"{component}.kubeconfig"
            )

    def _prepare_spoke(self, spoke: Cluster) -> None:
        spoke.apply_files(upstream.ocm_spoke_crds())
        spoke.apply_objects(
            [
                _namespace(AGENT_NAMESPACE),
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": f"{spoke.name}-node-0",
                        "annotations": {"kwok.x-k8s.io/node": "fake"},
                        "labels": {
                            "kubernetes.io/hostname": f"{spoke.name}-node-0",
                            "kubernetes.io/os": "linux",
                            "kubernetes.io/arch": "amd64",
                            "type": "kwok",
                        },
                    },
                },
            ]
        )
        spoke.wait_crds_established()
        # OCM's registration and work agents run as the klusterlet's ServiceAccounts.
        spoke.apply_objects(identities.klusterlet_rbac())
        for component, account in (
            ("registration-agent", identities.REGISTRATION_SA),
            ("work-agent", identities.WORK_SA),
        ):
            spoke.identities[component] = identities.token_kubeconfig(
                spoke, AGENT_NAMESPACE, account, spoke.directory / f"{component}.kubeconfig"
            )

    def _ocm_controller_flags(self, kubeconfig: Path, namespace: str) -> list[str]:
        return [
            f"--kubeconfig={kubeconfig}",
            f"--namespace={namespace}",
            "--disable-leader-election",
            f"--listen=127.0.0.1:{free_port()}",
        ]

    def _start_ocm_hub(self) -> None:
        hub = self.hub
        hub.processes["registration"] = self._spawn(
            "hub-registration-controller",
            [
                binary("registration"),
                "controller",
                *self._ocm_controller_flags(self.hub.identities["registration"], HUB_NAMESPACE),
            ],
        )
        hub.processes["placement"] = self._spawn(
            "hub-placement-controller",
            [
                binary("placement"),
                "controller",
                *self._ocm_controller_flags(self.hub.identities["placement"], HUB_NAMESPACE),
            ],
        )

    def ensure_hub_controller(self, component: str) -> Process:
        """Start an optional OCM hub controller once (idempotent); return its process.

        ``addon-manager`` runs OCM's add-on manager (ClusterManagementAddOn,
        AddOnTemplate, ManagedClusterAddOn); ``work-manager`` runs OCM's work hub
        manager with the ManifestWorkReplicaSet feature gate.
        """
        hub = self.hub
        existing = hub.processes.get(component)
        if existing is not None and existing.alive():
            return existing
        if component == "addon-manager":
            flags = self._ocm_controller_flags(self.hub.identities["addon-manager"], HUB_NAMESPACE)
            argv: list[str | Path] = [binary("addon"), "manager", *flags]
        elif component == "work-manager":
            argv = [
                binary("work"),
                "manager",
                *self._ocm_controller_flags(self.hub.identities["work"], HUB_NAMESPACE),
                "--feature-gates=ManifestWorkReplicaSet=true",
            ]
        else:
            raise ValueError(f"unknown hub controller {component!r}")
        proc = self._spawn(f"hub-{component}", argv)
        hub.processes[component] = proc
        return proc

    def kserve_controller(self, spoke: Cluster) -> KServeController:
        """Where KServe's controller for ``spoke`` will listen (certificate and port, no process).

        Start the agent with :meth:`KServeController.agent_env` (its development-only setting
        for controllers that run outside the cluster) so the webhook configurations it installs
        point there, then call :meth:`start_kserve_controller` once the stack's configuration
        exists.
        """
        existing = self._kserve.get(spoke.name)
        if existing is not None:
            return existing
        tmp = spoke.directory / "kserve-controller"
        certs = tmp / "k8s-webhook-server" / "serving-certs"
        certs.mkdir(parents=True, exist_ok=True)
        pair = self.ca.issue(
            f"{spoke.name}-kserve-webhook",
            "kserve-webhook",
            hosts=("127.0.0.1", "localhost"),
            server=True,
        )
        shutil.copyfile(pair.cert, certs / "tls.crt")
        shutil.copyfile(pair.key, certs / "tls.key")
        proxy_pair = self.ca.issue(f"{spoke.name}-kserve-metrics", "kserve-metrics",
                                   hosts=("127.0.0.1", "localhost"), server=True)
        port, metrics_port, proxy_port = free_port(), free_port(), free_port()
        kubeconfig = spoke.directory / "kserve-controller.kubeconfig"
        controller = KServeController(
            process=Process(
                f"{spoke.name}-kserve-controller",
                [
                    str(binary("kserve-manager")),
                    f"--webhook-port={port}",
                    f"--metrics-addr=127.0.0.1:{metrics_port}",
                    f"--health-probe-addr=127.0.0.1:{free_port()}",
                    "--leader-elect=false",
                ],
                self.log_dir,
                env={
                    # Written by start_kserve_controller: the controller's own ServiceAccount.
                    "KUBECONFIG": str(kubeconfig),
                    "TMPDIR": str(tmp),
                    "POD_NAMESPACE": KSERVE_NAMESPACE,
                },
            ),
            webhook_url=f"https://127.0.0.1:{port}",
            ca_file=self.ca.pair.cert,
            # The bundle's sidecar arguments, with this process's addresses; it reviews
            # tokens and access as the pod's ServiceAccount (kserve-proxy-role).
            metrics_proxy=Process(
                f"{spoke.name}-kserve-metrics-proxy",
                [
                    str(binary("kube-rbac-proxy")),
                    f"--secure-listen-address=127.0.0.1:{proxy_port}",
                    f"--upstream=http://127.0.0.1:{metrics_port}/",
                    f"--kubeconfig={kubeconfig}",
                    f"--tls-cert-file={proxy_pair.cert}",
                    f"--tls-private-key-file={proxy_pair.key}",
                    "--logtostderr=true",
                ],
                self.log_dir,
            ),
            metrics_address=f"127.0.0.1:{proxy_port}",
        )
        self._kserve[spoke.name] = controller
        return controller

    def start_kserve_controller(
        self, spoke: Cluster, version: str | None = None
    ) -> KServeController:
        """Run KServe's real controller manager for ``spoke`` outside the cluster (idempotent).

        The process is what the stack's controller pod would run, with that pod's
        ServiceAccount; the agent still installs the stack (the controller needs its
        ``inferenceservice-config`` and its ServiceAccount and RBAC to start). ``version``
        (default: the pin) is the release to run: a running controller of another release is
        replaced, as a kubelet replaces the pod. From the first start on, a
        :class:`~testbed.kservepod.ReleaseFollower` does that whenever the controller
        Deployment's image changes release.
        """
        with self._kserve_lock:
            controller = self._run_kserve_controller(spoke, version)
            release = version or versions.KSERVE
            follower = self.kserve_followers.get(spoke.name)
            if follower is None:
                self.kserve_followers[spoke.name] = ReleaseFollower(
                    spoke, functools.partial(self.start_kserve_controller, spoke),
                    release=release, log=self.log).start()
            else:
                follower.release = release
            return controller

    def _run_kserve_controller(self, spoke: Cluster, version: str | None) -> KServeController:
        controller = self.kserve_controller(spoke)
        wanted = str(binary("kserve-manager", version))
        if controller.process.argv[0] != wanted:
            controller.process.stop()
            controller.process.argv[0] = wanted
        if not controller.process.alive():
            # The ServiceAccount and RBAC that the stack's bundle gives the controller's pod.
            spoke.identities["kserve-controller"] = identities.token_kubeconfig(
                spoke, KSERVE_NAMESPACE, KSERVE_SERVICE_ACCOUNT,
                spoke.directory / "kserve-controller.kubeconfig",
            )
            controller.process.start()
            if controller.process not in self.processes:
                self.processes.append(controller.process)
            spoke.processes["kserve-controller"] = controller.process
        if not controller.metrics_proxy.alive():
            controller.metrics_proxy.start()
            if controller.metrics_proxy not in self.processes:
                self.processes.append(controller.metrics_proxy)
            spoke.processes["kserve-metrics-proxy"] = controller.metrics_proxy
            self.metrics_addresses[f"{spoke.name}-kserve-controller"] = (
                controller.metrics_address)
        return controller

    def _start_registration_agent(self, spoke: Cluster) -> None:
        bootstrap_pair = self.ca.issue(
            f"{spoke.name}-bootstrap",
            f"system:testbed:bootstrap:{spoke.name}",
            organizations=(BOOTSTRAP_GROUP,),
            client=True,
        )
        bootstrap = write_kubeconfig(
            spoke.directory / "bootstrap.kubeconfig",
            "hub",
            self.hub.server,
            self.ca.pair.cert,
            bootstrap_pair,
        )
        hub_dir = spoke.directory / "hub-kubeconfig"
        hub_dir.mkdir(exist_ok=True)
        spoke.processes["registration-agent"] = self._spawn(
            f"{spoke.name}-registration-agent",
            [
                binary("registration"),
                "agent",
                *self._ocm_controller_flags(
                    spoke.identities["registration-agent"], AGENT_NAMESPACE
                ),
                f"--cluster-name={spoke.name}",
                f"--bootstrap-kubeconfig={bootstrap}",
                f"--hub-kubeconfig-dir={hub_dir}",
                "--hub-kubeconfig-secret=hub-kubeconfig-secret",
                f"--spoke-external-server-urls={spoke.server}",
            ],
        )

    def hub_kubeconfig_for(self, spoke: Cluster) -> Path:
        """The hub kubeconfig that OCM registration issued to ``spoke``'s agents."""
        return spoke.directory / "hub-kubeconfig" / "kubeconfig"

    def _accept_spokes(self) -> None:
        """Do what ``clusteradm accept`` does, until every spoke has its hub kubeconfig."""
        from kubernetes import client

        api = self.hub.api_client()
        certs = client.CertificatesV1Api(api)
        custom = client.CustomObjectsApi(api)
        names = {s.name for s in self.spokes}
        watch = [self.hub.processes["kube-controller-manager"], self.hub.processes["registration"]]
        watch += [s.processes["registration-agent"] for s in self.spokes]

        def registered() -> set[str]:
            found: Any = custom.list_cluster_custom_object(
                "cluster.open-cluster-management.io", "v1", "managedclusters")
            return {m["metadata"]["name"] for m in found["items"]} & names

        def accepted() -> bool:
            # Approve a cluster's CSR only once its ManagedCluster exists, as `clusteradm
            # accept` does: the registration agent leaves its bootstrap phase as soon as the
            # CSR is signed, cancelling the creation of the ManagedCluster if that had not
            # happened yet, and its hub identity may not create one (seen: the cluster never
            # registered, 120 s).
            present = registered()
            csrs: Any = certs.list_certificate_signing_request(
                label_selector="open-cluster-management.io/cluster-name"
            )
            for csr in csrs.items:
                cluster = csr.metadata.labels.get("open-cluster-management.io/cluster-name")
                conditions = (csr.status.conditions if csr.status else None) or []
                if cluster in present and not any(c.type == "Approved" for c in conditions):
                    csr.status = csr.status or client.V1CertificateSigningRequestStatus()
                    csr.status.conditions = [
                        *conditions,
                        client.V1CertificateSigningRequestCondition(
                            type="Approved",
                            status="True",
                            reason="TestbedAccept",
                            message="approved by the testbed as clusteradm accept would",
                        ),
                    ]
                    certs.replace_certificate_signing_request_approval(csr.metadata.name, csr)
            for name in names:
                try:
                    mc: Any = custom.get_cluster_custom_object(
                        "cluster.open-cluster-management.io", "v1", "managedclusters", name
                    )
                except client.ApiException as exc:
                    if exc.status == 404:
                        continue
                    raise
                patch: dict[str, Any] = {}
                if not mc.get("spec", {}).get("hubAcceptsClient"):
                    patch["spec"] = {"hubAcceptsClient": True}
                if CLUSTERSET_LABEL not in mc["metadata"].get("labels", {}):
                    # What OCM's ManagedCluster mutating webhook (not run here) defaults.
                    patch["metadata"] = {"labels": {CLUSTERSET_LABEL: "default"}}
                if patch:
                    custom.patch_cluster_custom_object(
                        "cluster.open-cluster-management.io", "v1", "managedclusters", name, patch
                    )
            return all(self.hub_kubeconfig_for(s).exists() for s in self.spokes)

        try:
            wait_until("spokes to join the hub", accepted, timeout=120, watch=watch, interval=0.5)
        finally:
            api.close()

    def _start_work_agent(self, spoke: Cluster) -> None:
        hub_kubeconfig = self.hub_kubeconfig_for(spoke)
        spoke.processes["work-agent"] = self._spawn(
            f"{spoke.name}-work-agent",
            [
                binary("work"),
                "agent",
                *self._ocm_controller_flags(spoke.identities["work-agent"], AGENT_NAMESPACE),
                f"--spoke-cluster-name={spoke.name}",
                f"--hub-kubeconfig={hub_kubeconfig}",
                f"--workload-source-config={hub_kubeconfig}",
                f"--status-sync-interval={self.status_sync_interval}",
                f"--agent-id={spoke.name}-work-agent",
            ],
        )

    def stop_work_agent(self, spoke: Cluster) -> None:
        """Stop ``spoke``'s OCM work agent (fault injection).

        ManifestWorks stay as they are on the hub; nothing reaches the spoke and no status
        comes back until :meth:`start_work_agent`.
        """
        spoke.processes["work-agent"].stop()

    def start_work_agent(self, spoke: Cluster) -> None:
        """Start ``spoke``'s OCM work agent again after :meth:`stop_work_agent` (same flags)."""
        proc = spoke.processes["work-agent"]
        if not proc.alive():
            proc.start()

    def stop_registration_agent(self, spoke: Cluster) -> None:
        """Stop ``spoke``'s OCM registration agent (fault injection: a partition).

        Nobody renews the cluster's lease any more: the hub's registration controller marks
        the ManagedCluster Available ``Unknown`` after 5 lease durations
        (``spec.leaseDurationSeconds``, 60 s by default) and OCM taints it ``unreachable``.
        """
        spoke.processes["registration-agent"].stop()

    def start_registration_agent(self, spoke: Cluster) -> None:
        """Start ``spoke``'s registration agent again (same flags; it keeps its hub kubeconfig).

        It renews the lease and writes the ManagedCluster Available again.
        """
        proc = spoke.processes["registration-agent"]
        if not proc.alive():
            proc.start()

    def managed_cluster(self, name: str) -> dict[str, Any]:
        """The hub's ManagedCluster object for ``name``."""
        from kubernetes import client

        with self.hub.api_client() as api:
            obj: Any = client.CustomObjectsApi(api).get_cluster_custom_object(
                "cluster.open-cluster-management.io", "v1", "managedclusters", name
            )
            return dict(obj)

    def _wait_clusters_available(self) -> None:
        def available() -> bool:
            for spoke in self.spokes:
                mc = self.managed_cluster(spoke.name)
                conds = {c["type"]: c["status"] for c in mc.get("status", {}).get("conditions", [])}
                if conds.get("ManagedClusterConditionAvailable") != "True":
                    return False
                if mc["metadata"].get("labels", {}).get(CLUSTERSET_LABEL) != "default":
                    return False
            return True

        wait_until(
            "ManagedClusters Available in the default cluster set",
            available,
            timeout=120,
            watch=self.processes,
            interval=0.5,
        )

    def bind_clusterset(self, namespace: str, clusterset: str = "default") -> None:
        """Create ``namespace`` on the hub with a ManagedClusterSetBinding to ``clusterset``."""
        self.hub.apply_objects(
            [
                _namespace(namespace),
                {
                    "apiVersion": "cluster.open-cluster-management.io/v1beta2",
                    "kind": "ManagedClusterSetBinding",
                    "metadata": {"name": clusterset, "namespace": namespace},
                    "spec": {"clusterSet": clusterset},
                },
            ]
        )

    def describe(self) -> str:
        """Human-readable kubeconfig paths for every cluster."""
        lines = [f"run dir: {self.run_dir}"]
        for c in self.all_clusters:
            lines.append(f"  {c.name:<10} export KUBECONFIG={c.kubeconfig}")
        return "\n".join(lines)


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


__all__ = ["KeyPair", "ProcessFailed", "Testbed"]
