"""The operators' queue settings (one row)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


class QueueSettings(models.Model):
    """The operators' queue knobs; one row (pk=1), edited in the admin."""

    half_life_hours = models.FloatField(default=168.0, validators=[MinValueValidator(0.1)])
    borrowing_enabled = models.BooleanField(default=True)
    preemption_notice_s = models.PositiveIntegerField(default=300)
    workers_hold_after_s = models.PositiveIntegerField(
        default=600,
        help_text="A job of several workers waiting this long for nodes has nodes held for it as they "
        "free up, so smaller jobs cannot keep taking them (0: never).",
    )
    workers_hang_after_s = models.PositiveIntegerField(
        default=600,
        help_text="A running job of several workers whose GPUs have all been idle this long, after being "
        "busy, is flagged as a collective that may be hung (page, email, webhook); 0: never.",
    )
    workers_restarts = models.PositiveSmallIntegerField(
        default=0,
        help_text="A job of several workers one of which failed starts again, all its workers, at the "
        "front of its queue, this many times before it fails (0: it fails at once).",
    )
    # Each queued job is a suspended Kubernetes Job and a row every admission cycle reads: a bound
    # keeps one user (or a runaway script) from filling the cluster's etcd and slowing every cycle.
    max_queued_per_user = models.PositiveIntegerField(
        default=500, help_text="Queued jobs one user may have in one project; the next submit answers 429."
    )
    max_queued_per_project = models.PositiveIntegerField(
        default=2000, help_text="Queued jobs one project may have; the next submit answers 429."
    )
    # Idle-GPU reclaim (docs/operator-guide.md "Idle GPUs"): a running job whose GPUs stay under both
    # thresholds for the window is warned, then suspended `idle_warning_s` later unless busy or snoozed.
    idle_reclaim_enabled = models.BooleanField(default=True)
    idle_util_pct = models.PositiveSmallIntegerField(
        default=5,
        validators=[MaxValueValidator(100)],
        help_text="Idle: SM utilisation always below this (%).",
    )
    idle_mem_change_pct = models.PositiveSmallIntegerField(
        default=5,
        validators=[MaxValueValidator(100)],
        help_text="Idle: GPU memory used moved by less than this share of the GPU's memory (%).",
    )
    idle_window_s = models.PositiveIntegerField(
        default=1800, validators=[MinValueValidator(60)], help_text="Idle this long before the warning."
    )
    idle_warning_s = models.PositiveIntegerField(
        default=600, validators=[MinValueValidator(0)], help_text="From the warning to the suspension."
    )
    idle_max_snoozes = models.PositiveSmallIntegerField(
        default=2, help_text="Snoozes per job; each resets the window."
    )
    # A notebook sits idle while its user reads and types: a longer window of its own, or none.
    idle_interactive_window_s = models.PositiveIntegerField(
        default=7200,
        help_text="Interactive jobs: idle this long before the warning; 0 never reclaims them.",
    )

    class Meta:
        verbose_name = verbose_name_plural = "queue settings"

    def __str__(self) -> str:
        return "Queue settings"

    def clean(self) -> None:
        # The rule re-checks the sliding window at suspension: a warning longer than the window would let
        # a busy spike in the warning period slide out of it unseen.
        if self.idle_warning_s > self.idle_window_s:
            raise ValidationError(
                {"idle_warning_s": "The warning period cannot be longer than the idle window."}
            )
        if 0 < self.idle_interactive_window_s < self.idle_warning_s:
            raise ValidationError(
                {"idle_interactive_window_s": "Shorter than the warning period: make it longer, or 0."}
            )

    @classmethod
    def load(cls) -> QueueSettings:
        row, _ = cls.objects.get_or_create(pk=1)
        return row
