"""The site file: validated, then rendered into the Ansible inventory, the kubeadm configurations and the
portal chart's values. The one place site values come from (docs/cluster-setup.md).

    python deploy/cluster/sitefile.py check  SITE.yaml            # validate only; exit 1 naming the field
    python deploy/cluster/sitefile.py render SITE.yaml OUT_DIR    # inventory, kubeadm/, portal values

Validation is the JSON Schema (site.schema.json, every field's type and form) and then what a schema
cannot say: unique names and addresses, at least one control plane, an odd number of them, a
control-plane endpoint that is not a node's address when there are several, CIDRs that do not overlap,
the registry CA file present. Nothing is changed on any host before this passes.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

HERE = Path(__file__).resolve().parent
SCHEMA = HERE / "site.schema.json"
JSON = dict[str, Any]
# Where kubeadm join writes nothing lasting: the join configuration (with its token) lives in /run
# (tmpfs) for the length of the join only. These markers are replaced there, never in a file on disk.
JOIN_TOKEN = "@JOIN_TOKEN@"  # noqa: S105 (a marker, not a token)
CA_CERT_HASH = "@CA_CERT_HASH@"
CERTIFICATE_KEY = "@CERTIFICATE_KEY@"
KUBEADM_API = "kubeadm.k8s.io/v1beta4"
# The token kubeadm init makes lives this long (kubeadm's default: a day); join.yml makes its own.
BOOTSTRAP_TOKEN_TTL = "30m0s"  # noqa: S105 (a lifetime, not a token)
CRI_SOCKET = "unix:///run/containerd/containerd.sock"


class SiteError(ValueError):
    """A site file that must not be used; the message names each bad field."""


@dataclass
class Site:
    data: JSON
    path: Path
    problems: list[str] = field(default_factory=list)

    @property
    def nodes(self) -> list[JSON]:
        nodes: list[JSON] = self.data["nodes"]
        return nodes

    def with_role(self, role: str) -> list[JSON]:
        return [n for n in self.nodes if role in n["roles"]]

    @property
    def first_control_plane(self) -> JSON:
        return self.with_role("control-plane")[0]

    @property
    def gpu_nodes(self) -> list[JSON]:
        return [n for n in self.nodes if n["gpus"] > 0]


def _where(path: Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _apply_defaults(schema: JSON, value: Any) -> Any:
    """Fill the schema's defaults into a valid document (objects and arrays of objects)."""
    if isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                value[key] = _apply_defaults(sub, value[key])
    elif isinstance(value, list) and "items" in schema:
        value = [_apply_defaults(schema["items"], item) for item in value]
    return value


def _schema_problems(data: Any) -> list[str]:
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    problems = []
    for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        where = _where(error.absolute_path)
        if error.validator == "required":
            missing = error.message.split("'")[1]
            where = f"{where}.{missing}" if error.absolute_path else missing
            problems.append(f"{where}: missing (required)")
        elif error.validator == "additionalProperties":
            problems.append(f"{where}: {error.message} (a misspelt key?)")
        else:
            problems.append(f"{where}: {error.message}")
    return problems


def _network(text: str) -> ipaddress.IPv4Network | None:
    try:
        return ipaddress.IPv4Network(text, strict=True)
    except ValueError:
        return None


def _semantic_problems(site: Site, base: Path) -> list[str]:
    d = site.data
    problems: list[str] = []
    for key in ("name", "address"):
        seen: dict[str, int] = {}
        for i, node in enumerate(site.nodes):
            if node[key] in seen:
                problems.append(f"nodes[{i}].{key}: {node[key]!r} is also nodes[{seen[node[key]]}].{key}")
            seen.setdefault(node[key], i)
    planes = site.with_role("control-plane")
    if not planes:
        problems.append("nodes: no node has the role control-plane")
    elif len(planes) % 2 == 0:
        problems.append(f"nodes: {len(planes)} control-plane nodes; etcd needs an odd number (1, 3, 5)")
    if len(planes) > 1:
        host = d["cluster"]["control_plane_endpoint"].rsplit(":", 1)[0]
        if host in {n["address"] for n in planes}:
            problems.append(
                "cluster.control_plane_endpoint: with several control planes it must be a VIP or DNS name "
                f"in front of them, not one node's address ({host})"
            )
    nets = {}
    for key in ("pod_cidr", "service_cidr"):
        net = _network(d["network"][key])
        if net is None:
            problems.append(f"network.{key}: {d['network'][key]!r} has host bits set")
        else:
            nets[key] = net
    if len(nets) == 2 and nets["pod_cidr"].overlaps(nets["service_cidr"]):
        problems.append("network.service_cidr: overlaps network.pod_cidr")
    for i, node in enumerate(site.nodes):
        address = ipaddress.IPv4Address(node["address"])
        for key, net in nets.items():
            if address in net:
                problems.append(f"nodes[{i}].address: {address} lies inside network.{key} {net}")
        if node["gpus"] and "worker" not in node["roles"]:
            problems.append(f"nodes[{i}].roles: a node with gpus must have the role worker")
    ca = base / d["registry"]["ca_file"]
    if not ca.is_file():
        problems.append(f"registry.ca_file: {ca} does not exist")
    elif "BEGIN CERTIFICATE" not in ca.read_text(errors="replace"):
        problems.append(f"registry.ca_file: {ca} is not a PEM certificate")
    return problems


