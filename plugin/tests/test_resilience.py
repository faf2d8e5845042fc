"""The plugin against the test kubelet: restarts, absence, XIDs, NVML failure, bad Allocate ids."""

from __future__ import annotations

import os
import time

import grpc
import pytest

from plugin.devices import RESOURCE_GPU, RESOURCE_SHARED
from plugin.sim.kubelet import TestKubelet
from plugin.sim.nvml import SimNvml
from plugin.tests.conftest import RESOURCES, MakeDaemon

# The kubelet's absence is 60 s (docs/reliability.md) in `make soak`; `make test` waits 20 s, still
# far past the kubelet's own re-dial and the plugin's backoff cap.
ABSENT_S = 60 if os.environ.get("GPUPORTAL_SOAK") == "1" else 20

REREGISTER_BUDGET_S = 5.0
UNHEALTHY_BUDGET_S = 1.0


def _reregistration_time(kubelet: TestKubelet, restart_at: float) -> float:
    return max(kubelet.wait_registered(r, after=restart_at, timeout=10).at - restart_at for r in RESOURCES)


def test_it_reregisters_within_5s_after_each_of_20_kubelet_restarts(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml
) -> None:
    make_daemon({sim.gpus[3].uuid: {"mode": "shared", "slices": 2}}, recovery_s=600)
    times = []
    for i in range(20):
        if i == 10:
            sim.inject_xid(sim.gpus[0].uuid, 48)  # health changes while the kubelet is running
            kubelet.wait_devices(RESOURCE_GPU, lambda d: d[sim.gpus[0].uuid] == "Unhealthy", timeout=2)
        kubelet.stop()
        t0 = time.monotonic()  # kubelet.sock re-created from here on
        kubelet.start()
        times.append(_reregistration_time(kubelet, t0))
        expect = "Unhealthy" if i >= 10 else "Healthy"
        # The new stream's first list already carries the current health.
        first = kubelet.conns[RESOURCE_GPU].updates[0][1]
        assert first[sim.gpus[0].uuid] == expect
        assert kubelet.wait_devices(RESOURCE_SHARED, lambda d: len(d) == 2, timeout=2)
    assert max(times) <= REREGISTER_BUDGET_S, times


@pytest.mark.slow
def test_it_reregisters_when_the_kubelet_returns_after_a_long_absence(
    make_daemon: MakeDaemon, kubelet: TestKubelet
) -> None:
    make_daemon()
    kubelet.stop()
    time.sleep(ABSENT_S)
    t0 = time.monotonic()
    kubelet.start()
    assert _reregistration_time(kubelet, t0) <= REREGISTER_BUDGET_S
    assert kubelet.wait_devices(RESOURCE_GPU, lambda d: len(d) == 4, timeout=2)


def test_a_critical_xid_makes_that_gpu_unhealthy_within_1s_and_an_application_xid_is_ignored(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml
) -> None:
    bad, app, shared = sim.gpus[0].uuid, sim.gpus[1].uuid, sim.gpus[2].uuid
    make_daemon({shared: {"mode": "shared", "slices": 4}}, recovery_s=600)
    kubelet.wait_devices(RESOURCE_GPU, lambda d: len(d) == 3 and set(d.values()) == {"Healthy"})
    t0 = time.monotonic()
    sim.inject_xid(bad, 79)
    sim.inject_xid(app, 13)
    kubelet.wait_devices(RESOURCE_GPU, lambda d: d[bad] == "Unhealthy", timeout=UNHEALTHY_BUDGET_S)
    assert time.monotonic() - t0 <= UNHEALTHY_BUDGET_S
    sim.inject_xid(shared, 31)  # application XID on a shared GPU: ignored too
    time.sleep(1.0)
    assert kubelet.devices(RESOURCE_GPU)[app] == "Healthy"
    assert set(kubelet.devices(RESOURCE_SHARED).values()) == {"Healthy"}


def test_a_critical_xid_on_a_shared_gpu_marks_every_slice_unhealthy(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml
) -> None:
    shared = sim.gpus[2].uuid
    make_daemon({shared: {"mode": "shared", "slices": 4}}, recovery_s=600)
    kubelet.wait_devices(RESOURCE_SHARED, lambda d: len(d) == 4 and set(d.values()) == {"Healthy"})
    sim.inject_dbe(shared)
    kubelet.wait_devices(
        RESOURCE_SHARED, lambda d: set(d.values()) == {"Unhealthy"}, timeout=UNHEALTHY_BUDGET_S
    )


def test_an_nvml_failure_reports_every_gpu_unhealthy_then_recovers_after_a_clean_interval(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml
) -> None:
    make_daemon({sim.gpus[3].uuid: {"mode": "shared", "slices": 2}}, recovery_s=1.5)
    kubelet.wait_devices(RESOURCE_GPU, lambda d: set(d.values()) == {"Healthy"})
    sim.fail()
    for resource in RESOURCES:
        kubelet.wait_devices(resource, lambda d: set(d.values()) == {"Unhealthy"}, timeout=UNHEALTHY_BUDGET_S)
    sim.recover()
    t0 = time.monotonic()
    kubelet.wait_devices(RESOURCE_GPU, lambda d: set(d.values()) == {"Healthy"}, timeout=6)
    assert time.monotonic() - t0 >= 1.0  # not before a clean interval


@pytest.mark.parametrize(
    ("resource", "make_ids"),
    [
        (RESOURCE_GPU, lambda u: ["GPU-00000000-dead-beef-0000-000000000000"]),
        (RESOURCE_GPU, lambda u: ["0"]),  # a relative index is never a device id
        (RESOURCE_GPU, lambda u: [u[3]]),  # shared GPU asked for as a whole one
        (RESOURCE_SHARED, lambda u: [f"{u[3]}::9"]),  # slice beyond N
        (RESOURCE_SHARED, lambda u: [f"{u[0]}::0"]),  # slice of an exclusive GPU
        (RESOURCE_GPU, lambda u: [u[0], u[0]]),
        (RESOURCE_GPU, lambda u: []),
    ],
)
def test_allocate_refuses_ids_it_does_not_offer(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml, resource: str, make_ids: object
) -> None:
    uuids = [g.uuid for g in sim.gpus]
    make_daemon({uuids[3]: {"mode": "shared", "slices": 4}})
    kubelet.wait_devices(resource, lambda d: len(d) > 0)
    with pytest.raises(grpc.RpcError) as err:
        kubelet.allocate(resource, make_ids(uuids))  # type: ignore[operator]
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_allocate_refuses_an_unhealthy_gpu(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml
) -> None:
    make_daemon(recovery_s=600)
    bad = sim.gpus[1].uuid
    sim.inject_xid(bad, 62)
    kubelet.wait_devices(RESOURCE_GPU, lambda d: d[bad] == "Unhealthy", timeout=UNHEALTHY_BUDGET_S)
    with pytest.raises(grpc.RpcError) as err:
        kubelet.allocate(RESOURCE_GPU, [sim.gpus[0].uuid, bad])
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
