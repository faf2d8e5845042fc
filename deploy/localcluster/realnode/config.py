"""The files of the optional real node (deploy/localcluster/README.md), as pure renderers.

Every path containerd, CNI and the kubelet let us choose points under the node's own directory, so
a run leaves nothing behind there; the few they fix (deploy/localcluster/hoststate.py) are removed
after it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from plugin.names import REAL_NODE_LABEL as REAL_NODE_LABEL  # re-exported for the node and its tests

# The pods' bridge, inside the run's own network namespace (deploy/localcluster/netns.py).
POD_SUBNET = "10.214.0.0/24"
BRIDGE = "rn-cni0"
# The API server's own default Service range (kwokctl sets none): ClusterIPs come from it, and the
# cluster DNS Service takes a fixed address in it, as kubeadm's 10th address does.
SERVICE_SUBNET = "10.0.0.0/24"
DNS_SERVICE_IP = "10.0.0.10"
CLUSTER_DOMAIN = "cluster.local"
CNI_BIN_DIR = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
# Also a NoSchedule taint of that key: only pods placed there on purpose land on the real node.
REAL_NODE_TAINT = f"{REAL_NODE_LABEL}=true:NoSchedule"
# Loaded from local archives (deploy/localcluster/realnode/images.sh), never pulled.
PAUSE_IMAGE = "gpuportal.local/pause:1"
BUSYBOX_IMAGE = "gpuportal.local/busybox:1"
COREDNS_IMAGE = "gpuportal.local/coredns:1"  # the CoreDNS build.sh makes
# The same image as an image rule names it (registry, repository): test jobs and the demo's.
BUSYBOX_SOURCE = ("gpuportal.local", "busybox")


@dataclass(frozen=True)
class Identity:
    """A client certificate's subject for one of the node's components."""

    file_stem: str
    common_name: str
    organization: str = ""

    @property
    def subject(self) -> str:
        return (f"/O={self.organization}" if self.organization else "") + f"/CN={self.common_name}"


def kubelet_identity(node_name: str) -> Identity:
    """system:node:<name> in system:nodes, so the Node authorizer limits it."""
    return Identity("node", f"system:node:{node_name}", "system:nodes")


# Bound by the API server's bootstrap policy to system:node-proxier: Services, EndpointSlices, Nodes.
KUBE_PROXY_IDENTITY = Identity("kube-proxy", "system:kube-proxy")
# Bound to its read-only role (deploy/localcluster/realnode/services.py) when the node starts.
POLICY_IDENTITY = Identity("kube-router", "system:kube-router")


@dataclass(frozen=True)
class NodeDirs:
    """Where one real node keeps its configuration and state."""

    root: Path

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.root / "containerd.toml"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "kubelet.yaml"

    @property
    def kubelet_kubeconfig(self) -> Path:
        return self.root / "kubelet.kubeconfig"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def pod_resources_socket(self) -> Path:
        return self.kubelet_root / "pod-resources" / "kubelet.sock"

    @property
    def kube_proxy_config(self) -> Path:
        return self.root / "kube-proxy.yaml"

    def kubeconfig(self, identity: Identity) -> Path:
        return self.root / f"{identity.file_stem}.kubeconfig"

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def containerd_data(self) -> Path:
        """Images, snapshots and state: gigabytes once the chart's images are in."""
        return self.root / "containerd"

    @property
    def volumes(self) -> Path:
        return self.root / "volumes"

    @property
    def logs(self) -> Path:
        return self.root / "logs"


