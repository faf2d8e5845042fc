"""Node agents sign in with their pod's ServiceAccount token, checked by the real API server's TokenReview.

Pods of a test ServiceAccount run on kwok nodes; TokenRequest gives their pod-bound tokens, which are
posted with real samples through Django's test client while the portal's Kubernetes client points at
the local cluster. An expired token cannot come from TokenRequest (10 minutes at least), so the test
re-signs a real token's claims with the cluster's own service-account signing key (kwokctl's
pki/admin.key) and an `exp` in the past; the same re-signing with a future `exp` is accepted, which
shows the refusal is the expiry and not the signature.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from django.test import Client, override_settings
from kubernetes import client

from deploy.localcluster import ClusterHandle
from gpu import identity
from gpu.models import Gpu, GpuSample
from gpu.services import node_apply
from gpu.tests.factories import batch, series
from tests.cluster.helpers import wait_for
from workloads.k8s.client import RealKubeClient, set_client

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]
URL = "/api/v1/ingest/samples"
SA = "gpu-agent"
AUDIENCE = "gpu-portal"


@dataclass(frozen=True)
class AgentPod:
    name: str
    uid: str
    node: str


@pytest.fixture
def kube(kube_api: client.ApiClient) -> RealKubeClient:
    """The test's own client of the cluster (the portal's is built from GPUPORTAL_KUBECONFIG)."""
    return RealKubeClient(kube_api)


@pytest.fixture
def namespace(k8s_cluster: ClusterHandle, k8s_namespace: str, kube: RealKubeClient) -> Iterator[str]:
    """A namespace with the agent ServiceAccount, and the portal signing agents in against this cluster."""
    kube.create(f"/api/v1/namespaces/{k8s_namespace}/serviceaccounts", {"metadata": {"name": SA}})
    with override_settings(
        GPUPORTAL_KUBECONFIG=str(k8s_cluster.kubeconfig),
        GPUPORTAL_AGENT_SERVICE_ACCOUNTS=[f"{k8s_namespace}:{SA}"],
        GPUPORTAL_AGENT_TOKEN_AUDIENCE=AUDIENCE,
        GPUPORTAL_AGENT_TOKEN_REVIEWER="workloads.k8s.tokenreview.review_token",
    ):
        set_client(None)  # the next get_client() reads GPUPORTAL_KUBECONFIG
        identity.forget_verdicts()
        try:
            yield k8s_namespace
        finally:
            set_client(None)
            identity.forget_verdicts()


@pytest.fixture
def nodes(kube: RealKubeClient) -> list[str]:
    """Two schedulable simulated GPU nodes of the local cluster."""
    items = (kube.get("/api/v1/nodes", {"labelSelector": "type=kwok"}) or {}).get("items") or []
    names = sorted(
        str(n["metadata"]["name"])
        for n in items
        if n["metadata"]["name"].startswith("gpu-node-") and not n.get("spec", {}).get("unschedulable")
    )
    assert len(names) >= 2, names
    return names[:2]


def mirror(kube: RealKubeClient, name: str) -> None:
    """The Node row the node watch would write, from the real Node object."""
    raw = kube.get(f"/api/v1/nodes/{name}")
    assert raw is not None
    node_apply(raw=raw)


def pod_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}".rstrip("/")


def start_pod(kube: RealKubeClient, namespace: str, name: str, node: str, sa: str = SA) -> AgentPod:
    spec = {
        "serviceAccountName": sa,
        "automountServiceAccountToken": False,
        "nodeSelector": {"kubernetes.io/hostname": node},
        "restartPolicy": "Never",
        "containers": [{"name": "agent", "image": "registry.invalid/gpu-agent:1"}],
    }
    created = kube.create(pod_path(namespace), {"metadata": {"name": name}, "spec": spec})
    assert created is not None

    def scheduled() -> str | None:
        pod = kube.get(pod_path(namespace, name)) or {}
        node_name = pod.get("spec", {}).get("nodeName")
        return str(node_name) if node_name else None

    bound = wait_for(scheduled, 30, f"{name} scheduled")
    assert bound == node
    return AgentPod(name=name, uid=str(created["metadata"]["uid"]), node=bound)


def request_token(
    kube: RealKubeClient, namespace: str, pod: AgentPod, audience: str = AUDIENCE, sa: str = SA
) -> str:
    """TokenRequest for a token bound to the pod, as the kubelet asks for a projected volume."""
    ref = {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid}
    body = {"spec": {"audiences": [audience], "expirationSeconds": 600, "boundObjectRef": ref}}
    answer = kube.create(f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa}/token", body)
    assert answer is not None
    return str(answer["status"]["token"])


def post(token: str, node: str, uuid: str = "GPU-sa-e2e-0") -> Any:
    body = json.dumps(batch(node, series(uuid, 3)))
    return Client().post(URL, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


def samples_of(node: str) -> int:
    """Samples stored for this node's GPUs (the table may hold other tests' rows)."""
    return GpuSample.objects.filter(
        gpu_id__in=list(Gpu.objects.filter(node__name=node).values_list("pk", flat=True))
    ).count()


def message(response: Any) -> str:
    text: str = response.json()["error"]["message"]
    return text


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def signing_key(handle: ClusterHandle) -> rsa.RSAPrivateKey:
    """kwokctl's service-account signing key (`--service-account-signing-key-file=<workdir>/pki/admin.key`);
    a reused cluster's work dir is found from its kubeconfig (<run>/<name>/kubeconfig)."""
    kubeconfig = Path(handle.kubeconfig)
    candidates = [handle.workdir, kubeconfig.parent.parent / "kwok" / "clusters" / kubeconfig.parent.name]
    path = next((d / "pki" / "admin.key" for d in candidates if (d / "pki" / "admin.key").is_file()), None)
    assert path is not None, f"no pki/admin.key under {candidates}"
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    return key


