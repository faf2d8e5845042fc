"""Fixtures for the tests against the optional real node (deploy/localcluster/README.md, "Real node").

These tests run only inside the run's own network namespace, with their own control plane, Postgres
and Redis: `make test` runs them through deploy/localcluster/realnode/run-tests.sh. Run alone, or
outside that namespace, they fail with a message saying so (never a skip).

- `real_node` (session): a started `RealNode` of the run-wide `k8s_cluster`; stopped at the end of
  the session, which fails if the host is not as found. One real node per machine at a time, so the
  tests that start their own (test_node_lifecycle.py) run before the first user of this one.
- `portal_on_real_node`: the portal's Kubernetes client for the run's cluster, real-node placement on.
- `node_plugin` (session): the project's device plugin on that node, in this process on a simulated
  NVML the tests drive, registered with the real kubelet at its fixed device-plugin directory.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import deploy.localcluster.netns as netns
from deploy.localcluster import ClusterHandle
from deploy.localcluster.realnode import RealNode, start_real_node
from deploy.localcluster.realnode import config as rc
from plugin._proto import deviceplugin_pb2 as pb
from plugin.daemon import PluginConfig, PluginDaemon
from plugin.devices import RESOURCE_GPU
from plugin.registration import DEFAULT_PLUGIN_DIR
from plugin.sim.nvml import SimNvml
from tests.cluster.helpers import wait_for
from tests.fixtures.personas import World
from tests.realnode.images import load_train_image
from tests.workloads_e2e.conftest import portal_kube_client
from workloads.k8s.client import RealKubeClient
from workloads.models import ImageRule

OWN_NODE_MODULES = ("test_node_lifecycle.py", "test_node_daemonset.py", "test_chart_on_real_node.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Stable sort: the tests with a node of their own first, before the shared one takes the lock.
    items.sort(key=lambda item: Path(str(item.path)).name not in OWN_NODE_MODULES)


def require_netns() -> None:
    if netns.current() is None:
        pytest.fail(
            "the real-node tests run only inside the run's own network namespace: "
            "make test does this (deploy/localcluster/realnode/run-tests.sh), or run "
            "`python -m deploy.localcluster.netns run -- bash deploy/localcluster/realnode/run-tests.sh`",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def real_node(k8s_cluster: ClusterHandle) -> Iterator[RealNode]:
    require_netns()
    node = start_real_node(k8s_cluster)
    try:
        yield node
    finally:
        left = node.stop()
    assert not left, f"the real node left the host changed: {left}"


@dataclass
class NodePlugin:
    daemon: PluginDaemon
    sim: SimNvml
    shared_uuid: str  # the one GPU in shared mode; the other three are whole GPUs
    slices: int
    # What the real kubelet asked GetPreferredAllocation of nvidia.com/gpu, and the answers.
    preferred: list[tuple[pb.PreferredAllocationRequest, pb.PreferredAllocationResponse]]
    allocate_delay: AllocateDelay


@dataclass
class AllocateDelay:
    """Seconds the plugin's nvidia.com/gpu Allocate waits before answering: a test sets it to hold a
    pod in ContainerCreating (pods/log answers 400 meanwhile) for as long as it needs."""

    seconds: float = 0.0


def _delay_allocate(daemon: PluginDaemon) -> AllocateDelay:
    servicer = daemon.resources[RESOURCE_GPU].server.servicer
    inner, delay = servicer.Allocate, AllocateDelay()

    def delayed(request: Any, context: Any) -> Any:
        time.sleep(delay.seconds)
        return inner(request, context)

    servicer.Allocate = delayed  # type: ignore[method-assign]
    return delay


def _record_preferred(daemon: PluginDaemon) -> list[tuple[Any, Any]]:
    """Wrap the GPU servicer's GetPreferredAllocation (before the gRPC server binds it at start)."""
    servicer = daemon.resources[RESOURCE_GPU].server.servicer
    inner = servicer.GetPreferredAllocation
    calls: list[tuple[Any, Any]] = []

    def recorded(request: Any, context: Any) -> Any:
        response = inner(request, context)
        calls.append((request, response))
        return response

    servicer.GetPreferredAllocation = recorded  # type: ignore[method-assign]
    return calls


SHARED_SLICES = 4


@pytest.fixture(scope="session")
def node_plugin(real_node: RealNode) -> Iterator[NodePlugin]:
    # GPUs 1 and 2 NVLinked, so the plugin's preferred pair differs from the first two by id.
    sim = SimNvml(call_cost_s=20e-6, nvlink_pairs={frozenset((1, 2))})
    shared = sim.gpus[3].uuid
    # Unix socket paths stay under 108 bytes: the MPS pipes are not under the (long) run dir.
    scratch = Path(tempfile.mkdtemp(prefix="gp-rn-", dir="/tmp"))
    sharing = scratch / "sharing.json"
    sharing.write_text(json.dumps({"gpus": {shared: {"mode": "shared", "slices": SHARED_SLICES}}}))
    cfg = PluginConfig(
        plugin_dir=DEFAULT_PLUGIN_DIR,  # fixed by the kubelet, whatever its --root-dir
        config_file=sharing,
        pod_resources_socket=real_node.dirs.pod_resources_socket,
        mps_root=scratch / "mps",
        recovery_s=10.0,
        busy_grace_s=0.0,
        tick_s=0.1,
        busy_poll_s=0.2,
    )
    daemon = PluginDaemon(sim, cfg)
    preferred, delay = _record_preferred(daemon), _delay_allocate(daemon)
    daemon.start()
    try:
        wait_for(lambda: all(r.registrations for r in daemon.resources.values()), 15, "both registrations")
        yield NodePlugin(daemon, sim, shared, SHARED_SLICES, preferred, delay)
    finally:
        daemon.stop()
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture
def portal_on_real_node(
    k8s_cluster: ClusterHandle, node_plugin: NodePlugin, world: World
) -> Iterator[RealKubeClient]:
    """The portal's client for the run's cluster, real-node placement on, busybox allowed in alpha."""
    registry, repository = rc.BUSYBOX_SOURCE
    ImageRule.objects.create(project=world.alpha, registry=registry, repository=repository)
    prefix = f"r{uuid.uuid4().hex[:6]}-"
    settings = {"GPUPORTAL_REAL_NODE_PLACEMENT": True, "GPUPORTAL_JOB_SIMULATION": False}
    with portal_kube_client(k8s_cluster, prefix, **settings) as client:
        yield client


@pytest.fixture
def slow_container_start(node_plugin: NodePlugin) -> Iterator[None]:
    """Real-node pods that ask for a whole GPU stay in ContainerCreating for 5 s."""
    node_plugin.allocate_delay.seconds = 5.0
    try:
        yield
    finally:
        node_plugin.allocate_delay.seconds = 0.0


@pytest.fixture(scope="session")
def _train_image_loaded(real_node: RealNode) -> str:
    return load_train_image(real_node)


@pytest.fixture
def train_image(_train_image_loaded: str, portal_on_real_node: RealKubeClient, world: World) -> str:
    """The training image (python3-torch) in the node's containerd, allowed in alpha."""
    registry, _, rest = _train_image_loaded.partition("/")
    ImageRule.objects.create(project=world.alpha, registry=registry, repository=rest.rsplit(":", 1)[0])
    return _train_image_loaded
