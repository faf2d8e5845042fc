"""Every task name the code sends (publisher, gpu, beat, routes) is a task the workers register."""

from __future__ import annotations

from django.conf import settings

from gpu import services as gpu_services
from portal.celery import app
from workloads.choices import TaskName


def test_every_task_name_that_is_sent_is_registered_with_celery() -> None:
    app.loader.import_default_modules()  # what a worker does at start: autodiscover every tasks.py
    registered = {str(name) for name in app.tasks}
    sent = {str(name) for name in TaskName} | {gpu_services.NODE_TASK}
    scheduled = {str(entry["task"]) for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    routed = {str(name) for name in settings.CELERY_TASK_ROUTES}
    named = sent | scheduled | routed
    assert named <= registered, sorted(named - registered)


def test_tasks_are_routed_by_settings_not_by_deprecated_task_attributes() -> None:
    """Celery warns at start about a task that names its own queue (removed in Celery 6): queues come
    from the routes setting, and the default queue for the rest."""
    app.loader.import_default_modules()
    own = [
        name
        for name, task in app.tasks.items()
        if not name.startswith("celery.")
        and any(type(task).__dict__.get(a) is not None for a in ("queue", "exchange", "routing_key"))
    ]
    assert own == []
    assert app.amqp.router.route({}, "gpu.nodes_sweep")["queue"].name == settings.CELERY_TASK_DEFAULT_QUEUE
    assert app.amqp.router.route({}, "workloads.notify_job")["queue"].name == "notify"
