"""Service routing and cluster DNS on the real node, seen from real pods: kube-proxy sends a
ClusterIP's traffic to the Service's pods, and CoreDNS answers the cluster domain (Services, and a
headless Service's pods by name, as the workers of a job will find each other)."""

from __future__ import annotations

import uuid

from kubernetes import client

from deploy.localcluster.realnode import RealNode
from deploy.localcluster.realnode import config as rc
from tests.cluster.helpers import wait_for
from tests.realnode.helpers import delete_pods, read_pod, real_pod, run_to_end

# busybox's sh has no `seq`: retried by hand while kube-proxy's next sync picks a new endpoint up.
RETRY = "i=0; until {command}; do i=$((i+1)); [ $i -ge 40 ] && exit 1; sleep 0.25; done"
# Debian's static busybox: its wget crashes (even on an address) and its nc cannot look a name up
# (static glibc cannot load NSS). So HTTP goes through nc to an address that busybox's nslookup,
# which has a resolver of its own, found (its last answer).
LOOKUP = "$(nslookup {name} | sed -n 's/^Address: *\\([0-9.]*\\)$/\\1/p' | tail -n 1)"


def _serving(
    name: str, labels: dict[str, str], text: str, hostname: str | None = None, subdomain: str | None = None
) -> client.V1Pod:
    """A pod answering HTTP on 8080 with `text`."""
    script = f"mkdir -p /www && echo {text} > /www/index.html && exec httpd -f -p 8080 -h /www"
    return real_pod(name, script, labels=labels, hostname=hostname, subdomain=subdomain)


def _cluster_ip(core: client.CoreV1Api, namespace: str, name: str) -> str:
    ip: str = core.read_namespaced_service(name, namespace).to_dict()["spec"]["cluster_ip"]
    return ip


def _service(name: str, selector: dict[str, str], *, headless: bool = False) -> client.V1Service:
    return client.V1Service(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1ServiceSpec(
            selector=selector,
            cluster_ip="None" if headless else None,
            ports=[client.V1ServicePort(name="http", port=80, target_port=8080)],
        ),
    )


def _answered(log: str, ip: str) -> bool:
    """busybox nslookup printed `ip` as an answer (not as the server's own address, which has :53)."""
    return any(ip in line.split() for line in log.splitlines() if line.startswith("Address"))


def _running(core: client.CoreV1Api, namespace: str, name: str) -> str:
    def probe() -> str | None:
        status = read_pod(core, namespace, name)["status"]
        ip: str | None = status["pod_ip"]
        return ip if status["phase"] == "Running" and ip else None

    return wait_for(probe, 60, f"pod {name} to run")


def test_a_pod_finds_a_service_by_name_and_reaches_its_pod_and_one_without_pods_is_refused(
    real_node: RealNode, kube_api: client.ApiClient, k8s_namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    marker = f"served-{uuid.uuid4().hex[:8]}"
    core.create_namespaced_pod(k8s_namespace, _serving("echo-0", {"app": "echo"}, marker))
    core.create_namespaced_service(k8s_namespace, _service("echo", {"app": "echo"}))
    core.create_namespaced_service(k8s_namespace, _service("nobody", {"app": "nobody"}))
    try:
        _running(core, k8s_namespace, "echo-0")
        cluster_ip = _cluster_ip(core, k8s_namespace, "echo")
        domain = f"{k8s_namespace}.svc.{rc.CLUSTER_DOMAIN}"
        echo, nobody = LOOKUP.format(name=f"echo.{domain}"), LOOKUP.format(name=f"nobody.{domain}")
        fetch = RETRY.format(command=f'printf "GET / HTTP/1.0\\r\\n\\r\\n" | nc -w 2 "{echo}" 80')
        script = f'echo "echo is $(echo {echo})"; {fetch}; nc -w 2 "{nobody}" 80 < /dev/null; echo $?'

        code, log = run_to_end(core, k8s_namespace, "client", script)
    finally:
        delete_pods(core, k8s_namespace, ["echo-0", "client"])

    assert cluster_ip.startswith("10.0.0.")  # a ClusterIP of the API server's Service range
    assert f"echo is {cluster_ip}" in log  # found by name through the cluster DNS
    assert code == 0, log
    lines = log.splitlines()
    assert marker in lines  # through the ClusterIP to the pod
    assert lines[-1] != "0"  # no endpoints: kube-proxy rejects, the fetch fails


def test_cluster_dns_answers_services_and_a_headless_services_pods(
    real_node: RealNode, kube_api: client.ApiClient, k8s_namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    peer = _serving("peer-0", {"app": "peer"}, "peer", hostname="w0", subdomain="peers")
    core.create_namespaced_pod(k8s_namespace, peer)
    core.create_namespaced_service(k8s_namespace, _service("peers", {"app": "peer"}, headless=True))
    core.create_namespaced_service(k8s_namespace, _service("front", {"app": "peer"}))
    domain = f"{k8s_namespace}.svc.{rc.CLUSTER_DOMAIN}"
    try:
        peer_ip = _running(core, k8s_namespace, "peer-0")
        front_ip = _cluster_ip(core, k8s_namespace, "front")
        lookups = [
            RETRY.format(command=f"nslookup w0.peers.{domain} > /tmp/peer"),
            "cat /tmp/peer",
            f"nslookup front.{domain}",
            f"nslookup no-such-service.{domain} && echo UNEXPECTED",
            "cat /etc/resolv.conf",
        ]
        code, log = run_to_end(core, k8s_namespace, "resolver", "; ".join(lookups) + "; true")
        warned = [
            e.reason
            for e in core.list_namespaced_event(k8s_namespace).items
            if e.reason == "MissingClusterDNS"
        ]
    finally:
        delete_pods(core, k8s_namespace, ["peer-0", "resolver"])

    assert code == 0, log
    assert _answered(log, peer_ip)  # the headless Service's pod, by hostname.subdomain
    assert _answered(log, front_ip)  # a Service, by its full name
    assert "UNEXPECTED" not in log  # a name nobody has is not made up
    assert f"nameserver {rc.DNS_SERVICE_IP}" in log  # the kubelet's clusterDNS, behind kube-proxy
    assert warned == []  # the kubelet no longer warns that pods have no cluster DNS
