"""The optional real node: the upstream kubelet with Debian's containerd and runc beside the kwok nodes.

It runs real containers from images loaded from local archives, and it is where the device plugin
meets the real kubelet's device-plugin and PodResources APIs. It only runs inside the run's own
network namespace (deploy/localcluster/netns.py) and, as it changes machine-wide things, one at a
time per machine; stopping it puts the host back as found (deploy/localcluster/hoststate.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from kubernetes import client

import deploy.localcluster.hoststate as hoststate
import deploy.localcluster.netns as netns
from deploy.localcluster import kube
from deploy.localcluster.cluster import ClusterHandle
from deploy.localcluster.nodes import wait_nodes_ready
from deploy.localcluster.paths import DEPLOY_DIR
from deploy.localcluster.realnode import config as rc
from deploy.localcluster.realnode import services, volumes
from plugin.registration import DEFAULT_PLUGIN_DIR

IMAGES_SCRIPT = DEPLOY_DIR / "realnode" / "images.sh"
DEFAULT_NODE = "gpu-real-0"


@dataclass
class RealNode:
    """A started real node; `stop()` ends it and reports what of the host it could not restore."""

    name: str
    cluster: ClusterHandle
    dirs: rc.NodeDirs
    before: hoststate.HostState
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    _lock: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    @property
    def ip(self) -> str:
        return netns.NODE_IP

    def ctr(self, *args: str, timeout: float = 60.0) -> str:
        """containerd's own CLI against this node, in the namespace the kubelet uses."""
        argv = ["ctr", "--address", str(self.dirs.containerd_socket), "--namespace", "k8s.io", *args]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(args)} failed: {proc.stderr.strip()[-1000:]}")
        return proc.stdout

    def import_image(self, archive: Path, timeout: float = 180.0) -> None:
        """An image archive into containerd, where the kubelet finds it."""
        try:
            self.ctr("images", "import", str(archive), timeout=timeout)
        except RuntimeError as error:
            # containerd can lose a shared layer's snapshot to its own cleanup while an import
            # unpacks on top of it; a second import finds the content and unpacks it again.
            if "does not exist" not in str(error):
                raise
            self.ctr("images", "import", str(archive), timeout=timeout)

    def restart_kubelet(self) -> float:
        """Stop the kubelet and start it again; returns when the new one was started."""
        _terminate(self.procs.pop("kubelet"))
        started = time.monotonic()
        self.procs["kubelet"] = _spawn(self, "kubelet", _kubelet_argv(self))
        return started

    def stop(self) -> list[str]:
        try:
            for what in ("kubelet", "kube-proxy", "kube-router"):
                if what in self.procs:
                    _terminate(self.procs.pop(what))
            # After the kubelet, which would register the Node again.
            with contextlib.suppress(*kube.API_ERRORS):
                _delete_node_object(self)
            with contextlib.suppress(*kube.API_ERRORS), self.cluster.api() as api:
                _delete_volumes(self, api)
            # The containers are the shims' children, in the node's new pod cgroups.
            hoststate.kill_cgroup_processes(hoststate.snapshot().cgroups - self.before.cgroups)
            if "containerd" in self.procs:
                _terminate(self.procs.pop("containerd"))
            _kill_shims(self.dirs)
            _unmount_under(self.dirs.root)
            # The logs and configuration stay for a look after a failure; the images and volumes go,
            # unless something is still mounted there (a host path bound into a container).
            if not _mounts_under(self.dirs.root):
                for data in (self.dirs.containerd_data, self.dirs.volumes):
                    shutil.rmtree(data, ignore_errors=True)
            return hoststate.restore(self.before)
        finally:
            self._lock.close()


def start_real_node(cluster: ClusterHandle, name: str = DEFAULT_NODE, timeout: float = 90.0) -> RealNode:
    """Start containerd and the kubelet as node `name` of `cluster`; wait until the Node is Ready."""
    if netns.current() is None:
        raise RuntimeError(
            "the real node runs only inside the run's own network namespace: "
            "python -m deploy.localcluster.netns run -- COMMAND (make test does this for tests/realnode)"
        )
    lock = contextlib.ExitStack()
    lock.enter_context(hoststate.machine_lock())
    dirs = rc.NodeDirs(cluster.run_dir / f"{cluster.name}-realnode" / name)
    node = RealNode(name, cluster, dirs, hoststate.snapshot(), _lock=lock)
    t0 = time.monotonic()
    try:
        with cluster.api() as api:
            _write_files(node, api.configuration.host)
            node.procs["containerd"] = _spawn(
                node, "containerd", ["containerd", "--config", str(dirs.containerd_config)]
            )
            _wait_for(lambda: _answers(node), timeout, "containerd to answer")
            _load_images(node)
            node.timings["containerd_s"] = round(time.monotonic() - t0, 2)
            for path, body in services.objects():
                _ensure(api, path, body)
            _provide_volumes(node, api)
            _start_service_routing(node)
            node.procs["kubelet"] = _spawn(node, "kubelet", _kubelet_argv(node))
            wait_nodes_ready(api, [name], timeout, selector=f"{rc.REAL_NODE_LABEL}=true")
            _start_policy_enforcer(node)
            _wait_for(lambda: _dns_ready_on(node, api), timeout, "the cluster DNS pod on the node")
    except BaseException:
        node.stop()
        raise
    node.timings["ready_s"] = round(time.monotonic() - t0, 2)
    return node


