"""Least privilege on the installed release: each ServiceAccount's `kubectl auth can-i --list` equals its
reviewed golden file, the forbidden checks all answer no, and the admission policy keeps the
namespace provisioner inside the tenant prefix and the restricted profile.

Set GPUPORTAL_UPDATE_GOLDEN=1 to rewrite the golden files; review the diff before committing."""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path

import pytest

from accounts.models import Project, Quota
from tests.helm.chart import JSON, Kube
from tests.helm.release import RELEASE, Release
from workloads.k8s import builders
from workloads.k8s.claims import build_claim
from workloads.k8s.worker_objects import SshKey
from workloads.models import ProjectVolume
from workloads.spec import JobSpec

pytestmark = pytest.mark.cluster
GOLDEN = Path(__file__).parent / "golden"
IDENTITIES = ["web", "worker", "controller", "provisioner", "beat", "node"]
TENANT = Project(slug="t04rbac", name="T04")
TENANT_QUOTA = Quota(gpus=2)
FORBIDDEN = [
    ("get", "secrets"),
    ("list", "secrets"),
    ("watch", "secrets"),
    ("create", "pods/exec"),
    ("create", "pods/attach"),
    ("create", "pods/portforward"),
    ("get", "nodes/proxy"),
    ("create", "nodes/proxy"),
    ("create", "pods"),
    ("impersonate", "users"),
    ("impersonate", "groups"),
    ("impersonate", "serviceaccounts"),
    ("escalate", "clusterroles"),
    ("escalate", "roles"),
    ("bind", "clusterroles/cluster-admin"),
    ("create", "clusterrolebindings"),
    ("create", "serviceaccounts/token"),
    ("patch", "validatingadmissionpolicies"),
    ("delete", "validatingadmissionpolicybindings"),
    ("create", "customresourcedefinitions"),
    ("delete", "namespaces"),
    ("delete", "persistentvolumeclaims"),  # a removed project volume keeps its data
    ("*", "*"),
]


def user(release: Release, identity: str) -> str:
    namespace = release.node_namespace if identity == "node" else release.namespace
    return f"system:serviceaccount:{namespace}:{RELEASE}-{identity}"


def tenant_bindings(release: Release) -> dict[str, list[tuple[str, str]]]:
    """The bindings the chart hands the portal (GPUPORTAL_TENANT_ROLE_BINDINGS of the web pods)."""
    web = release.kube.get("deployment", f"{RELEASE}-web", "-n", release.namespace)
    env = {e["name"]: e.get("value") for e in web["spec"]["template"]["spec"]["containers"][0]["env"]}
    raw: dict[str, list[str]] = json.loads(env["GPUPORTAL_TENANT_ROLE_BINDINGS"])
    return {role: [(s.split(":")[0], s.split(":")[1]) for s in refs] for role, refs in raw.items()}


def as_provisioner(release: Release, doc: JSON, *, check: bool = True) -> str:
    return release.kube.kubectl(
        "apply",
        "--server-side",
        "--field-manager",
        "gpu-portal",
        "-f",
        "-",
        f"--as={user(release, 'provisioner')}",
        stdin=json.dumps(doc),
        check=check,
    )


@pytest.fixture(scope="module")
def tenant(release: Release) -> str:
    """A tenant namespace made the portal's way: its own builders, applied as the provisioner."""
    for doc in [
        builders.build_namespace(TENANT),
        *builders.build_tenant_role_bindings(TENANT, tenant_bindings(release)),
    ]:
        as_provisioner(release, doc)
    return TENANT.namespace


def can_i_list(kube: Kube, who: str, namespace: str) -> list[str]:
    out = kube.kubectl("auth", "can-i", "--list", f"--as={who}", "-n", namespace)
    lines = [_normal(line) for line in out.splitlines()]
    return [lines[0], *sorted(set(lines[1:]))]


