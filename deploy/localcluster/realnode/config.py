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
CNI_BIN_DIR = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
# Also a NoSchedule taint of that key: only pods placed there on purpose land on the real node.
REAL_NODE_TAINT = f"{REAL_NODE_LABEL}=true:NoSchedule"
# Loaded from local archives (deploy/localcluster/realnode/images.sh), never pulled.
PAUSE_IMAGE = "gpuportal.local/pause:1"
BUSYBOX_IMAGE = "gpuportal.local/busybox:1"
# The same image as an image rule names it (registry, repository): test jobs and the demo's.
BUSYBOX_SOURCE = ("gpuportal.local", "busybox")


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
    def pki(self) -> Path:
        return self.root / "pki"

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
root = "{r}/containerd/root"
state = "{r}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "{dirs.containerd_socket}"
[ttrpc]
  address = "{r}/containerd-ttrpc.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "{r}/containerd/opt"
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


def node_kubeconfig(*, server: str, ca_file: Path, cert: Path, key: str | Path) -> str:
    """The kubelet's own identity (system:node:<name>), so the Node authorizer limits it."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "local", "cluster": {"server": server, "certificate-authority": str(ca_file)}}
            ],
            "users": [{"name": "node", "user": {"client-certificate": str(cert), "client-key": str(key)}}],
            "contexts": [{"name": "node", "context": {"cluster": "local", "user": "node"}}],
            "current-context": "node",
        },
        indent=2,
    )
