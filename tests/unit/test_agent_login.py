"""The agent's kopf credentials from its kubeconfig: certificates and ServiceAccount tokens."""

from __future__ import annotations

from pathlib import Path

import yaml

from addon_agent.io.login import connection_info


def _kubeconfig(tmp_path: Path, user: dict[str, str]) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443",
                                               "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }))
    return str(path)


def test_a_service_account_token_is_sent_as_bearer(tmp_path: Path) -> None:
    info = connection_info(_kubeconfig(tmp_path, {"token": "sa-token"}))
    assert (info.scheme, info.token) == ("Bearer", "sa-token")
    assert info.server == "https://127.0.0.1:6443"


def test_a_client_certificate_sends_no_token(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_text("cert")
    (tmp_path / "tls.key").write_text("key")
    info = connection_info(_kubeconfig(tmp_path, {
        "client-certificate": str(tmp_path / "tls.crt"),
        "client-key": str(tmp_path / "tls.key"),
    }))
    assert info.token is None and info.scheme is None
    assert info.certificate_path == str(tmp_path / "tls.crt")