def _normal(line: str) -> str:
    """One row with single spacing, the release's names generic and the verbs sorted (kubectl
    merges rules in no fixed order)."""
    line = re.sub(r"\s{2,}", "  ", line.strip()).replace(RELEASE + "-", "<release>-")
    return re.sub(r"\[([a-z* ]+)\]$", lambda m: "[" + " ".join(sorted(m.group(1).split())) + "]", line)


@pytest.mark.parametrize("identity", IDENTITIES)
def test_the_verb_list_equals_the_reviewed_golden_file(release: Release, tenant: str, identity: str) -> None:
    sections = {
        "release namespace": release.namespace,
        "node namespace": release.node_namespace,
        "tenant namespace": tenant,
    }
    got = "".join(
        f"## {label}\n" + "\n".join(can_i_list(release.kube, user(release, identity), ns)) + "\n"
        for label, ns in sections.items()
    )
    path = GOLDEN / f"{identity}.txt"
    if os.environ.get("GPUPORTAL_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(got)
    assert got == path.read_text(), f"{identity}'s permissions changed; review and update {path}"


SUBRESOURCES = {"exec", "attach", "portforward", "proxy", "token", "log"}
# The API group of each resource the checks name. One SubjectAccessReview per check, all in one
# `kubectl create` of a List, answers what `kubectl auth can-i` answers without one process per check
# (690 processes took about 100 s). A wrong group would answer "no" for the wrong reason, so
# test_every_checked_resource_is_served_in_its_group holds this table to the server's discovery.
GROUPS = {
    "secrets": "",
    "pods": "",
    "nodes": "",
    "namespaces": "",
    "persistentvolumeclaims": "",
    "serviceaccounts": "",
    "users": "",  # users and groups are verbs' targets only (impersonate), never served
    "groups": "",
    "jobs": "batch",
    "clusterroles": "rbac.authorization.k8s.io",
    "roles": "rbac.authorization.k8s.io",
    "clusterrolebindings": "rbac.authorization.k8s.io",
    "validatingadmissionpolicies": "admissionregistration.k8s.io",
    "validatingadmissionpolicybindings": "admissionregistration.k8s.io",
    "customresourcedefinitions": "apiextensions.k8s.io",
    "*": "*",
}
NOT_SERVED = {"users", "groups", "*"}


def attributes(verb: str, resource: str, namespace: str) -> JSON:
    """The resourceAttributes of one check: "pods/exec" is a subresource, "clusterroles/x" a name,
    "jobs.batch" a group, as `kubectl auth can-i` reads them."""
    kind, _, rest = resource.partition("/")
    kind = kind.split(".")[0]
    found: JSON = {"verb": verb, "resource": kind, "group": GROUPS[kind], "namespace": namespace}
    if rest:
        found["subresource" if rest in SUBRESOURCES else "name"] = rest
    return found


def can_i_all(kube: Kube, who: str, checks: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], str]:
    """ "yes" or "no" for each (verb, resource, namespace), asked as the ServiceAccount `who` with the
    groups the API server gives a ServiceAccount's token."""
    sa_namespace = who.split(":")[2]
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{sa_namespace}", "system:authenticated"]
    reviews = [
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": who, "groups": groups, "resourceAttributes": attributes(*check)},
        }
        for check in checks
    ]
    out = kube.kubectl(
        "create",
        "-o",
        "json",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": reviews}),
    )
    items = json_stream(out)
    return {
        c: "yes" if item["status"].get("allowed") else "no" for c, item in zip(checks, items, strict=True)
    }


def json_stream(text: str) -> list[JSON]:
    """`kubectl create -o json` of a List prints one document per item, back to back, in order."""
    decoder, docs, at = json.JSONDecoder(), [], 0
    while at < len(text.rstrip()):
        doc, at = decoder.raw_decode(text, at)
        docs.append(doc)
        at = len(text) - len(text[at:].lstrip())
    return docs


