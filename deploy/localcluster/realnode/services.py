"""The cluster objects behind the real node's Service routing and DNS, as pure builders.

CoreDNS runs as a process of the node (like the kubelet and kube-proxy), on the node's address; the
cluster DNS Service has no selector and one EndpointSlice naming that address, so kube-proxy routes
the Service's fixed ClusterIP (the kubelet's `clusterDNS`) there like any other Service.
"""

from __future__ import annotations

from deploy.localcluster.kube import JSON
from deploy.localcluster.realnode.config import DNS_IDENTITY, DNS_SERVICE_IP

DNS_NAMESPACE = "kube-system"
DNS_SERVICE = "kube-dns"
DNS_ROLE = "gpuportal:realnode-dns"


def dns_role() -> JSON:
    """What CoreDNS's kubernetes plugin reads, and nothing more."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": DNS_ROLE},
        "rules": [
            {"apiGroups": [""], "resources": ["services", "pods", "namespaces"], "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        ],
    }


def dns_role_binding() -> JSON:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": DNS_ROLE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": DNS_ROLE},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": DNS_IDENTITY.common_name}
        ],
    }


def _dns_ports() -> list[JSON]:
    return [
        {"name": "dns", "protocol": "UDP", "port": 53},
        {"name": "dns-tcp", "protocol": "TCP", "port": 53},
    ]


def dns_service() -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": DNS_SERVICE, "namespace": DNS_NAMESPACE, "labels": {"k8s-app": "kube-dns"}},
        "spec": {"clusterIP": DNS_SERVICE_IP, "ports": [{**p, "targetPort": 53} for p in _dns_ports()]},
    }


def dns_endpoints(node_ip: str) -> JSON:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{DNS_SERVICE}-node",
            "namespace": DNS_NAMESPACE,
            # Ties the slice to the Service; no controller manages it (the Service has no selector).
            "labels": {"kubernetes.io/service-name": DNS_SERVICE},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [node_ip], "conditions": {"ready": True}}],
        "ports": _dns_ports(),
    }


def objects(node_ip: str) -> list[tuple[str, JSON]]:
    """(collection path, object) in the order they can be created."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    return [
        (f"{rbac}/clusterroles", dns_role()),
        (f"{rbac}/clusterrolebindings", dns_role_binding()),
        (f"/api/v1/namespaces/{DNS_NAMESPACE}/services", dns_service()),
        (f"/apis/discovery.k8s.io/v1/namespaces/{DNS_NAMESPACE}/endpointslices", dns_endpoints(node_ip)),
    ]