def _write_files(node: RealNode, server: str) -> None:
    dirs, pki = node.dirs, node.cluster.workdir / "pki"
    for d in (dirs.cni_conf_dir, dirs.pki, dirs.logs, dirs.kubelet_root):
        d.mkdir(parents=True, exist_ok=True)
    dirs.containerd_config.write_text(rc.containerd_toml(dirs))
    (dirs.cni_conf_dir / "10-gpuportal.conflist").write_text(rc.cni_conflist(dirs))
    dirs.kubelet_config.write_text(rc.kubelet_yaml(dirs, node_ip=node.ip, ca_file=pki / "ca.crt"))
    dirs.kube_proxy_config.write_text(rc.kube_proxy_yaml(dirs, node_name=node.name))
    kubelet = rc.kubelet_identity(node.name)
    for identity, path in (
        (kubelet, dirs.kubelet_kubeconfig),
        (rc.KUBE_PROXY_IDENTITY, dirs.kubeconfig(rc.KUBE_PROXY_IDENTITY)),
        (rc.POLICY_IDENTITY, dirs.kubeconfig(rc.POLICY_IDENTITY)),
    ):
        cert, key = _client_certificate(identity, pki, dirs.pki)
        path.write_text(rc.client_kubeconfig(server=server, ca_file=pki / "ca.crt", cert=cert, key=key))


def _ensure(api: client.ApiClient, collection: str, body: kube.JSON) -> None:
    """Create the object unless a node of this cluster made it before: kept across nodes, as a
    fixed ClusterIP is refused (422) rather than reported as existing when its Service is there."""
    try:
        kube.get(api, f"{collection}/{body['metadata']['name']}")
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        kube.create(api, collection, body)


def _provide_volumes(node: RealNode, api: client.ApiClient) -> None:
    """The default StorageClass and this node's local volumes, on empty folders (a volume left by
    an earlier node of this name would point at a folder that is gone)."""
    _delete_volumes(node, api)
    _ensure(api, "/apis/storage.k8s.io/v1/storageclasses", volumes.storage_class())
    for index, folder in enumerate(volumes.folders(node.dirs.volumes)):
        folder.mkdir(parents=True, exist_ok=True)
        # Any pod's user writes there, as on a fresh disk: a local volume does not take the pod's fsGroup.
        folder.chmod(0o777)
        kube.create(api, "/api/v1/persistentvolumes", volumes.volume(node.name, folder, index))


def _delete_volumes(node: RealNode, api: client.ApiClient) -> None:
    kube.delete(
        api, "/api/v1/persistentvolumes", query={"labelSelector": f"{volumes.NODE_LABEL}={node.name}"}
    )


def _start_service_routing(node: RealNode) -> None:
    """kube-proxy: ClusterIPs to endpoints, in the namespace's iptables."""
    proxy = [str(node.cluster.bin_dir / "kube-proxy"), f"--config={node.dirs.kube_proxy_config}", "--v=1"]
    node.procs["kube-proxy"] = _spawn(node, "kube-proxy", proxy)


def _dns_ready_on(node: RealNode, api: client.ApiClient) -> bool:
    """The CoreDNS pod runs on this node and is ready (one left on an earlier node does not count)."""
    query = {"labelSelector": "k8s-app=kube-dns", "fieldSelector": f"spec.nodeName={node.name}"}
    pods = kube.get(api, f"/api/v1/namespaces/{services.DNS_NAMESPACE}/pods", query=query)["items"]
    conditions = [c for pod in pods for c in pod.get("status", {}).get("conditions", [])]
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _start_policy_enforcer(node: RealNode) -> None:
    """kube-router's firewall; it finds its node by name at start, so after the kubelet registered it."""
    policy = [str(node.cluster.bin_dir / "kube-router"), *rc.kube_router_argv(node.dirs, node_name=node.name)]
    node.procs["kube-router"] = _spawn(node, "kube-router", policy)


