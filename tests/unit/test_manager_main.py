"""The manager's command line, log format and kubeconfig login."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from kubernetes import client, config

from addon_manager.shell import main


def test_flags_and_defaults() -> None:
    args = main.parse_args(
        [
            "--kubeconfig",
            "/k",
            "--metrics-port",
            "9",
            "--no-addon-enablement",
            "--concurrency",
            "4",
            "--log-level",
            "DEBUG",
        ]
    )
    assert (args.kubeconfig, args.metrics_port, args.no_addon_enablement) == ("/k", 9, True)
    assert args.concurrency == 4 and args.log_level == "DEBUG"
    default = main.parse_args([])
    assert default.kubeconfig is None and default.no_addon_enablement is False
    assert default.min_interval == 1.0


def test_json_log_lines() -> None:
    record = logging.LogRecord(
        "addon_manager.x", logging.INFO, __file__, 1, "hello %s", ("world",), None
    )
    out = json.loads(main.JsonFormatter().format(record))
    assert out["msg"] == "hello world" and out["level"] == "INFO"
    assert out["logger"] == "addon_manager.x" and out["ts"].endswith("Z")


def test_login_uses_the_given_kubeconfig_only(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "hub",
                "clusters": [
                    {
                        "name": "hub",
                        "cluster": {
                            "server": "https://127.0.0.1:6443",
                            "insecure-skip-tls-verify": True,
                        },
                    }
                ],
                "users": [{"name": "admin", "user": {"token": "tok"}}],
                "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "admin"}}],
            }
        )
    )
    cfg = client.Configuration()
    config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig), client_configuration=cfg
    )
    info = main.connection_from_kubeconfig(cfg)
    assert info.server == "https://127.0.0.1:6443"
    assert info.token == "tok" and info.scheme == "Bearer" and info.insecure is True


def test_sharding_flags() -> None:
    import pytest

    args = main.parse_args(["--shards=12", "--lease-duration=9",
                            "--leader-election-identity=mgr-1"])
    settings = main.shard_settings(args)
    assert (settings.shards, settings.identity, settings.lease_duration) == (12, "mgr-1", 9)
    assert settings.renew_deadline < settings.lease_duration  # it stops before others start
    assert main.parse_args([]).shards == 0
    with pytest.raises(SystemExit, match="--shards and --leader-elect"):
        main.main(["--shards=4", "--leader-elect"])
    with pytest.raises(SystemExit, match="--shards must be 0 or more"):
        main.main(["--shards=-1"])