def can_i(kube: Kube, who: str, verb: str, resource: str, namespace: str) -> str:
    return can_i_all(kube, who, [(verb, resource, namespace)])[(verb, resource, namespace)]


def test_every_checked_resource_is_served_in_its_group(release: Release) -> None:
    served = set(release.kube.kubectl("api-resources", "-o", "name").split())
    names = {f"{r}.{g}" if g else r for r, g in GROUPS.items() if r not in NOT_SERVED}
    assert names - served == set(), "GROUPS names a resource the API server does not serve in that group"
    used = {resource.split("/")[0] for _, resource in FORBIDDEN}
    assert used <= set(GROUPS), "a FORBIDDEN resource has no group in GROUPS"


@pytest.mark.parametrize("identity", IDENTITIES)
def test_every_forbidden_check_answers_no(release: Release, tenant: str, identity: str) -> None:
    namespaces = [tenant, release.namespace, release.node_namespace, "kube-system", "default"]
    checks = [(verb, res, ns) for verb, res in FORBIDDEN for ns in namespaces]
    if identity != "provisioner":  # only the provisioner writes namespaces
        checks.append(("patch", "namespaces", "default"))
    answers = can_i_all(release.kube, user(release, identity), checks)
    assert {k: v for k, v in answers.items() if v != "no"} == {}


def test_the_reviews_agree_with_kubectl_auth_can_i(release: Release, tenant: str) -> None:
    """The batched reviews against the real `kubectl auth can-i --as` on a mixed set, yes and no."""
    checks = [
        ("create", "jobs.batch", tenant),
        ("create", "jobs.batch", "default"),
        ("get", "pods/log", tenant),
        ("create", "pods/exec", tenant),
        ("patch", "namespaces", "default"),
        ("bind", "clusterroles/cluster-admin", tenant),
    ]
    seen: set[str] = set()
    for identity in ("worker", "web", "provisioner"):
        who = user(release, identity)
        reviewed = can_i_all(release.kube, who, checks)
        assert reviewed == {c: kubectl_can_i(release.kube, who, *c) for c in checks}, identity
        seen |= set(reviewed.values())
    assert seen == {"yes", "no"}


def kubectl_can_i(kube: Kube, who: str, verb: str, resource: str, namespace: str) -> str:
    # `can-i get nodes/proxy` asks about a node *named* proxy; a subresource needs --subresource.
    kind, _, sub = resource.partition("/")
    args = [kind, f"--subresource={sub}"] if sub in SUBRESOURCES else [resource]
    out = kube.kubectl("auth", "can-i", verb, *args, f"--as={who}", "-n", namespace, check=False)
    return out.strip().splitlines()[0]


def test_the_tenant_bindings_grant_job_writes_inside_the_tenant_only(release: Release, tenant: str) -> None:
    worker = user(release, "worker")
    assert can_i(release.kube, worker, "create", "jobs.batch", tenant) == "yes"
    assert can_i(release.kube, worker, "create", "jobs.batch", "default") == "no"
    assert can_i(release.kube, user(release, "web"), "get", "pods/log", tenant) == "yes"
    assert can_i(release.kube, user(release, "web"), "get", "pods/log", "default") == "no"
    assert can_i(release.kube, user(release, "web"), "create", "jobs.batch", tenant) == "no"


def test_the_policy_refuses_relabelling_a_foreign_namespace(release: Release, tenant: str) -> None:
    labels = {"pod-security.kubernetes.io/enforce": "privileged"}
    foreign = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": labels}}
    out = as_provisioner(release, foreign, check=False)
    assert "the namespace provisioner writes only namespaces named gp-*, not default" in out
    now = release.kube.get("namespace", "default")["metadata"].get("labels", {})
    assert "pod-security.kubernetes.io/enforce" not in now


