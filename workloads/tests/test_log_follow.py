"""Followed logs on the event loop, against the fake cluster: when a stream ends, and how it counts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from accounts.models import User
from tests.fixtures.personas import World
from workloads import log_follow
from workloads.choices import JobState
from workloads.k8s import paths
from workloads.k8s.client import set_client
from workloads.k8s.labels import UID_LABEL, WORKER_INDEX_LABEL
from workloads.models import Job
from workloads.services import jobs as services
from workloads.tests.conftest import IMAGE
from workloads.tests.fakes import FakeKube

pytestmark = pytest.mark.django_db(transaction=True)
FAST = override_settings(GPUPORTAL_LOG_FOLLOW_POLL_SECONDS=0.05, GPUPORTAL_LOG_FOLLOW_IDLE_SECONDS=30)


class EndlessLog(FakeKube):
    """Like kwok: a followed log that never ends by itself."""

    async def astream(self, path: str, query: dict[str, str] | None = None) -> AsyncIterator[bytes]:
        yield b"hello\n\n"
        await asyncio.Event().wait()


def _running_job(world: World) -> Job:
    job = services.job_submit(actor=world.member, project=world.alpha, data={"image": IMAGE, "gpus": 1})
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, pod_name=f"{job.k8s_name}-p")
    return Job.objects.select_related("project").get(pk=job.pk)


@FAST
async def test_a_stream_the_cluster_never_ends_ends_with_the_job(jobs_world: World, fake_kube: Any) -> None:
    job = await sync_to_async(_running_job)(jobs_world)
    set_client(EndlessLog())
    stream = log_follow.follow(job.pk, jobs_world.member.pk)
    assert await anext(stream) == b"hello\n\n"
    await sync_to_async(Job.objects.filter(pk=job.pk).update)(state=JobState.SUCCEEDED)
    rest = [chunk async for chunk in stream]
    assert rest == []


@FAST
async def test_a_stream_counts_for_its_user_until_it_is_closed(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    job = await sync_to_async(_running_job)(jobs_world)
    fake_kube.logs[paths.pod_log(job.namespace, job.pod_name)] = b"one line\n"
    user = jobs_world.member.pk
    with override_settings(GPUPORTAL_LOG_STREAMS_PER_USER=1):
        stream = log_follow.follow(job.pk, user)
        assert await anext(stream) == b"one line\n"
        assert log_follow.OPEN.full(user)
        await stream.aclose()
        assert not log_follow.OPEN.full(user)


@FAST
async def test_a_followed_log_ends_when_its_reader_loses_access(jobs_world: World, fake_kube: Any) -> None:
    job = await sync_to_async(_running_job)(jobs_world)
    set_client(EndlessLog())
    stream = log_follow.follow(job.pk, jobs_world.member.pk)
    assert await anext(stream) == b"hello\n\n"
    await sync_to_async(User.objects.filter(pk=jobs_world.member.pk).update)(is_active=False)
    assert [chunk async for chunk in stream] == []


@FAST
async def test_one_worker_of_a_job_of_several_is_followed_by_its_index(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    job = await sync_to_async(_running_job)(jobs_world)
    await sync_to_async(Job.objects.filter(pk=job.pk).update)(workers=2)
    for index in range(2):
        name = f"{job.k8s_name}-{index}-x"
        labels = {UID_LABEL: str(job.uid), WORKER_INDEX_LABEL: str(index)}
        fake_kube.objects[f"{paths.pods(job.namespace)}/{name}"] = {
            "metadata": {"name": name, "labels": labels}
        }
        fake_kube.logs[paths.pod_log(job.namespace, name)] = f"worker {index}\n".encode()
    chunks = [chunk async for chunk in log_follow.follow(job.pk, jobs_world.member.pk, 1)]
    assert chunks == [b"worker 1\n"]
