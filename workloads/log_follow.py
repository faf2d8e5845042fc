"""Followed job logs on the event loop: no thread is held while a stream is open.

`follow(job_id, user_id)` waits for the job's pod (a queued job's page or `gpuctl logs -f` follows
it into running), streams the pod's log as raw chunks (blank lines kept, no line buffering, so a
job that never prints a newline costs no memory), and ends when the client goes away (Django
cancels the iterator), when the job ends, or after `log_follow_idle_s` without output. A user holds
at most `log_streams_per_user` streams per web process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator

from channels.db import database_sync_to_async

from accounts.live import RECHECK_S
from accounts.models import User
from workloads import app_settings
from workloads.k8s import paths
from workloads.k8s.client import get_client
from workloads.k8s.errors import K8sError
from workloads.k8s.labels import UID_LABEL, WORKER_INDEX_LABEL
from workloads.models import Job
from workloads.selectors import job_list, jobs_with_project

log = logging.getLogger(__name__)


class _OpenStreams:
    """Streams open per user in this process (the view checks, the stream itself counts)."""

    def __init__(self) -> None:
        self.count: dict[int, int] = {}
        self.lock = threading.Lock()

    def full(self, user_id: int) -> bool:
        with self.lock:
            return self.count.get(user_id, 0) >= app_settings.log_streams_per_user()

    def enter(self, user_id: int) -> None:
        with self.lock:
            self.count[user_id] = self.count.get(user_id, 0) + 1

    def leave(self, user_id: int) -> None:
        with self.lock:
            left = self.count.get(user_id, 1) - 1
            if left:
                self.count[user_id] = left
            else:
                self.count.pop(user_id, None)


OPEN = _OpenStreams()


def worker_pod(job: Job, worker: int | None) -> str:
    """The pod whose log to read: the job's own (of a job of several workers, a failed worker's, else
    worker 0's), or the newest pod of worker `worker` ("" while it has none)."""
    if worker is None or job.workers == 1:
        return job.pod_name
    selector = f"{UID_LABEL}={job.uid},{WORKER_INDEX_LABEL}={worker}"
    body = get_client().get(paths.pods(job.namespace), {"labelSelector": selector}) or {}
    pods = sorted(body.get("items") or [], key=lambda p: str(p["metadata"].get("creationTimestamp") or ""))
    return str(pods[-1]["metadata"]["name"]) if pods else ""


def _job(job_id: int) -> Job | None:
    return jobs_with_project().filter(pk=job_id).first()


def kept_tail(job: Job) -> bytes:
    """The end of the log kept in the row, saying so when the start was dropped."""
    note = b"[earlier output dropped: only the end of the log is kept]\n" if job.log_truncated else b""
    return note + job.log_tail.encode()


def _kept_tail(job_id: int) -> bytes:
    job = Job.objects.filter(pk=job_id).only("log_tail", "log_truncated").first()
    return kept_tail(job) if job is not None else b""


def _may_see(user_id: int, job_id: int) -> bool:
    """Whether the follower may still read this job: still active, still in its project."""
    user = User.objects.filter(pk=user_id, is_active=True).first()
    return user is not None and job_list(user=user).filter(pk=job_id).exists()


async def _allowed(user_id: int, job_id: int) -> bool:
    allowed: bool = await database_sync_to_async(_may_see)(user_id, job_id)
    return allowed


async def _load(job_id: int) -> Job | None:
    job: Job | None = await database_sync_to_async(_job)(job_id)
    return job


async def _tail(job_id: int) -> bytes:
    tail: bytes = await database_sync_to_async(_kept_tail)(job_id)
    return tail


async def follow(job_id: int, user_id: int, worker: int | None = None) -> AsyncGenerator[bytes, None]:
    """`worker`: that worker's pod of a job of several; None: the job's own pod (worker_pod)."""
    OPEN.enter(user_id)
    try:
        async for chunk in _follow(job_id, user_id, worker):
            yield chunk
    finally:
        OPEN.leave(user_id)


async def _follow(job_id: int, user_id: int, worker: int | None) -> AsyncIterator[bytes]:
    poll, idle_limit = app_settings.log_follow_poll_s(), app_settings.log_follow_idle_s()
    idle, told = 0.0, False
    while idle < idle_limit:
        job = await _load(job_id)
        if job is None or not await _allowed(user_id, job_id):
            return
        if job.log_captured or (job.is_terminal and not job.pod_name):
            yield await _tail(job_id)
            return
        if not job.pod_name and not told:  # say why nothing comes yet (and let the headers go out)
            yield f"[waiting for the job to start: it is {job.state}]\n".encode()
            told = True
        if job.pod_name:
            try:
                pod = await asyncio.to_thread(worker_pod, job, worker)
                if pod:
                    async for chunk in _live(job, pod, user_id, poll):
                        yield chunk
                    return
            except K8sError as exc:
                if exc.status not in (400, 404):  # 400: the container is not started yet
                    log.warning("live log of job %s unavailable (%s); serving the kept tail", job_id, exc)
                    yield await _tail(job_id)
                    return
        await asyncio.sleep(poll)
        idle += poll
    yield b"\n[no output for a while: the stream ended; reload to follow again]\n"


async def _live(job: Job, pod: str, user_id: int, poll: float) -> AsyncIterator[bytes]:
    """The pod's followed log; ends with the stream, when the job ended or stayed silent, or when
    the follower may no longer read it (deactivated, removed from the project)."""
    query = {"container": "main", "follow": "true"}
    chunks = get_client().astream(paths.pod_log(job.namespace, pod), query)
    idle, idle_limit, checked = 0.0, app_settings.log_follow_idle_s(), time.monotonic()
    async for chunk in _ticks(chunks, poll):
        if chunk is not None:
            if time.monotonic() - checked > RECHECK_S:
                checked = time.monotonic()
                if not await _allowed(user_id, job.pk):
                    return
            idle = 0.0
            yield chunk
            continue
        idle += poll
        now = await _load(job.pk)
        if now is None or now.is_terminal or idle >= idle_limit or not await _allowed(user_id, job.pk):
            return


async def _ticks(chunks: AsyncIterator[bytes], every: float) -> AsyncIterator[bytes | None]:
    """The chunks, with a None whenever `every` seconds pass without one."""
    source = aiter(chunks)
    pending: asyncio.Future[bytes] = asyncio.ensure_future(anext(source))
    try:
        while True:
            done, _ = await asyncio.wait({pending}, timeout=every)
            if not done:
                yield None
                continue
            try:
                chunk = pending.result()
            except StopAsyncIteration:
                return
            yield chunk
            pending = asyncio.ensure_future(anext(source))
    finally:
        pending.cancel()
        with contextlib.suppress(BaseException):
            await pending
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()