def test_the_policy_refuses_a_privileged_tenant(release: Release, tenant: str) -> None:
    doc = builders.build_namespace(TENANT)
    doc["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "privileged"
    out = as_provisioner(release, doc, check=False)
    assert "tenant namespaces keep the restricted Pod Security profile" in out
    labels = release.kube.get("namespace", tenant)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


@pytest.mark.parametrize("mode", ["enforce", "audit", "warn"])
def test_the_policy_refuses_a_tenant_pinned_to_an_old_profile(
    release: Release, tenant: str, mode: str
) -> None:
    doc = builders.build_namespace(TENANT)
    doc["metadata"]["labels"][f"pod-security.kubernetes.io/{mode}-version"] = "v1.22"
    out = as_provisioner(release, doc, check=False)
    assert "tenant namespaces follow the current restricted profile" in out
    labels = release.kube.get("namespace", tenant)["metadata"]["labels"]
    assert labels.get(f"pod-security.kubernetes.io/{mode}-version", "latest") == "latest"
    doc["metadata"]["labels"][f"pod-security.kubernetes.io/{mode}-version"] = "latest"
    as_provisioner(release, doc)  # latest is the current profile: allowed


def test_the_worker_cordons_nodes_and_changes_nothing_else_of_them(release: Release) -> None:
    kube, worker = release.kube, f"--as={user(release, 'worker')}"
    node = kube.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}")
    try:
        kube.kubectl("patch", "node", node, worker, "-p", '{"spec":{"unschedulable":true}}')
        assert kube.get("node", node)["spec"]["unschedulable"] is True
        refused = {
            "label": '{"metadata":{"labels":{"gpuportal.dev/x":"1"}}}',
            "annotation": '{"metadata":{"annotations":{"gpuportal.dev/x":"1"}}}',
            "taint": '{"spec":{"taints":[{"key":"gpuportal.dev/x","effect":"NoSchedule"}]}}',
        }
        for what, patch in refused.items():
            out = kube.kubectl("patch", "node", node, worker, "-p", patch, check=False)
            assert "changes a node's spec.unschedulable only" in out, (what, out)
        after = kube.get("node", node)
        assert "gpuportal.dev/x" not in after["metadata"].get("labels", {})
        assert "gpuportal.dev/x" not in after["metadata"].get("annotations", {})
        assert not [t for t in after["spec"].get("taints", []) if t["key"] == "gpuportal.dev/x"]
    finally:
        kube.kubectl("patch", "node", node, "-p", '{"spec":{"unschedulable":null}}')


def test_the_policy_refuses_guard_rails_outside_the_prefix(release: Release, tenant: str) -> None:
    quota = builders.build_resource_quota(TENANT, TENANT_QUOTA)
    quota["metadata"]["namespace"] = "default"
    assert "writes only namespaces named gp-*, not default" in as_provisioner(release, quota, check=False)


def test_the_policy_and_rbac_refuse_bindings_beyond_the_tenant_roles(release: Release, tenant: str) -> None:
    role, subjects = sorted(tenant_bindings(release).items())[0]
    foreign = builders.build_tenant_role_bindings(TENANT, {role: [*subjects, ("default", "default")]})[0]
    assert "bind only the chart's tenant roles to the portal's own ServiceAccounts" in as_provisioner(
        release, foreign, check=False
    )
    admin = builders.build_tenant_role_bindings(TENANT, {"cluster-admin": subjects})[0]
    out = as_provisioner(release, admin, check=False)
    assert "is attempting to grant RBAC permissions not currently held" in out or "cannot bind" in out


def test_the_provisioner_makes_volume_claims_in_tenants_only(release: Release, tenant: str) -> None:
    volume = ProjectVolume(
        project=TENANT, name="scratch", claim_name="t04-scratch", storage_class="x", size_gib=1
    )
    claim = build_claim(volume, tenant)
    as_provisioner(release, claim)
    made = release.kube.get("persistentvolumeclaim", "t04-scratch", "-n", tenant)
    assert made["spec"]["resources"]["requests"]["storage"] == "1Gi"
    claim["metadata"]["namespace"] = "default"
    assert "writes only namespaces named gp-*, not default" in as_provisioner(release, claim, check=False)