def _client_certificate(identity: rc.Identity, ca_dir: Path, out: Path) -> tuple[Path, Path]:
    """A client certificate for one of the node's components, signed by the cluster CA."""
    stem = identity.file_stem
    key, csr, cert = out / f"{stem}.key", out / f"{stem}.csr", out / f"{stem}.crt"
    subject = identity.subject
    for argv in (
        [
            "openssl",
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-subj",
            subject,
            "-out",
            str(csr),
        ],
        [
            "openssl",
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            str(ca_dir / "ca.crt"),
            "-CAkey",
            str(ca_dir / "ca.key"),
            "-CAcreateserial",
            "-CAserial",
            str(out / "ca.srl"),
            "-days",
            "7",
            "-out",
            str(cert),
        ],
    ):
        subprocess.run(argv, capture_output=True, check=True)
    return cert, key


def _kubelet_argv(node: RealNode) -> list[str]:
    d = node.dirs
    return [
        str(node.cluster.bin_dir / "kubelet"),
        f"--config={d.kubelet_config}",
        f"--kubeconfig={d.kubelet_kubeconfig}",
        f"--root-dir={d.kubelet_root}",
        f"--cert-dir={d.pki / 'serving'}",
        f"--hostname-override={node.name}",
        f"--node-ip={node.ip}",
        f"--node-labels={rc.REAL_NODE_LABEL}=true",
        f"--register-with-taints={rc.REAL_NODE_TAINT}",
        "--v=1",
    ]


def _spawn(node: RealNode, what: str, argv: list[str]) -> subprocess.Popen[bytes]:
    log: IO[bytes] = (node.dirs.logs / f"{what}.log").open("ab")
    # Its own session: a Ctrl-C meant for pytest must not kill it before the ordered stop.
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _answers(node: RealNode) -> bool:
    try:
        node.ctr("version", timeout=5)
    except (RuntimeError, subprocess.TimeoutExpired):
        return False
    return True


def _load_images(node: RealNode) -> None:
    out = subprocess.run(["bash", str(IMAGES_SCRIPT)], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"the real node's images: {out.stderr.strip()[-2000:]}")
    folder = Path(out.stdout.strip().splitlines()[-1])
    for archive in sorted(folder.glob("*.tar")):
        node.import_image(archive, timeout=120)


def _wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def _terminate(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _delete_node_object(node: RealNode) -> None:
    with node.cluster.api() as api:
        kube.delete(api, f"/api/v1/nodes/{node.name}")


def _kill_shims(dirs: rc.NodeDirs) -> None:
    """The containerd shims of this node (they outlive containerd by design)."""
    needle = str(dirs.containerd_socket).encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmdline = (proc / "cmdline").read_bytes()
            if b"containerd-shim" in cmdline and needle in cmdline:
                os.kill(int(proc.name), signal.SIGKILL)


def _mounts_under(root: Path) -> list[str]:
    prefix = str(root.resolve())
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [m for m in mounts if m.startswith(prefix)]


def _unmount_under(root: Path) -> None:
    """Container root filesystems, pod volumes and netns files left mounted under the node's folder."""
    for target in sorted(_mounts_under(root), key=len, reverse=True):
        subprocess.run(["umount", "-l", target], capture_output=True, check=False)


@contextlib.contextmanager
def real_node_with_plugin(cluster: ClusterHandle, gpus: int = 4) -> Iterator[RealNode]:
    """The real node with the project's device plugin as a process on it, on simulated NVML (no GPU
    here): `make demo REAL_NODE=1` and `make cluster-up REAL_NODE=1`. Stopped on leaving."""
    node = start_real_node(cluster)
    # Unix socket paths stay under 108 bytes: the MPS pipes are not under the (long) run dir.
    scratch = Path(tempfile.mkdtemp(prefix="gp-rn-", dir="/tmp"))
    argv = [sys.executable, "-m", "plugin", "--backend", "sim", "--sim-gpus", str(gpus)]
    argv += ["--plugin-dir", str(DEFAULT_PLUGIN_DIR), "--mps-root", str(scratch / "mps")]
    argv += ["--pod-resources-socket", str(node.dirs.pod_resources_socket)]
    plugin = subprocess.Popen([*argv, "--log-level", "WARNING"], start_new_session=True)
    try:
        yield node
    finally:
        _terminate(plugin)
        left = node.stop()
        shutil.rmtree(scratch, ignore_errors=True)
        if left:
            print(f"[realnode] the host is not as found: {left}", file=sys.stderr)
