"""The async log stream sends the credentials the official client would, in a pod as from a kubeconfig."""

from __future__ import annotations

from pathlib import Path

import kubernetes.client as k8s
from kubernetes.config.incluster_config import InClusterConfigLoader

from workloads.k8s.aio import _headers


def test_in_a_pod_the_service_account_token_is_sent(tmp_path: Path) -> None:
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("projected-token")
    ca.write_text("not read here")
    environ = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    configuration = k8s.Configuration()
    loader = InClusterConfigLoader(str(token), str(ca), environ=environ)  # type: ignore[no-untyped-call]
    loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    # Without it the API server saw system:anonymous: a job page's followed log answered 403.
    assert _headers(configuration) == {"authorization": "bearer projected-token"}


def test_with_a_client_certificate_no_token_header_is_sent() -> None:
    assert _headers(k8s.Configuration(host="https://127.0.0.1:6443")) == {}
