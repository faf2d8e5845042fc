"""The cluster objects behind the real node's Service routing, DNS and policy enforcement, as pure
builders.

CoreDNS runs as a process of the node (like the kubelet and kube-proxy), on the node's address; the
cluster DNS Service has no selector and one EndpointSlice naming that address, so kube-proxy routes
the Service's fixed ClusterIP (the kubelet's `clusterDNS`) there like any other Service.
"""

from __future__ import annotations

from deploy.localcluster.kube import JSON
from deploy.localcluster.realnode.config import DNS_IDENTITY, DNS_SERVICE_IP, POLICY_IDENTITY, Identity

DNS_NAMESPACE = "kube-system"
DNS_SERVICE = "kube-dns"
DNS_ROLE = "gpuportal:realnode-dns"
POLICY_ROLE = "gpuportal:realnode-network-policy"
READ = ["get", "list", "watch"]


def dns_role() -> JSON:
    """What CoreDNS's kubernetes plugin reads, and nothing more."""
    return _role(
        DNS_ROLE,
        [
            {"apiGroups": [""], "resources": ["services", "pods", "namespaces"], "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        ],
    )


def policy_role() -> JSON:
    """What kube-router's firewall reads (its own manifests' role, less what the router and the
    service proxy need): pods, namespaces, nodes and the policies."""
    return _role(
        POLICY_ROLE,
        [
            {
                "apiGroups": [""],
                "resources": ["pods", "namespaces", "nodes", "services", "endpoints"],
                "verbs": READ,
            },
            {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": READ},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": READ},
        ],
    )


def _role(name: str, rules: list[JSON]) -> JSON:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": rules,
    }


def role_binding(role: str, identity: Identity) -> JSON:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": identity.common_name}],
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
        (f"{rbac}/clusterrolebindings", role_binding(DNS_ROLE, DNS_IDENTITY)),
        (f"{rbac}/clusterroles", policy_role()),
        (f"{rbac}/clusterrolebindings", role_binding(POLICY_ROLE, POLICY_IDENTITY)),
        (f"/api/v1/namespaces/{DNS_NAMESPACE}/services", dns_service()),
        (f"/apis/discovery.k8s.io/v1/namespaces/{DNS_NAMESPACE}/endpointslices", dns_endpoints(node_ip)),
    ]