def resign(token: str, key: rsa.RSAPrivateKey, *, exp: int) -> str:
    """The same header and claims, with another lifetime, signed RS256 by the cluster's key."""
    header, payload, _ = token.split(".")
    claims = _unb64(payload)
    claims.update(exp=exp, iat=min(claims["iat"], exp - 600), nbf=min(claims["nbf"], exp - 600))
    signed = f"{header}.{_b64(json.dumps(claims, separators=(',', ':')).encode())}"
    return f"{signed}.{_b64(key.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256()))}"


def test_an_agent_pods_token_writes_its_own_node_and_no_other(
    namespace: str, nodes: list[str], kube: RealKubeClient
) -> None:
    node_a, node_b = nodes
    mirror(kube, node_a)
    mirror(kube, node_b)
    token = request_token(kube, namespace, start_pod(kube, namespace, "agent-a", node_a))

    accepted = post(token, node_a)
    assert accepted.status_code == 200, accepted.content
    assert accepted.json() == {"accepted": 3, "duplicates": 0}
    refused = post(token, node_b, uuid="GPU-sa-e2e-b")
    assert refused.status_code == 403, refused.content
    assert f"signed in for node {node_a}" in message(refused)
    assert post(token, node_a, uuid="GPU-sa-e2e-1").status_code == 200  # the cached verdict
    assert len(identity._cache) == 1
    assert set(Gpu.objects.values_list("node__name", flat=True)) == {node_a}
    assert samples_of(node_a) == 6


def test_tokens_kubernetes_does_not_vouch_for_are_401(
    namespace: str, nodes: list[str], kube: RealKubeClient
) -> None:
    mirror(kube, nodes[0])
    pod = start_pod(kube, namespace, "agent-a", nodes[0])
    other_audience = request_token(kube, namespace, pod, audience="somewhere-else")
    default_sa_pod = start_pod(kube, namespace, "not-an-agent", nodes[0], sa="default")
    not_an_agent = request_token(kube, namespace, default_sa_pod, sa="default")
    forged = resign(
        request_token(kube, namespace, pod), rsa.generate_private_key(65537, 2048), exp=int(time.time()) + 600
    )

    cases = [
        (other_audience, "audience"),
        ("a-plain-string", "Neither a node token"),
        ("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.bm90LWEtc2lnbmF0dXJl", "did not accept"),
        (forged, "did not accept"),
        (not_an_agent, f"system:serviceaccount:{namespace}:default is not a node agent"),
    ]
    for token, says in cases:
        response = post(token, nodes[0])
        assert response.status_code == 401, (says, response.content)
        assert says in message(response), message(response)
    assert not Gpu.objects.exists()  # no GPU row, so no sample either


def test_an_expired_token_signed_with_the_clusters_own_key_is_401(
    namespace: str,
    nodes: list[str],
    kube: RealKubeClient,
    k8s_cluster: ClusterHandle,
) -> None:
    mirror(kube, nodes[0])
    real = request_token(kube, namespace, start_pod(kube, namespace, "agent-a", nodes[0]))
    key, now = signing_key(k8s_cluster), int(time.time())

    still_valid = post(resign(real, key, exp=now + 600), nodes[0])
    assert still_valid.status_code == 200, still_valid.content  # our signing is the cluster's
    expired = post(resign(real, key, exp=now - 3600), nodes[0], uuid="GPU-sa-e2e-1")
    assert expired.status_code == 401, expired.content
    assert "expired" in message(expired)


def test_the_token_of_a_deleted_pod_is_401(namespace: str, nodes: list[str], kube: RealKubeClient) -> None:
    mirror(kube, nodes[0])
    pod = start_pod(kube, namespace, "agent-gone", nodes[0])
    token = request_token(kube, namespace, pod)
    kube.delete(pod_path(namespace, pod.name))
    wait_for(lambda: kube.get(pod_path(namespace, pod.name)) is None, 60, "the pod deleted")
    response = post(token, nodes[0])
    assert response.status_code == 401, response.content
    assert "did not accept" in message(response)
    assert not Gpu.objects.exists()  # no GPU row, so no sample either


def test_a_pod_on_a_node_the_portal_does_not_mirror_is_refused(
    namespace: str, nodes: list[str], kube: RealKubeClient
) -> None:
    mirror(kube, nodes[0])  # the second node has no Node row
    token = request_token(kube, namespace, start_pod(kube, namespace, "agent-b", nodes[1]))
    for claimed in nodes:
        response = post(token, claimed)
        assert response.status_code == 403, response.content
        assert f"node {nodes[1]!r} is not known" in message(response)
    assert not Gpu.objects.exists()
