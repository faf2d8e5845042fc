"""API paths of the objects the portal reads and writes (pure): the only place they are spelled."""

from __future__ import annotations

ALL_JOBS = "/apis/batch/v1/jobs"
ALL_PODS = "/api/v1/pods"
ALL_EVENTS = "/api/v1/events"
NODES = "/api/v1/nodes"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"  # noqa: S105 - a path


def jobs(namespace: str) -> str:
    return f"/apis/batch/v1/namespaces/{namespace}/jobs"


def job(namespace: str, name: str) -> str:
    return f"{jobs(namespace)}/{name}"


def pods(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods"


def pod(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


def services(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/services"


def secrets(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/secrets"


def network_policies(ns: str) -> str:
    return f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"


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


def node(name: str) -> str:
    return f"{NODES}/{name}"


def configmaps(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/configmaps"


def configmap(ns: str, name: str) -> str:
    return f"{configmaps(ns)}/{name}"


def role_binding(ns: str, name: str) -> str:
    return f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/{name}"


def claims(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/persistentvolumeclaims"


def claim(ns: str, name: str) -> str:
    return f"{claims(ns)}/{name}"


def storage_class(name: str) -> str:
    return f"/apis/storage.k8s.io/v1/storageclasses/{name}"
