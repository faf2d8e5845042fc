"""Job logs for the API and the pages: read from the pod, or the tail kept in the row.

A followed log under ASGI is `log_follow.follow` (async, no thread held); the blocking reads here
serve one-shot reads and the WSGI fallback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse

from workloads import app_settings, log_follow
from workloads.k8s import paths
from workloads.k8s.client import get_client
from workloads.k8s.errors import K8sError
from workloads.models import Job

log = logging.getLogger(__name__)


def _live(job: Job, pod: str, follow: bool) -> Iterator[bytes]:
    query = {"container": "main"}
    if follow:
        query["follow"] = "true"
    path = paths.pod_log(job.namespace, pod)
    client = get_client()
    if follow:
        for line in client.stream(path, query, timeout=3600):
            yield line + b"\n"
        return
    data, cut = client.read_tail(path, query, app_settings.log_tail_bytes())
    if cut:
        yield b"[earlier output dropped: only the end of the log is shown]\n"
    yield data


class NoSuchWorker(LookupError):
    """A log request names a worker index the job does not have."""


def worker_param(job: Job, raw: str | None) -> int | None:
    """The `worker` a log request names (None: none named). ValueError: not an index at all;
    NoSuchWorker: an index this job does not have. Both say what to send."""
    if not raw:
        return None
    count = f"0 to {job.workers - 1} (this job has {job.workers} worker{'' if job.workers == 1 else 's'})"
    if not raw.isdigit():
        raise ValueError(f"worker must be a worker's index, {count}, not {raw[:20]!r}.")
    if int(raw) >= job.workers:
        raise NoSuchWorker(f"This job has no worker {int(raw)}: a worker's index is {count}.")
    return int(raw)


def log_lines(job: Job, *, follow: bool, worker: int | None = None) -> Iterator[bytes]:
    """The pod's log while it exists (of one worker, where named); afterwards (or when the pod is
    gone) the kept tail, every worker's."""
    try:
        pod = log_follow.worker_pod(job, worker) if job.pod_name and not job.log_captured else ""
    except K8sError as exc:
        log.info("pods of %s unavailable (%s); serving the kept tail", job, exc.status)
        pod = ""
    if not pod:
        yield log_follow.kept_tail(job)
        return
    # A followed log may be asked for while the container is still being created (pods/log: 400):
    # wait for it as log_follow does, rather than serve the still empty kept tail.
    deadline = time.monotonic() + (app_settings.log_follow_idle_s() if follow else 0.0)
    while True:
        sent = False
        try:
            for chunk in _live(job, pod, follow):
                sent = True
                yield chunk
            return
        except K8sError as exc:
            if exc.status == 400 and not sent and time.monotonic() < deadline:
                time.sleep(app_settings.log_follow_poll_s())
                continue
            log.info("live log of %s unavailable (%s); serving the kept tail", job, exc.status)
            yield job.log_tail.encode()
            return


def _next_chunk(lines: Iterator[bytes]) -> bytes | None:
    return next(lines, None)


async def _async_lines(lines: Iterator[bytes]) -> AsyncIterator[bytes]:
    """Hand a blocking iterator to the ASGI server one chunk at a time (Django would otherwise
    buffer a synchronous iterator whole, and a followed log would never arrive)."""
    while True:
        chunk = await sync_to_async(_next_chunk, thread_sensitive=False)(lines)
        if chunk is None:
            return
        yield chunk


class TooManyStreams(Exception):
    """The user already holds the most followed log streams one process allows."""


def log_response(
    job: Job, *, follow: bool, user_id: int, asgi: bool = False, worker: int | None = None
) -> StreamingHttpResponse:
    content: Iterator[bytes] | AsyncIterator[bytes]
    if follow and asgi:
        if log_follow.OPEN.full(user_id):
            raise TooManyStreams(
                f"You already follow {app_settings.log_streams_per_user()} logs; close a job page "
                "(or a `gpuctl logs -f`) and try again."
            )
        content = log_follow.follow(job.pk, user_id, worker)
    else:
        lines = log_lines(job, follow=follow, worker=worker)
        content = _async_lines(lines) if asgi else lines
    response = StreamingHttpResponse(content, content_type="text/plain; charset=utf-8")
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"
    return response
