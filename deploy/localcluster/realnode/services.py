"""The cluster objects behind the real node's Service routing, DNS and policy enforcement, as pure
builders.

CoreDNS runs as a pod in kube-system, as kubeadm runs it: the cluster DNS Service at its fixed
ClusterIP (the kubelet's `clusterDNS`) selects it, and tenant NetworkPolicies that let DNS through
to kube-system's pods let it through here too. kube-proxy and kube-router run as processes of the
node; kube-router reads the API with a client certificate bound to the read-only role below.
"""

from __future__ import annotations

from deploy.localcluster.kube import JSON
from deploy.localcluster.realnode.config import (
    COREDNS_IMAGE,
    DNS_SERVICE_IP,
    POLICY_IDENTITY,
    REAL_NODE_LABEL,
    corefile,
)

DNS_NAMESPACE = "kube-system"
DNS_NAME = "coredns"
DNS_SERVICE = "kube-dns"
DNS_LABELS = {"k8s-app": "kube-dns"}
DNS_ROLE = "gpuportal:realnode-dns"
POLICY_ROLE = "gpuportal:realnode-network-policy"
READ = ["get", "list", "watch"]


def dns_role() -> JSON:
    """What CoreDNS's kubernetes plugin reads, and nothing more."""
    return _cluster_role(
        DNS_ROLE,
        [
            {"apiGroups": [""], "resources": ["services", "pods", "namespaces"], "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        ],
    )


def policy_role() -> JSON:
    """What kube-router's firewall reads (its own manifests' role, less what the router and the
    service proxy need): pods, namespaces, nodes and the policies."""
    return _cluster_role(
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


def _cluster_role(name: str, rules: list[JSON]) -> JSON:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": rules,
    }


def _binding(role: str, subject: JSON) -> JSON:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [subject],
    }


def policy_binding() -> JSON:
    user = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": POLICY_IDENTITY.common_name}
    return _binding(POLICY_ROLE, user)


def dns_binding() -> JSON:
    return _binding(DNS_ROLE, {"kind": "ServiceAccount", "name": DNS_NAME, "namespace": DNS_NAMESPACE})


def _meta(name: str) -> JSON:
    return {"name": name, "namespace": DNS_NAMESPACE, "labels": dict(DNS_LABELS)}


def dns_service_account() -> JSON:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(DNS_NAME)}


def dns_config() -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(DNS_NAME),
        "data": {"Corefile": corefile()},
    }


def _dns_ports() -> list[JSON]:
    return [
        {"name": "dns", "protocol": "UDP", "port": 53},
        {"name": "dns-tcp", "protocol": "TCP", "port": 53},
    ]


def dns_deployment() -> JSON:
    """One CoreDNS on the real node (its label and taint), ready when its `ready` plugin says so."""
    container = {
        "name": DNS_NAME,
        "image": COREDNS_IMAGE,
        "imagePullPolicy": "Never",
        "args": ["-conf", "/etc/coredns/Corefile"],
        "ports": [{"name": p["name"], "containerPort": 53, "protocol": p["protocol"]} for p in _dns_ports()],
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 1},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
        },
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": True}],
    }
    pod = {
        "serviceAccountName": DNS_NAME,
        "nodeSelector": {REAL_NODE_LABEL: "true"},
        "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
        "terminationGracePeriodSeconds": 2,
        "containers": [container],
        "volumes": [{"name": "config", "configMap": {"name": DNS_NAME}}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(DNS_NAME),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(DNS_LABELS)},
            "template": {"metadata": {"labels": dict(DNS_LABELS)}, "spec": pod},
        },
    }


def dns_service() -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(DNS_SERVICE),
        "spec": {
            "clusterIP": DNS_SERVICE_IP,
            "selector": dict(DNS_LABELS),
            "ports": [{**p, "targetPort": 53} for p in _dns_ports()],
        },
    }


def objects() -> list[tuple[str, JSON]]:
    """(collection path, object) in the order they can be created."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    ns = f"/api/v1/namespaces/{DNS_NAMESPACE}"
    return [
        (f"{rbac}/clusterroles", dns_role()),
        (f"{rbac}/clusterroles", policy_role()),
        (f"{rbac}/clusterrolebindings", policy_binding()),
        (f"{ns}/serviceaccounts", dns_service_account()),
        (f"{rbac}/clusterrolebindings", dns_binding()),
        (f"{ns}/configmaps", dns_config()),
        (f"/apis/apps/v1/namespaces/{DNS_NAMESPACE}/deployments", dns_deployment()),
        (f"{ns}/services", dns_service()),
    ]
