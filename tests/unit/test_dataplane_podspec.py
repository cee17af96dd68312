"""A predictor pod's spec translated into local processes (testbed/dataplane/podspec.py).

Pure translation: no server is installed or started here. The pods are shaped as KServe's
controller writes them (storage-initializer init container, ``kserve-container``, the
``kserve-provision-location`` emptyDir at ``/mnt/models``).
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest

from testbed.dataplane import podspec
from testbed.dataplane.podspec import ConfigError, Environments, Refused, StaticObjects

ENVS = Environments(
    kserve_python=Path("/envs/kserve/bin/python"),
    mlserver=Path("/envs/mlserver/bin/mlserver"),
    entrypoints=Path("/entrypoints"),
)
ROOT = Path("/pods/models/p")
MOUNT = {"name": "kserve-provision-location", "mountPath": "/mnt/models", "readOnly": True}


def ports() -> Any:
    counter = itertools.count(30001)
    return lambda: next(counter)


def sklearn_container(**extra: Any) -> dict[str, Any]:
    return {
        "name": "kserve-container",
        "image": "docker.io/kserve/sklearnserver:v0.20.0",
        "args": ["--model_name=sklearn-iris", "--model_dir=/mnt/models", "--http_port=8080"],
        "ports": [{"containerPort": 8080, "name": "http1", "protocol": "TCP"}],
        "volumeMounts": [MOUNT],
        **extra,
    }


def mlserver_container(**extra: Any) -> dict[str, Any]:
    return {
        "name": "kserve-container",
        "image": "docker.io/seldonio/mlserver:1.5.0",
        "env": [
            {"name": "MLSERVER_MODEL_IMPLEMENTATION", "value": "mlserver_sklearn.SKLearnModel"},
            {"name": "MLSERVER_HTTP_PORT", "value": "8080"},
            {"name": "MLSERVER_GRPC_PORT", "value": "9000"},
            {"name": "MLSERVER_MODEL_NAME", "value": "sklearn-iris"},
            {"name": "MLSERVER_MODEL_URI", "value": "/mnt/models"},
        ],
        "ports": [{"containerPort": 8080, "name": "http1", "protocol": "TCP"}],
        "volumeMounts": [MOUNT],
        **extra,
    }


def initializer(**extra: Any) -> dict[str, Any]:
    return {
        "name": "storage-initializer",
        "image": "kserve/storage-initializer:v0.20.0",
        "args": ["s3://models/sklearn/iris", "/mnt/models"],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [{"name": "kserve-provision-location", "mountPath": "/mnt/models"}],
        **extra,
    }


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (),
        volumes: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    return {
        "metadata": {"name": "sklearn-iris-predictor-abc", "namespace": "models", "uid": "u-1",
                     "labels": {"app": "isvc.sklearn-iris-predictor"}},
        "spec": {
            "nodeName": "kwok-node-0",
            "serviceAccountName": "default",
            "initContainers": list(init),
            "containers": list(containers),
            "volumes": [{"name": "kserve-provision-location", "emptyDir": {}}, *volumes],
        },
    }


def translate(p: dict[str, Any], objects: StaticObjects | None = None) -> podspec.PodPlan:
    return podspec.translate(p, ROOT, objects or StaticObjects(), ENVS, ports())


VOLUME = ROOT / "volumes" / "kserve-provision-location"


# ------------------------------------------------------------------------------- images
@pytest.mark.parametrize(("image", "repository"), [
    ("docker.io/kserve/sklearnserver:v0.20.0", "kserve/sklearnserver"),
    ("kserve/sklearnserver", "kserve/sklearnserver"),
    ("localhost:5000/kserve/sklearnserver:dev", "kserve/sklearnserver"),
    ("seldonio/mlserver@sha256:0123abcd", "seldonio/mlserver"),
    ("docker.io/library/python:3.11", "python"),
    ("nvcr.io/nvidia/tritonserver:23.05-py3", "nvidia/tritonserver"),
])
def test_image_repository_drops_registry_tag_and_digest(image: str, repository: str) -> None:
    assert podspec.image_repository(image) == repository


def test_a_pod_whose_image_has_no_runner_is_refused_naming_the_image_and_simulation() -> None:
    triton = {"name": "kserve-container", "image": "nvcr.io/nvidia/tritonserver:23.05-py3"}
    with pytest.raises(Refused) as err:
        translate(pod(triton, init=(initializer(),)))
    message = str(err.value)
    assert "nvcr.io/nvidia/tritonserver:23.05-py3" in message
    assert "kserve-container" in message and "models/sklearn-iris-predictor-abc" in message
    assert "kwok's simulated readiness" in message
    assert f"{podspec.SIMULATED_LABEL}=simulated" in message
    assert err.value.image == "nvcr.io/nvidia/tritonserver:23.05-py3"


def test_one_unknown_sidecar_refuses_the_whole_pod() -> None:
    sidecar = {"name": "agent", "image": "kserve/agent:v0.20.0"}
    with pytest.raises(Refused, match=re.escape("kserve/agent:v0.20.0")):
        translate(pod(sklearn_container(), sidecar))


def test_a_command_replacing_the_entrypoint_is_refused() -> None:
    with pytest.raises(Refused, match="command replaces the image's entrypoint"):
        translate(pod(sklearn_container(command=["/bin/sh", "-c", "sleep 1"])))


def test_args_replacing_mlservers_shell_command_are_refused() -> None:
    with pytest.raises(Refused, match="args replace the image's command"):
        translate(pod(mlserver_container(args=["mlserver", "start", "/other"])))


# ---------------------------------------------------------------------- args and mounts
def test_sklearn_args_get_the_local_model_dir_and_free_ports() -> None:
    plan = translate(pod(sklearn_container(), init=(initializer(),)))
    main = plan.containers[0]
    assert main.runner == "kserve-sklearnserver"
    assert main.argv == (
        "/envs/kserve/bin/python", "/entrypoints/kserve_sklearn.py",
        "--model_name=sklearn-iris", f"--model_dir={VOLUME}", "--http_port=30001",
        # The server's gRPC port (8081 by default) moves off its default too.
        "--grpc_port=30002",
    )
    assert main.ports == {8080: 30001, 8081: 30002}
    assert main.mounts == {"/mnt/models": VOLUME}
    assert main.cwd == ROOT / "containers" / "kserve-container"


def test_the_storage_initializer_downloads_into_the_volume_the_server_reads() -> None:
    plan = translate(pod(sklearn_container(), init=(initializer(),)))
    (init,) = plan.init_containers
    assert init.argv == ("/envs/kserve/bin/python", "/entrypoints/storage_initializer.py",
                         "s3://models/sklearn/iris", str(VOLUME))
    assert init.termination_message_policy == "FallbackToLogsOnError"
    assert plan.containers[0].mounts["/mnt/models"] == init.mounts["/mnt/models"]
    assert [v.path for v in plan.volumes] == [VOLUME]


def test_a_volume_mounted_at_another_path_is_still_the_same_directory() -> None:
    server = sklearn_container(
        args=["--model_name=m", "--model_dir=/models/sub"],
        volumeMounts=[{"name": "kserve-provision-location", "mountPath": "/models"}],
    )
    plan = translate(pod(server, init=(initializer(),)))
    assert f"--model_dir={VOLUME}/sub" in plan.containers[0].argv


def test_sub_path_and_longest_mount_win() -> None:
    mounts = {"/mnt": Path("/a"), "/mnt/models": Path("/b")}
    assert podspec.remap_path("/mnt/models/x.joblib", mounts) == "/b/x.joblib"
    assert podspec.remap_path("--dir=/mnt/other", mounts) == "--dir=/a/other"
    assert podspec.remap_path("/mntx", mounts) == "/mntx"
    assert podspec.remap_path("s3://mnt/models", mounts) == "s3://mnt/models"
    server = sklearn_container(volumeMounts=[
        {"name": "kserve-provision-location", "mountPath": "/mnt/models", "subPath": "iris"}])
    plan = translate(pod(server))
    assert plan.containers[0].mounts == {"/mnt/models": VOLUME / "iris"}


def test_secret_and_config_map_volumes_start_with_their_keys() -> None:
    objects = StaticObjects(secrets={("models", "creds"): {"token": b"s3cr3t"}},
                            config_maps={("models", "cfg"): {"a.json": "{}", "b": "x"}})
    volumes = (
        {"name": "creds", "secret": {"secretName": "creds"}},
        {"name": "cfg", "configMap": {"name": "cfg", "items": [{"key": "a.json", "path": "c/a"}]}},
    )
    plan = translate(pod(sklearn_container(), volumes=volumes), objects)
    files = {v.name: v.files for v in plan.volumes}
    assert files["creds"] == {"token": b"s3cr3t"}
    assert files["cfg"] == {"c/a": b"{}"}


def test_a_missing_secret_volume_is_a_config_error_and_a_host_path_is_refused() -> None:
    with pytest.raises(ConfigError, match='secret "gone" not found'):
        translate(pod(sklearn_container(),
                      volumes=({"name": "s", "secret": {"secretName": "gone"}},)))
    with pytest.raises(Refused, match="hostPath"):
        translate(pod(sklearn_container(),
                      volumes=({"name": "h", "hostPath": {"path": "/etc"}},)))


def test_a_mount_of_no_volume_is_refused() -> None:
    server = sklearn_container(volumeMounts=[{"name": "nope", "mountPath": "/x"}])
    with pytest.raises(Refused, match="'nope' names no volume"):
        translate(pod(server))


# -------------------------------------------------------------------------- environment
STORAGE_CONFIG = b'{"type": "s3", "bucket": "models", "endpoint_url": "http://127.0.0.1:9000"}'


def test_env_from_secrets_and_config_maps_as_the_kubelet_builds_it() -> None:
    objects = StaticObjects(
        secrets={("models", "storage-config"): {"demo-s3": STORAGE_CONFIG},
                 ("models", "aws"): {"AWS_ACCESS_KEY_ID": b"id", "AWS_SECRET_ACCESS_KEY": b"k"}},
        config_maps={("models", "settings"): {"LOG": "debug", "REGION": "eu"}},
    )
    container = initializer(
        envFrom=[{"configMapRef": {"name": "settings"}, "prefix": "CFG_"},
                 {"secretRef": {"name": "aws"}}],
        env=[
            {"name": "STORAGE_CONFIG",
             "valueFrom": {"secretKeyRef": {"name": "storage-config", "key": "demo-s3"}}},
            {"name": "AWS_SECRET_ACCESS_KEY", "value": "overridden"},
            {"name": "REGION",
             "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "REGION"}}},
            {"name": "WHERE", "value": "$(REGION)/$(UNSET)/$$(REGION)"},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "APP",
             "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "OPTIONAL", "valueFrom": {"secretKeyRef": {
                "name": "absent", "key": "k", "optional": True}}},
            {"name": "MODEL_FILE", "value": "/mnt/models/model.joblib"},
        ],
    )
    plan = translate(pod(sklearn_container(), init=(container,)), objects)
    env = plan.init_containers[0].env
    assert env["STORAGE_CONFIG"] == STORAGE_CONFIG.decode()
    assert env["AWS_ACCESS_KEY_ID"] == "id"
    assert env["AWS_SECRET_ACCESS_KEY"] == "overridden"  # env wins over envFrom
    assert env["CFG_LOG"] == "debug" and env["CFG_REGION"] == "eu"
    assert env["WHERE"] == "eu/$(UNSET)/$(REGION)"
    assert env["POD"] == "sklearn-iris-predictor-abc"
    assert env["APP"] == "isvc.sklearn-iris-predictor"
    assert env["IP"] == "127.0.0.1"
    assert "OPTIONAL" not in env
    assert env["MODEL_FILE"] == f"{VOLUME}/model.joblib"
    assert env["HOSTNAME"] == "sklearn-iris-predictor-abc"
    # Nothing of the testbed's own environment leaks in: only what the pod says.
    assert "KUBECONFIG" not in env and env["PATH"].startswith("/envs/kserve/bin:")


@pytest.mark.parametrize(("env", "message"), [
    ([{"name": "X", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k"}}}],
     'secret "gone" not found'),
    ([{"name": "X", "valueFrom": {"secretKeyRef": {"name": "storage-config", "key": "other"}}}],
     "couldn't find key other in Secret models/storage-config"),
    ([{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "k"}}}],
     'configmap "gone" not found'),
])
def test_a_missing_secret_or_key_is_the_kubelets_config_error(
        env: list[dict[str, Any]], message: str) -> None:
    objects = StaticObjects(secrets={("models", "storage-config"): {"demo-s3": STORAGE_CONFIG}})
    with pytest.raises(ConfigError, match=message):
        translate(pod(sklearn_container(), init=(initializer(env=env),)), objects)


def test_env_from_a_missing_secret_fails_unless_optional() -> None:
    missing = [{"secretRef": {"name": "gone"}}]
    with pytest.raises(ConfigError, match='secret "gone" not found'):
        translate(pod(sklearn_container(envFrom=missing)))
    optional = [{"secretRef": {"name": "gone", "optional": True}}]
    assert translate(pod(sklearn_container(envFrom=optional))).containers


def test_resource_field_refs_read_the_containers_limits() -> None:
    server = sklearn_container(
        resources={"limits": {"cpu": "1500m", "memory": "2Gi"}},
        env=[{"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
             {"name": "MEM", "valueFrom": {"resourceFieldRef": {
                 "resource": "limits.memory", "divisor": "1Mi"}}}])
    env = translate(pod(server)).containers[0].env
    assert env["CPUS"] == "2" and env["MEM"] == "2048"


def test_mlserver_gets_its_ports_models_dir_and_loopback_from_its_environment() -> None:
    plan = translate(pod(mlserver_container(), init=(initializer(),)))
    main = plan.containers[0]
    assert main.runner == "kserve-mlserver"
    # The image's command: `mlserver start $MLSERVER_MODELS_DIR` (the image's default).
    assert main.argv == ("/envs/mlserver/bin/mlserver", "start", str(VOLUME))
    assert main.ports == {8080: 30001, 9000: 30002, 8082: 30003}
    assert main.env["MLSERVER_HTTP_PORT"] == "30001"
    assert main.env["MLSERVER_GRPC_PORT"] == "30002"
    assert main.env["MLSERVER_METRICS_PORT"] == "30003"
    assert main.env["MLSERVER_MODEL_URI"] == str(VOLUME)
    assert main.env["MLSERVER_MODELS_DIR"] == str(VOLUME)
    assert main.env["MLSERVER_HOST"] == "127.0.0.1"


def test_a_port_flag_given_as_two_arguments_is_moved_too() -> None:
    server = sklearn_container(args=["--model_name=m", "--model_dir=/mnt/models",
                                     "--http_port", "8080", "--grpc_port", "9001"])
    main = translate(pod(server)).containers[0]
    assert main.argv[-4:] == ("--http_port", "30001", "--grpc_port", "30002")
    assert main.ports == {8080: 30001, 9001: 30002}


# ------------------------------------------------------------------------------- probes
def test_probes_address_the_mapped_ports_with_the_pods_timings() -> None:
    server = sklearn_container(
        readinessProbe={"httpGet": {"path": "/v1/models/sklearn-iris", "port": "http1",
                                    "httpHeaders": [{"name": "X-Probe", "value": "1"}]},
                        "initialDelaySeconds": 2, "periodSeconds": 3, "timeoutSeconds": 4,
                        "successThreshold": 1, "failureThreshold": 5},
        livenessProbe={"tcpSocket": {"port": 8080}},
    )
    main = translate(pod(server)).containers[0]
    assert main.readiness == podspec.Probe(
        "http", 30001, "/v1/models/sklearn-iris", "HTTP", (("X-Probe", "1"),),
        initial_delay=2.0, period=3.0, timeout=4.0, success_threshold=1, failure_threshold=5)
    assert main.readiness.url == "http://127.0.0.1:30001/v1/models/sklearn-iris"
    assert main.liveness == podspec.Probe("tcp", 30001)
    assert main.startup is None


def test_without_a_probe_readiness_is_the_servers_own_endpoint() -> None:
    sklearn = translate(pod(sklearn_container())).containers[0]
    assert sklearn.readiness is not None
    assert sklearn.readiness.url == "http://127.0.0.1:30001/v2/health/ready"
    # MLServer's server-level readiness holds with no model loaded: the model's is asked.
    mlserver = translate(pod(mlserver_container())).containers[0]
    assert mlserver.readiness is not None
    assert mlserver.readiness.url == "http://127.0.0.1:30001/v2/models/sklearn-iris/ready"
    initializer_plan = translate(pod(sklearn_container(), init=(initializer(),)))
    assert initializer_plan.init_containers[0].readiness is None


@pytest.mark.parametrize(("probe", "message"), [
    ({"exec": {"command": ["cat", "/tmp/ready"]}}, "readinessProbe runs a command"),
    ({"httpGet": {"path": "/", "port": "admin"}}, "names port 'admin'"),
    ({"httpGet": {"path": "/", "port": 7777}}, "addresses port 7777"),
])
def test_probes_no_process_here_can_answer_are_refused(probe: dict[str, Any],
                                                        message: str) -> None:
    with pytest.raises(Refused, match=message):
        translate(pod(sklearn_container(readinessProbe=probe)))


def test_quantities() -> None:
    assert podspec.quantity("500m") == 0.5
    assert podspec.quantity("2Gi") == 2 * 2**30
    with pytest.raises(ConfigError):
        podspec.quantity("lots")