def containerd_toml(dirs: NodeDirs) -> str:
    """containerd 1.6 (config version 2) with only the CRI pieces the node uses.

    restrict_oom_score_adj: this machine's root lacks CAP_SYS_RESOURCE, so the -998 the kubelet
    asks for the pod sandbox would fail every pod start; containerd clamps it to its own score.
    """
    r = dirs.root
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{dirs.containerd_data}/root"
state = "{dirs.containerd_data}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "{dirs.containerd_socket}"
[ttrpc]
  address = "{r}/containerd-ttrpc.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "{dirs.containerd_data}/opt"
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [{cri}.cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{dirs.cni_conf_dir}"
  [{cri}.containerd]
    default_runtime_name = "runc"
  [{cri}.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [{cri}.containerd.runtimes.runc.options]
    SystemdCgroup = false
    Root = "{r}/containerd/runc"
"""


def cni_conflist(dirs: NodeDirs) -> str:
    """A bridge with host-local addresses; its address store under the node's directory."""
    ipam = {
        "type": "host-local",
        "ranges": [[{"subnet": POD_SUBNET}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": str(dirs.root / "cni" / "ipam"),
    }
    bridge = {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False, "ipam": ipam}
    conf = {"cniVersion": "1.0.0", "name": "gpuportal-realnode", "plugins": [bridge, {"type": "loopback"}]}
    return json.dumps(conf, indent=2) + "\n"


def kubelet_yaml(dirs: NodeDirs, *, node_ip: str, ca_file: Path) -> str:
    """KubeletConfiguration for a cgroup v1 host without systemd, serving only on the node's address.

    The API server is its only client (pods/log, exec): x509 against the cluster CA, then webhook
    authorization, as on a real cluster. Eviction thresholds are low because the node shares this
    machine's disk with everything else and must not taint itself with DiskPressure.
    """
    return f"""apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
address: {node_ip}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: "{ca_file}"}}
authorization: {{mode: Webhook}}
containerRuntimeEndpoint: unix://{dirs.containerd_socket}
resolvConf: ""
podLogsDir: {dirs.root}/pod-logs
clusterDNS: ["{DNS_SERVICE_IP}"]
clusterDomain: {CLUSTER_DOMAIN}
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
  nodefs.inodesFree: "1%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 20
registerNode: true
# Device health and counts reach the Node object within a second (default 10 s): the tests and the
# portal watch them there, and one node's status updates cost the API server nothing.
nodeStatusUpdateFrequency: 1s
"""


def kube_proxy_yaml(dirs: NodeDirs, *, node_name: str) -> str:
    """KubeProxyConfiguration: iptables mode inside the run's network namespace, so its rules go
    with the namespace. conntrack is left as the kernel has it (maxPerCore 0 and the zero timeouts):
    those sysctls are the machine's, not the namespace's. Health and metrics on loopback only."""
    return f"""apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: {POD_SUBNET}
hostnameOverride: {node_name}
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clientConnection:
  kubeconfig: {dirs.kubeconfig(KUBE_PROXY_IDENTITY)}
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
"""


def corefile() -> str:
    """CoreDNS for the cluster domain only, as a pod reading the API with its ServiceAccount. No
    forwarder: nothing outside the namespace is reachable, so other names fail at once."""
    return f""".:53 {{
    errors
    ready
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"""


def kube_router_argv(dirs: NodeDirs, *, node_name: str) -> list[str]:
    """kube-router's firewall alone, as the NetworkPolicy enforcer: iptables chains and ipsets in the
    namespace, no routing, no service proxy (kube-proxy's), no CNI (the bridge's); no listening ports."""
    return [
        f"--kubeconfig={dirs.kubeconfig(POLICY_IDENTITY)}",
        "--run-firewall=true",
        "--run-router=false",
        "--run-service-proxy=false",
        "--enable-cni=false",
        f"--hostname-override={node_name}",
        f"--service-cluster-ip-range={SERVICE_SUBNET}",
        "--metrics-port=0",
        "--health-port=0",
    ]


def client_kubeconfig(*, server: str, ca_file: Path, cert: Path, key: str | Path) -> str:
    """A kubeconfig with one client certificate: each component its own identity and rights."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "local", "cluster": {"server": server, "certificate-authority": str(ca_file)}}
            ],
            "users": [{"name": "local", "user": {"client-certificate": str(cert), "client-key": str(key)}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "local"}}],
            "current-context": "local",
        },
        indent=2,
    )
