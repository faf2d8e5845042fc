"""Allocation properties (Hypothesis): whatever the kubelet asks, in whatever order, the grants are sane."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import cast

import grpc
from hypothesis import given, settings
from hypothesis import strategies as st

from plugin import allocator
from plugin._proto import deviceplugin_pb2 as pb
from plugin.config import EXCLUSIVE, Mode
from plugin.devices import RESOURCE_GPU, RESOURCE_SHARED, discover
from plugin.server import DevicePluginServicer
from plugin.sim.nvml import SimNvml, default_gpus
from plugin.state import AllocationError, NodeState

UUID_RE = re.compile(r"^GPU-[0-9a-f-]{36}$")
modes_st = st.one_of(st.just(EXCLUSIVE), st.builds(Mode, st.just(True), st.integers(1, 8)))


class _Sim:
    """A node, and the kubelet's device-manager bookkeeping of what it has handed out."""

    def __init__(self, modes: list[Mode]) -> None:
        self.node = discover(SimNvml(default_gpus(len(modes)), call_cost_s=0))
        self.state = NodeState(self.node, {g.uuid: m for g, m in zip(self.node.gpus, modes, strict=True)})
        self.servicers = {
            r: DevicePluginServicer(r, self.state, mps_host_root="/m", on_grant=None)
            for r in (RESOURCE_GPU, RESOURCE_SHARED)
        }
        self.held: set[str] = set()
        self.grants: list[tuple[str, list[str], allocator.Grant]] = []

    def free(self, resource: str) -> list[str]:
        return [d.id for d in self.state.devices(resource)[1] if d.id not in self.held]

    def allocate(self, resource: str, ids: list[str]) -> None:
        grant = self.servicers[resource]._grant(ids)
        self.held |= set(ids)
        self.grants.append((resource, ids, grant))


def _check_envs(grant: allocator.Grant, uuids: set[str]) -> None:
    for key in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        assert all(UUID_RE.match(v) and v in uuids for v in grant.envs[key].split(",")), grant.envs
    for key in ("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "GPU_PORTAL_MPS_THREAD_PERCENTAGES"):
        if key in grant.envs:
            assert all(part.split("=")[0] in uuids for part in grant.envs[key].split(","))


def _check_totals(sim: _Sim) -> None:
    whole = Counter(u for r, ids, _ in sim.grants if r == RESOURCE_GPU for u in ids)
    assert all(n == 1 for n in whole.values()), "a GPU was handed out twice"
    slices: Counter[str] = Counter()
    pct: defaultdict[str, int] = defaultdict(int)
    mem: defaultdict[str, int] = defaultdict(int)
    for r, ids, grant in sim.grants:
        if r != RESOURCE_SHARED:
            continue
        slices.update(i.split("::")[0] for i in ids)
        active = int(grant.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"])
        for part in grant.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"].split(","):
            uuid, limit = part.split("=")
            pct[uuid] += active
            mem[uuid] += int(limit.rstrip("M"))
    assert not set(whole) & set(slices), "a GPU served as whole and as slices"
    for uuid, k in slices.items():
        assert k <= sim.state.mode(uuid).slices
        assert pct[uuid] <= 100
        assert mem[uuid] <= 32768


@settings(max_examples=150, deadline=None)
@given(modes=st.lists(modes_st, min_size=1, max_size=8), data=st.data())
def test_grants_never_overlap_overcommit_or_use_relative_indices(
    modes: list[Mode], data: st.DataObject
) -> None:
    sim = _Sim(modes)
    uuids = {g.uuid for g in sim.node.gpus}
    for _ in range(data.draw(st.integers(1, 15))):
        resource = data.draw(st.sampled_from([RESOURCE_GPU, RESOURCE_SHARED]))
        free = sim.free(resource)
        if not free:
            continue
        size = data.draw(st.integers(1, len(free)))
        if data.draw(st.booleans()):  # the kubelet follows our hint ...
            must = data.draw(st.lists(st.sampled_from(free), max_size=size, unique=True))
            resp = sim.servicers[resource].GetPreferredAllocation(_pref(free, must, size), _NO_CONTEXT)
            ids = list(resp.container_responses[0].deviceIDs)
            assert len(ids) == size
            assert set(must) <= set(ids) <= set(free)
        else:  # ... or does not (it is only a hint)
            ids = data.draw(st.lists(st.sampled_from(free), min_size=size, max_size=size, unique=True))
        sim.allocate(resource, ids)
        _check_envs(sim.grants[-1][2], uuids)
    _check_totals(sim)


def _pref(free: list[str], must: list[str], size: int) -> pb.PreferredAllocationRequest:
    return pb.PreferredAllocationRequest(
        container_requests=[
            pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=free, must_include_deviceIDs=must, allocation_size=size
            )
        ]
    )


class _NoContext:
    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise AllocationError(details)


_NO_CONTEXT = cast("grpc.ServicerContext", _NoContext())


def test_a_request_larger_than_one_gpu_spreads_best_fit_with_per_gpu_limits() -> None:
    sim = _Sim([Mode(True, 4), Mode(True, 4), Mode(True, 4)])
    a, b, c = (g.uuid for g in sim.node.gpus)
    sim.allocate(RESOURCE_SHARED, [f"{a}::0"])  # a has 3 free, b and c 4 each
    ids = allocator.preferred_slices(sim.free(RESOURCE_SHARED), [], 6)
    assert Counter(i.split("::")[0] for i in ids) in (Counter({b: 4, a: 2}), Counter({c: 4, a: 2}))
    sim.allocate(RESOURCE_SHARED, ids)
    envs = sim.grants[-1][2].envs
    full = b if b in envs["NVIDIA_VISIBLE_DEVICES"] else c
    assert envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == f"{full}=32768M,{a}=16384M"
    assert envs["GPU_PORTAL_MPS_THREAD_PERCENTAGES"] == f"{full}=100,{a}=50"
    assert envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"


def test_a_small_request_goes_to_the_fullest_gpu_it_fits() -> None:
    avail = [f"A::{i}" for i in range(4)] + [f"B::{i}" for i in range(2)]
    assert allocator.preferred_slices(avail, [], 2) == ["B::0", "B::1"]
    assert allocator.preferred_slices(avail, [], 3) == ["A::0", "A::1", "A::2"]


def test_whole_gpu_preference_puts_nvlink_pairs_first() -> None:
    node = discover(SimNvml(default_gpus(4), nvlink_pairs={frozenset((0, 3))}, call_cost_s=0))
    u = [g.uuid for g in node.gpus]
    assert sorted(allocator.preferred_whole(u, [], 2, node.pair_distance)) == sorted([u[0], u[3]])
    assert allocator.preferred_whole(u, [u[1]], 2, node.pair_distance) == [u[1], u[0]]
