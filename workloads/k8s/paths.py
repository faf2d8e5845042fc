"""API paths of the objects the portal manages (pure)."""

from __future__ import annotations


def jobs(namespace: str) -> str:
    return f"/apis/batch/v1/namespaces/{namespace}/jobs"


def job(namespace: str, name: str) -> str:
    return f"{jobs(namespace)}/{name}"


def pods(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods"


def pod_log(namespace: str, name: str) -> str:
    return f"{pods(namespace)}/{name}/log"


def namespace(name: str) -> str:
    return f"/api/v1/namespaces/{name}"


def resource_quota(ns: str, name: str) -> str:
    return f"/api/v1/namespaces/{ns}/resourcequotas/{name}"


def limit_range(ns: str, name: str) -> str:
    return f"/api/v1/namespaces/{ns}/limitranges/{name}"


def network_policy(ns: str, name: str) -> str:
    return f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/{name}"


def lease(ns: str, name: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}"


def leases(ns: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