def load(path: Path) -> Site:
    """The validated site with defaults filled in; SiteError naming every bad field otherwise."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SiteError(f"{path}: cannot read the site file: {exc}") from exc
    problems = _schema_problems(data)
    if problems:
        raise SiteError(f"{path}: invalid site file:\n  " + "\n  ".join(problems))
    schema = json.loads(SCHEMA.read_text())
    site = Site(_apply_defaults(schema, data), path)
    problems = _semantic_problems(site, path.parent)
    if problems:
        raise SiteError(f"{path}: invalid site file:\n  " + "\n  ".join(problems))
    return site


def minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def inventory(site: Site) -> JSON:
    """The Ansible inventory: the groups by role, and every site value as a variable of all hosts."""
    d = site.data
    ca = (site.path.parent / d["registry"]["ca_file"]).resolve()

    def hosts(nodes: list[JSON]) -> JSON:
        return {
            n["name"]: {
                "ansible_host": n["address"],
                "node_address": n["address"],
                "node_interface": n.get("interface", d["network"]["interface"]),
                "node_gpus": n["gpus"],
            }
            for n in nodes
        }

    first = site.first_control_plane
    variables = {
        "ansible_user": d["cluster"]["ssh_user"],
        "cluster_name": d["cluster"]["name"],
        "control_plane_endpoint": d["cluster"]["control_plane_endpoint"],
        "first_control_plane": first["name"],
        "time_servers": d["cluster"]["time_servers"],
        "network": d["network"],
        "kubernetes_version": d["kubernetes"]["version"],
        "kubernetes_minor": minor(d["kubernetes"]["version"]),
        "kubernetes_package_version": f"{d['kubernetes']['version']}-{d['kubernetes']['package_revision']}",
        "containerd_version": d["containerd"]["version"],
        "sandbox_image": d["containerd"]["sandbox_image"],
        "registry": {**d["registry"], "ca_path": str(ca)},
        "nfs": d["storage"]["nfs"],
        "gpu": d["gpu"],
        "portal": {k: v for k, v in d["portal"].items() if k != "values"},
        "render_dir": "",  # set by cluster.sh: where kubeadm/ and portal-values.yaml were rendered
        "host_live": True,  # false only for a root filesystem (tests/cluster_setup): no live kernel changes
    }
    planes = site.with_role("control-plane")
    children = {
        "first_control_plane": {"hosts": hosts([first])},
        "control_plane": {"hosts": hosts(planes)},
        "workers": {"hosts": hosts([n for n in site.with_role("worker") if n not in planes])},
        "gpu_nodes": {"hosts": hosts(site.gpu_nodes)},
    }
    return {"all": {"vars": variables, "children": children}}


def _kubelet_config(site: Site) -> JSON:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "systemd",
        "containerRuntimeEndpoint": CRI_SOCKET,
        "clusterDomain": site.data["network"]["dns_domain"],
        "serverTLSBootstrap": False,
        "failSwapOn": True,
    }


def _node_registration(site: Site, node: JSON) -> JSON:
    reg: JSON = {
        "name": node["name"],
        "criSocket": CRI_SOCKET,
        "kubeletExtraArgs": [{"name": "node-ip", "value": node["address"]}],
    }
    taints: list[JSON] = []
    if node["gpus"] and site.data["gpu"]["taint"]:
        # Only pods that ask for GPUs land here (ExtendedResourceToleration adds their toleration).
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
    if "worker" in node["roles"] or taints:
        reg["taints"] = taints  # replaces kubeadm's control-plane taint: a worker role runs pods
    return reg


def kubeadm_configs(site: Site) -> dict[str, str]:
    """Per node, its kubeadm configuration (multi-document YAML): init for the first control plane,
    join (with the @...@ markers for the secrets) for the others."""
    d = site.data
    first = site.first_control_plane
    cluster = {
        "apiVersion": KUBEADM_API,
        "kind": "ClusterConfiguration",
        "clusterName": d["cluster"]["name"],
        "kubernetesVersion": f"v{d['kubernetes']['version']}",
        "controlPlaneEndpoint": d["cluster"]["control_plane_endpoint"],
        "networking": {
            "podSubnet": d["network"]["pod_cidr"],
            "serviceSubnet": d["network"]["service_cidr"],
            "dnsDomain": d["network"]["dns_domain"],
        },
        "apiServer": {
            "certSANs": sorted(
                {
                    d["cluster"]["control_plane_endpoint"].rsplit(":", 1)[0],
                    *(n["address"] for n in site.with_role("control-plane")),
                }
            ),
            "extraArgs": [
                {"name": "enable-admission-plugins", "value": "NodeRestriction,ExtendedResourceToleration"}
            ],
        },
    }
    port = (
        int(d["cluster"]["control_plane_endpoint"].rsplit(":", 1)[1])
        if ":" in d["cluster"]["control_plane_endpoint"]
        else 6443
    )
    init = {
        "apiVersion": KUBEADM_API,
        "kind": "InitConfiguration",
        "bootstrapTokens": [
            {
                "ttl": BOOTSTRAP_TOKEN_TTL,
                "usages": ["signing", "authentication"],
                "groups": ["system:bootstrappers:kubeadm:default-node-token"],
            }
        ],
        "localAPIEndpoint": {"advertiseAddress": first["address"], "bindPort": port},
        "nodeRegistration": _node_registration(site, first),
    }
    out = {first["name"]: yaml.safe_dump_all([init, cluster, _kubelet_config(site)], sort_keys=False)}
    for node in site.nodes:
        if node is first:
            continue
        join: JSON = {
            "apiVersion": KUBEADM_API,
            "kind": "JoinConfiguration",
            "discovery": {
                "bootstrapToken": {
                    "apiServerEndpoint": d["cluster"]["control_plane_endpoint"],
                    "token": JOIN_TOKEN,
                    "caCertHashes": [CA_CERT_HASH],
                }
            },
            "nodeRegistration": _node_registration(site, node),
        }
        if "control-plane" in node["roles"]:
            join["controlPlane"] = {
                "localAPIEndpoint": {"advertiseAddress": node["address"], "bindPort": port},
                "certificateKey": CERTIFICATE_KEY,
            }
        out[node["name"]] = yaml.safe_dump(join, sort_keys=False)
    return out


def _merge(base: JSON, extra: JSON) -> JSON:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def portal_values(site: Site) -> JSON:
    """Values for deploy/helm/gpu-portal from the site file (the chart's README lists every key)."""
    d = site.data
    p = d["portal"]
    reg = d["registry"]
    prefix = f"{reg['host']}/{reg['project']}".rstrip("/")
    storage_class = d["storage"]["nfs"]["storage_class"]
    values: JSON = {
        "image": {"repository": f"{prefix}/gpu-portal/portal"},
        "portal": {"allowedHosts": [p["host"]], "csrfTrustedOrigins": [f"https://{p['host']}"]},
        "ingress": {"enabled": True, "className": p["ingress_class"], "host": p["host"]},
        "postgresql": {"persistence": {"storageClass": storage_class}},
        "redis": {"persistence": {"storageClass": storage_class}},
        "node": {"namespace": p["node_namespace"], "image": {"repository": f"{prefix}/gpu-portal/node"}},
    }
    return _merge(values, copy.deepcopy(p["values"]))


def render(site: Site, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "kubeadm").mkdir(exist_ok=True)
    written = [out / "inventory.yml", out / "portal-values.yaml"]
    inv = inventory(site)
    inv["all"]["vars"]["render_dir"] = str(out.resolve())
    written[0].write_text(yaml.safe_dump(inv, sort_keys=False))
    written[1].write_text(yaml.safe_dump(portal_values(site), sort_keys=False))
    for name, text in kubeadm_configs(site).items():
        path = out / "kubeadm" / f"{name}.yaml"
        path.write_text(text)
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in {"check", "render"} or (argv[0] == "render") != (len(argv) == 3):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        site = load(Path(argv[1]))
    except SiteError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    if argv[0] == "render":
        for path in render(site, Path(argv[2])):
            print(path)
    else:
        print(
            f"{argv[1]}: ok ({len(site.nodes)} nodes, {len(site.with_role('control-plane'))} control planes)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
