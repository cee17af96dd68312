"""The agent's command line, and its development-only settings from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from addon_agent.config import DEV_EXTERNAL_WEBHOOK_CA_FILE, DEV_EXTERNAL_WEBHOOK_URL
from addon_agent.main import parse
from testbed.fleet import KServeController
from testbed.processes import Process


def test_flags_and_defaults() -> None:
    config = parse(
        [
            "--kubeconfig=/k",
            "--namespace=ns",
            "--bundle-dir=/b",
            "--metrics-port=9",
            "--resync-seconds=2",
            "--log-level=debug",
        ],
        {},
    )
    assert (config.kubeconfig, config.namespace, config.bundle_dir) == ("/k", "ns", Path("/b"))
    assert (config.metrics_port, config.resync_seconds, config.log_level) == (9, 2.0, "DEBUG")
    default = parse([], {"KUBECONFIG": "/env"})
    assert default.kubeconfig == "/env" and default.bundle_dir == Path("/bundles")
    assert default.external_webhook_url is None and default.external_webhook_ca is None


def test_external_webhook_is_not_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["--external-webhook-url=https://127.0.0.1:1"], {})
    with pytest.raises(SystemExit):
        parse(["--help"], {})
    assert "webhook" not in capsys.readouterr().out


def test_external_webhook_comes_from_the_development_environment(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    url = "https://127.0.0.1:9443"
    config = parse([], {DEV_EXTERNAL_WEBHOOK_URL: url, DEV_EXTERNAL_WEBHOOK_CA_FILE: str(ca)})
    assert config.external_webhook_url == url
    assert config.external_webhook_ca == b"-----BEGIN CERTIFICATE-----\n"
    # empty values count as unset (as for POD_NAMESPACE)
    empty = parse([], {DEV_EXTERNAL_WEBHOOK_URL: "", DEV_EXTERNAL_WEBHOOK_CA_FILE: ""})
    assert empty.external_webhook_url is None and empty.external_webhook_ca is None


@pytest.mark.parametrize("name", [DEV_EXTERNAL_WEBHOOK_URL, DEV_EXTERNAL_WEBHOOK_CA_FILE])
def test_external_webhook_settings_go_together(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse([], {name: "x"})
    err = capsys.readouterr().err
    assert DEV_EXTERNAL_WEBHOOK_URL in err and DEV_EXTERNAL_WEBHOOK_CA_FILE in err


def test_testbed_wiring_reaches_the_agent(tmp_path: Path) -> None:
    """What the testbed puts in the agent's environment is what the agent reads."""
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"pem")
    controller = KServeController(
        Process("kserve-controller", ["true"], tmp_path), "https://127.0.0.1:9443", ca,
        Process("kserve-metrics-proxy", ["true"], tmp_path), "127.0.0.1:8443",
    )
    config = parse([], controller.agent_env())
    assert (config.external_webhook_url, config.external_webhook_ca) == (
        "https://127.0.0.1:9443",
        b"pem",
    )
