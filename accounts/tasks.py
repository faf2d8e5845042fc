"""Celery tasks of the accounts app: thin, keyed by id, sent by name (accounts.choices.TaskName)."""

from __future__ import annotations

from celery import shared_task

from accounts import webhooks
from accounts.choices import TaskName


@shared_task(
    name=TaskName.DELIVER_WEBHOOK.value,
    autoretry_for=(webhooks.WebhookFailed,),
    retry_backoff=5,  # 5, 10, 20 ... s with jitter, at most 10 minutes apart
    retry_backoff_max=600,
    retry_jitter=True,
    max_retries=8,
    soft_time_limit=30,
    time_limit=60,
    ignore_result=True,
)
def deliver_webhook(delivery_id: int) -> None:
    webhooks.deliver(delivery_id=delivery_id)
