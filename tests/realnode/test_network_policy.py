"""NetworkPolicies are enforced on the real node (kube-router's firewall), seen from real pods: a
policy that selects a pod refuses what it does not allow, and lets through what it does."""

from __future__ import annotations

from kubernetes import client

from accounts.models import Project
from deploy.localcluster import kube
from deploy.localcluster.realnode import RealNode
from tests.cluster.helpers import wait_for
from tests.realnode.helpers import delete_pods, real_pod, run_to_end, wait_terminated
from tests.realnode.test_services import _running, _serving
from workloads.k8s.builders import build_network_policy

# The name after "Name:" in nslookup's answer: the first "Address" it prints is its server's.
KUBERNETES = "kubernetes.default.svc.cluster.local"
API_SERVICE_IP = "10.0.0.1"


def _policy(name: str, allowed_from: dict[str, str] | None) -> client.V1NetworkPolicy:
    """Ingress to the `app: guarded` pod: nothing, or only from pods with these labels."""
    peers = [client.V1NetworkPolicyPeer(pod_selector=client.V1LabelSelector(match_labels=allowed_from))]
    return client.V1NetworkPolicy(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1NetworkPolicySpec(
            pod_selector=client.V1LabelSelector(match_labels={"app": "guarded"}),
            policy_types=["Ingress"],
            ingress=[client.V1NetworkPolicyIngressRule(_from=peers)] if allowed_from else None,
        ),
    )


def test_a_policy_refuses_what_it_does_not_allow_and_lets_through_what_it_does(
    real_node: RealNode, kube_api: client.ApiClient, k8s_namespace: str
) -> None:
    core, net = client.CoreV1Api(kube_api), client.NetworkingV1Api(kube_api)
    core.create_namespaced_pod(k8s_namespace, _serving("guarded", {"app": "guarded"}, "reached"))
    names = ["guarded"]
    try:
        ip = _running(core, k8s_namespace, "guarded")
        fetch = f'printf "GET / HTTP/1.0\\r\\n\\r\\n" | nc -w 3 {ip} 8080; echo "exit=$?"'

        def fetched(name: str, labels: dict[str, str] | None = None) -> str:
            names.append(name)
            core.create_namespaced_pod(k8s_namespace, real_pod(name, fetch, labels=labels))
            wait_terminated(core, k8s_namespace, name)
            log: str = core.read_namespaced_pod_log(name, k8s_namespace)
            return log

        def enforced(name: str, labels: dict[str, str] | None, *, reached: bool) -> str:
            """Fetch from new pods until the outcome is `reached`: the enforcer applies a new policy
            within its sync, and until then a fetch may still see the old rules."""

            def attempt() -> str | None:
                log = fetched(f"{name}-{len(names)}", labels)
                return log if ("reached" in log.splitlines()) == reached else None

            return wait_for(attempt, 60, f"{name}: the policy to be enforced")

        open_before = fetched("before")
        net.create_namespaced_network_policy(k8s_namespace, _policy("deny-all", None))
        refused = enforced("denied", None, reached=False)
        net.create_namespaced_network_policy(k8s_namespace, _policy("allow-friends", {"role": "friend"}))
        allowed = enforced("friend", {"role": "friend"}, reached=True)
        stranger = fetched("stranger")
        _, ns_log = run_to_end(core, k8s_namespace, "resolver", f"nslookup {KUBERNETES}; true")
        names.append("resolver")
    finally:
        delete_pods(core, k8s_namespace, names)

    assert "reached" in open_before.splitlines()  # no policy selects the pod: open
    assert "Connection refused" in refused  # seen as a refused connection
    assert "exit=0" not in refused
    assert "reached" in allowed.splitlines()  # the allowed peer completes
    assert "reached" not in stranger  # everyone else is still refused
    assert "exit=0" not in stranger
    assert API_SERVICE_IP in ns_log.split(KUBERNETES, 1)[-1], ns_log  # DNS is left alone


def _fetch(core: client.CoreV1Api, namespace: str, name: str, ip: str) -> str:
    """A pod in `namespace` asks `ip`:8080 for its page; its log says what came back and nc's exit.
    It waits 5 s first: kube-router adds a new pod to its policies' chains at its next sync, and
    until then the pod's own traffic passes (its egress rules are the pod's, unlike ingress)."""
    script = f'sleep 5; printf "GET / HTTP/1.0\\r\\n\\r\\n" | nc -w 3 {ip} 8080; echo "exit=$?"'
    _, log = run_to_end(core, namespace, name, script)
    return log


def test_the_tenant_policy_lets_dns_through_and_refuses_everything_else(
    real_node: RealNode, kube_api: client.ApiClient, k8s_namespace: str
) -> None:
    """The portal's own default-deny policy of a project namespace (workloads/k8s/builders.py), as
    the provisioner applies it: a job there resolves names, reaches nothing else, and nothing
    outside reaches it."""
    core = client.CoreV1Api(kube_api)
    tenant = f"{k8s_namespace}-tenant"
    kube.create_namespace(kube_api, tenant)
    policy = build_network_policy(Project(slug="tenant"))
    policy["metadata"]["namespace"] = tenant
    kube.create(kube_api, f"/apis/networking.k8s.io/v1/namespaces/{tenant}/networkpolicies", policy)
    core.create_namespaced_pod(k8s_namespace, _serving("outside", {"app": "outside"}, "reached"))
    core.create_namespaced_pod(tenant, _serving("inside", {"app": "inside"}, "reached"))
    outside, inside = _running(core, k8s_namespace, "outside"), _running(core, tenant, "inside")
    fetchers: list[str] = []

    def settled(namespace: str, ip: str) -> str:
        """Fetches from new pods until refused: the enforcer applies a new policy within its sync."""

        def refused() -> str | None:
            fetchers.append(f"fetch-{len(fetchers)}")
            log = _fetch(core, namespace, fetchers[-1], ip)
            return None if "reached" in log.splitlines() else log

        return wait_for(refused, 60, "the tenant policy to be enforced")

    try:
        egress = settled(tenant, outside)
        ingress = settled(k8s_namespace, inside)
        _, resolved = run_to_end(core, tenant, "resolver", f"nslookup {KUBERNETES}; true")
        control = _fetch(core, k8s_namespace, "control", outside)
    finally:
        kube.delete(kube_api, f"/api/v1/namespaces/{tenant}")
        delete_pods(core, k8s_namespace, ["outside", "control", *fetchers])

    assert "exit=0" not in egress  # the job reaches nothing outside its namespace
    assert "exit=0" not in ingress  # and nothing outside reaches it
    assert API_SERVICE_IP in resolved.split(KUBERNETES, 1)[-1], resolved  # but names resolve
    assert "reached" in control.splitlines()  # the same fetch from an unpoliced namespace completes