def as_worker(release: Release, *args: str, stdin: str | None = None) -> str:
    return release.kube.kubectl(*args, f"--as={user(release, 'worker')}", stdin=stdin, check=False)


def test_the_worker_releases_a_gated_worker_and_makes_only_that_jobs_service_policy_and_secret(
    release: Release, tenant: str
) -> None:
    kube = release.kube
    ids = builders.JobIdentity(uuid.UUID(int=49), "job-t49", tenant, TENANT.slug, 5000)
    job = builders.build_job(JobSpec(image="registry.example.com/x:1", workers=2), ids, simulation=False)
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": job["spec"]["template"]["spec"]}
    pod["metadata"] = {**job["spec"]["template"]["metadata"], "name": "job-t49-0", "namespace": tenant}
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(pod))  # as the Job controller would
    owner = {**job, "metadata": {**job["metadata"], "uid": str(uuid.UUID(int=50))}}

    relabel = json.dumps({"metadata": {"labels": {builders.UID_LABEL: "another-job"}}})
    out = as_worker(release, "patch", "pod", "job-t49-0", "-n", tenant, "--type=merge", "-p", relabel)
    assert "only pins a job's gated pod to a node and lifts its gate" in out
    node = kube.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}")
    release_patch = json.dumps(builders.worker_release(node))
    as_worker(release, "patch", "pod", "job-t49-0", "-n", tenant, "--type=merge", "-p", release_patch)
    made = kube.get("pod", "job-t49-0", "-n", tenant)
    assert not made["spec"].get("schedulingGates")
    assert made["spec"]["affinity"] == builders.node_pin(node)
    assert made["metadata"]["labels"][builders.UID_LABEL] == str(ids.uid)

    def create(doc: JSON) -> str:
        return as_worker(release, "create", "-f", "-", stdin=json.dumps(doc))

    service, policy = builders.build_worker_service(ids, owner), builders.build_worker_policy(ids, owner)
    ports = [{"port": 29500}]
    exposed = {
        **service,
        "spec": {"selector": service["spec"]["selector"], "type": "NodePort", "ports": ports},
    }
    assert "only a job's headless Service" in create(exposed)
    wider = json.loads(json.dumps(policy))
    wider["spec"]["ingress"][0]["from"].append({"ipBlock": {"cidr": "0.0.0.0/0"}})
    assert "only a policy that opens one job's pods to each other" in create(wider)
    other = json.loads(json.dumps(policy))
    other["spec"]["egress"][0]["to"][0]["podSelector"]["matchLabels"] = {builders.UID_LABEL: "another-job"}
    assert "only a policy that opens one job's pods to each other" in create(other)
    assert "created" in create(service)
    assert "created" in create(policy)
    # A Secret the API server would fill with a ServiceAccount's token is not the job's SSH Secret.
    ssh = builders.build_worker_ssh(JobSpec(image="x", workers=2), ids, owner, SshKey("private", "public"))
    token = {**ssh, "type": "kubernetes.io/service-account-token"}
    token["metadata"] = {**ssh["metadata"], "annotations": {"kubernetes.io/service-account.name": "default"}}
    assert "only a job's SSH Secret" in create(token)
    unowned = {**ssh, "metadata": {k: v for k, v in ssh["metadata"].items() if k != "ownerReferences"}}
    assert "only a job's SSH Secret" in create(unowned)
    assert "created" in create(ssh)
    assert "cannot get" in as_worker(release, "get", "secret", ssh["metadata"]["name"], "-n", tenant)
    assert "cannot delete" in as_worker(
        release, "delete", "networkpolicy", policy["metadata"]["name"], "-n", tenant
    )
