"""Real predictions from predictor pods run by the testbed's pod runner (issue 30).

A predictor pod as KServe's controller writes it (:mod:`testbed.dataplane.pods`) for the
repository's ``kserve-sklearnserver`` runtime (``examples/servingruntime.yaml``, KServe's own
container spec) and for KServe's ``kserve-mlserver`` runtime; the storage initializer (KServe's
``kserve-storage``) fetches the iris model the testbed trained, the real server loads it and
answers V1 and V2. Readiness is the server's own endpoint; a killed server is reported not
ready with its real exit status, then restarted after the kubelet's back-off.

Needs the data plane's Python servers only (the ``dataplane`` fixture): no Go binary, no fleet.
"""

from __future__ import annotations

import signal
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.dataplane import envs, pods, podspec
from testbed.dataplane.podspec import Environments
from testbed.dataplane.runner import BackOff, PodRunner, probe_once
from testbed.processes import free_port
from testbed.support.dataplane import (
    IRIS,
    IRIS_CLASSES,
    MLSERVER_RUNTIME,
    post_json,
    sklearn_runtime,
    v2_iris,
)
from testbed.support.waiting import eventually

NAME = "sklearn-iris"


class Served:
    """A pod run by the runner, with every status it reported, in order."""

    def __init__(self, runtime: dict[str, Any], model_dir: Path, environments: Environments,
                 root: Path) -> None:
        pod = pods.predictor_pod(runtime, NAME, "models", str(model_dir))
        plan = podspec.translate(pod, root / "pod", podspec.StaticObjects(), environments,
                                 free_port)
        self.reported: list[dict[str, Any]] = []
        self.root = root
        t0 = time.monotonic()
        self.runner = PodRunner(plan, root / "logs", backoff=BackOff(initial=1.0, maximum=8.0),
                                on_change=self.reported.append).start()
        try:
            eventually(self.runner.ready, timeout=120, interval=0.2)
        except AssertionError:
            self.runner.stop()
            raise AssertionError(f"{NAME} never became ready: {self.runner.status()}\n"
                                 f"{self.logs()}") from None
        self.seconds = time.monotonic() - t0

    def logs(self) -> str:
        return "\n".join(f"--- {p}:\n{p.read_text()[-3000:]}"
                         for p in sorted((self.root / "logs").rglob("*.log")))

    @property
    def port(self) -> int:
        return self.runner.plan.containers[0].ports[8080]

    def kill_and_wait_for_restart(self) -> dict[str, Any]:
        """SIGKILL the server: the pod is reported not ready with exit 137, then ready again."""
        runner = self.runner
        run = runner.container("kserve-container")
        before = run.restart_count
        seen = len(self.reported)
        runner.kill("kserve-container", signal.SIGKILL)
        # The runner's own state turns ready before its on_change report of it arrives (the
        # report is sent after the state changes): wait for the report, which is what a
        # kubelet's status write would be.
        def reported_ready() -> bool:
            last = self.reported[-1] if len(self.reported) > seen else None
            return (run.restart_count == before + 1 and last is not None and {
                c["type"]: c["status"] for c in last["conditions"]}.get("Ready") == "True")

        eventually(reported_ready, timeout=120, interval=0.2)
        # What was reported in between, in order: the crash (not ready, the real exit status,
        # waiting out the back-off), then the restarted server ready again.
        statuses = self.reported[seen:]
        crashed = [s for s in statuses
                   if "waiting" in s["containerStatuses"][0]["state"]
                   and s["containerStatuses"][0]["restartCount"] == before]
        assert crashed, statuses
        entry = crashed[0]["containerStatuses"][0]
        assert entry["ready"] is False
        assert entry["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        terminated = entry["lastState"]["terminated"]
        assert terminated["exitCode"] == 137 and terminated["signal"] == signal.SIGKILL
        assert terminated["reason"] == "Error"
        ready = {c["type"]: c["status"] for c in crashed[0]["conditions"]}["Ready"]
        assert ready == "False"
        assert {c["type"]: c["status"] for c in statuses[-1]["conditions"]}["Ready"] == "True"
        return dict(entry)


@pytest.fixture(scope="module")
def sklearn_served(dataplane: Environments,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = Served(sklearn_runtime(), envs.sklearn_iris_dir(), dataplane,
                    tmp_path_factory.mktemp("sklearn"))
    yield served
    served.runner.stop()


class TestKServeSklearnServer:
    """``kserve-sklearnserver``: KServe's model server from the kserve package, V1 and V2."""

    @pytest.fixture
    def served(self, sklearn_served: Served) -> Served:
        return sklearn_served

    def test_1_ready_from_the_servers_own_endpoint(self, served: Served) -> None:
        print(f"kserve-sklearnserver pod ready in {served.seconds:.1f}s")
        main = served.runner.plan.containers[0]
        assert main.runner == "kserve-sklearnserver"
        assert main.readiness is not None and main.readiness.path == "/v2/health/ready"
        assert probe_once(main.readiness)
        status = served.runner.status()
        assert status["phase"] == "Running"
        (init,) = status["initContainerStatuses"]
        assert init["state"]["terminated"]["exitCode"] == 0
        # The initializer put the model where the server read it.
        assert (served.runner.plan.volumes[0].path / "model.joblib").exists()
        # Ready was reported only once the server said so: never before the first probe.
        first_ready = next(i for i, s in enumerate(served.reported)
                           if {c["type"]: c["status"] for c in s["conditions"]}["Ready"] == "True")
        assert first_ready > 0
        assert served.reported[first_ready - 1]["containerStatuses"][0]["ready"] is False

    def test_2_v1_predict(self, served: Served) -> None:
        url = f"http://127.0.0.1:{served.port}/v1/models/{NAME}:predict"
        assert post_json(url, {"instances": IRIS}) == {"predictions": IRIS_CLASSES}

    def test_3_v2_infer(self, served: Served) -> None:
        answer = post_json(f"http://127.0.0.1:{served.port}/v2/models/{NAME}/infer", v2_iris())
        assert answer["model_name"] == NAME
        assert [o["data"] for o in answer["outputs"]] == [IRIS_CLASSES]

    @pytest.mark.needs("test_1_ready_from_the_servers_own_endpoint")
    def test_4_a_killed_server_is_not_ready_with_its_exit_status_then_restarts(
            self, served: Served) -> None:
        served.kill_and_wait_for_restart()
        served.kill_and_wait_for_restart()
        assert served.runner.container("kserve-container").restart_delays == [1.0, 2.0]
        assert served.runner.status()["containerStatuses"][0]["restartCount"] == 2
        url = f"http://127.0.0.1:{served.port}/v1/models/{NAME}:predict"
        assert post_json(url, {"instances": IRIS}) == {"predictions": IRIS_CLASSES}


@pytest.fixture(scope="module")
def mlserver_served(dataplane: Environments,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = Served(MLSERVER_RUNTIME, envs.mlserver_iris_dir(), dataplane,
                    tmp_path_factory.mktemp("mlserver"))
    yield served
    served.runner.stop()


class TestMLServer:
    """``kserve-mlserver``: MLServer with mlserver-sklearn, V2."""

    @pytest.fixture
    def served(self, mlserver_served: Served) -> Served:
        return mlserver_served

    def test_1_ready_when_the_model_is_ready(self, served: Served) -> None:
        print(f"kserve-mlserver pod ready in {served.seconds:.1f}s")
        main = served.runner.plan.containers[0]
        assert main.runner == "kserve-mlserver"
        assert main.env["MLSERVER_MODEL_IMPLEMENTATION"] == pods.MLSERVER_SKLEARN_CLASS
        assert main.readiness is not None
        assert main.readiness.path == f"/v2/models/{NAME}/ready"
        assert probe_once(main.readiness)

    def test_2_v2_infer(self, served: Served) -> None:
        answer = post_json(f"http://127.0.0.1:{served.port}/v2/models/{NAME}/infer", v2_iris())
        assert answer["model_name"] == NAME
        assert [o["data"] for o in answer["outputs"]] == [IRIS_CLASSES]

    def test_3_v1_is_not_served(self, served: Served) -> None:
        with pytest.raises(urllib.error.HTTPError) as err:
            post_json(f"http://127.0.0.1:{served.port}/v1/models/{NAME}:predict",
                 {"instances": IRIS})
        assert err.value.code == 404

    @pytest.mark.needs("test_1_ready_when_the_model_is_ready")
    def test_4_a_killed_server_is_not_ready_then_restarts(self, served: Served) -> None:
        served.kill_and_wait_for_restart()
        answer = post_json(f"http://127.0.0.1:{served.port}/v2/models/{NAME}/infer", v2_iris())
        assert [o["data"] for o in answer["outputs"]] == [IRIS_CLASSES]
