"""The data plane's server environments, build step and hand-made predictor pods (pure parts).

What installs packages or starts servers is in tests/integration/test_dataplane.py.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from testbed import build, versions
from testbed.dataplane import envs, pods


def test_the_kserve_environment_is_the_release_line_of_the_carried_controller() -> None:
    assert f"v{versions.KSERVE_PYTHON}" == versions.KSERVE
    assert f"kserve=={versions.KSERVE_PYTHON}" in envs.KSERVE_ENV.requirements
    assert f"kserve-storage=={versions.KSERVE_PYTHON}" in envs.KSERVE_ENV.requirements


def test_both_servers_load_the_model_with_the_scikit_learn_that_trained_it() -> None:
    for env in envs.ENVS:
        assert f"scikit-learn=={versions.SCIKIT_LEARN}" in env.requirements
        assert f"joblib=={versions.JOBLIB}" in env.requirements
    assert all("==" in r for env in envs.ENVS for r in env.requirements)


def test_environments_are_keyed_on_their_pins_under_the_cache(monkeypatch: Any,
                                                              tmp_path: Any) -> None:
    monkeypatch.setenv("MODEL_SERVING_ADDON_CACHE", str(tmp_path))
    paths = {env.path for env in envs.ENVS}
    assert len(paths) == len(envs.ENVS)
    assert all(p.parent == tmp_path / "venvs" for p in paths)
    bumped = dataclasses.replace(envs.MLSERVER_ENV, requirements=(
        *envs.MLSERVER_ENV.requirements[:-1], "uvloop==0.20.0"))
    assert bumped.path != envs.MLSERVER_ENV.path
    assert not envs.KSERVE_ENV.is_built()
    assert envs.models_dir().name == f"iris-{envs.KSERVE_ENV.key}"


def test_build_names_the_data_plane_and_building_go_tools_alone_skips_it(
        monkeypatch: Any) -> None:
    calls: list[str] = []
    monkeypatch.setattr(envs, "build_all", lambda log=print: calls.append("dataplane"))
    monkeypatch.setattr(build, "TOOLS", ())
    build.build_all(["kserve"], log=lambda _: None)
    assert calls == []
    build.build_all([build.DATAPLANE], log=lambda _: None)
    build.build_all([], log=lambda _: None)
    assert calls == ["dataplane", "dataplane"]

    def fail(log: Any = print) -> None:
        raise envs.EnvError("mlserver's packages failed")

    monkeypatch.setattr(envs, "build_all", fail)
    with pytest.raises(build.BuildError, match="mlserver's packages failed"):
        build.build_all([build.DATAPLANE], log=lambda _: None)


def test_a_hand_made_predictor_pod_is_what_kserves_controller_writes() -> None:
    runtime = {"containers": [{
        "name": "kserve-container", "image": "docker.io/seldonio/mlserver:1.5.0",
        "env": [{"name": "MLSERVER_MODEL_IMPLEMENTATION", "value": "{{.Labels.modelClass}}"}],
        "args": ["--name={{.Name}}", "--ns={{ .Namespace }}"],
    }]}
    pod = pods.predictor_pod(runtime, "iris", "models", "s3://models/iris",
                             storage_env=[{"name": "AWS_REGION", "value": "us-east-1"}])
    (server,) = pod["spec"]["containers"]
    assert server["args"] == ["--name=iris", "--ns=models"]
    env = {e["name"]: e["value"] for e in server["env"]}
    assert env == {"MLSERVER_MODEL_IMPLEMENTATION": "mlserver_sklearn.SKLearnModel",
                   "MLSERVER_MODEL_NAME": "iris", "MLSERVER_MODEL_URI": "/mnt/models"}
    assert {"name": "kserve-provision-location", "mountPath": "/mnt/models",
            "readOnly": True} in server["volumeMounts"]
    (init,) = pod["spec"]["initContainers"]
    assert init["image"] == f"kserve/storage-initializer:{versions.KSERVE}"
    assert init["args"] == ["s3://models/iris", "/mnt/models"]
    assert init["env"] == [{"name": "AWS_REGION", "value": "us-east-1"}]
    assert pod["spec"]["volumes"] == [{"name": "kserve-provision-location", "emptyDir": {}}]
    # The runtime given is not changed.
    assert runtime["containers"][0]["args"] == ["--name={{.Name}}", "--ns={{ .Namespace }}"]


def test_each_s3_server_has_credentials_of_its_own_in_the_entry_the_agent_delivers(
        tmp_path: Any) -> None:
    from addon_api.hub import StorageConnectionSpec
    from addon_manager.kinds.storage_connection import storage_payload
    from testbed.dataplane.s3 import S3Server

    one, two = S3Server(tmp_path / "a", tmp_path), S3Server(tmp_path / "b", tmp_path)
    assert one.access_key != two.access_key and one.secret_key != two.secret_key
    assert one.port != two.port
    config = one.storage_config()
    # The keys the manager renders for an S3 StorageConnection are the keys KServe's storage
    # code reads: the entry the testbed writes is one the agent could have delivered.
    spec = StorageConnectionSpec.model_validate({
        "type": "s3", "placementRef": {"name": "p"}, "targetNamespaces": ["models"],
        "secretRef": {"name": "creds", "keys": {"access_key_id": "AWS_ACCESS_KEY_ID",
                                                 "secret_access_key": "AWS_SECRET_ACCESS_KEY"}},
        "s3": {"endpoint": one.endpoint, "region": "us-east-1", "bucket": "models"},
    })
    delivered = storage_payload(spec, {"AWS_ACCESS_KEY_ID": one.access_key,
                                       "AWS_SECRET_ACCESS_KEY": one.secret_key})
    assert {k: v for k, v in delivered.items() if k != "default_bucket"} == config
    assert one.storage_config(secret_key="wrong")["secret_access_key"] == "wrong"
