"""The `rightsizing` block of a job in the API: its GPU peaks, used hours and the smaller size that
would have done (workloads.rightsizing), typed for the schema."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from workloads import accounting, rightsizing
from workloads.models import Job


class RightsizingHintSerializer(serializers.Serializer[Any]):
    text = serializers.CharField(
        help_text='e.g. "asked 32 GiB on 1 GPU, peak 9 GiB and 20 %: a 2-slice share would do"'
    )
    gpus = serializers.IntegerField(help_text="The suggested size: whole GPUs (0 when slices).")
    mps_slices = serializers.IntegerField(help_text="The suggested size: MPS slices (0 when whole GPUs).")

    class Meta:
        ref_name = "RightsizingHint"


class RightsizingSerializer(serializers.Serializer[Any]):
    peak_gpu_mem_mib = serializers.IntegerField(
        allow_null=True,
        help_text="Most GPU memory the job's own processes held on one GPU (null: no telemetry).",
    )
    peak_sm_pct = serializers.IntegerField(
        allow_null=True, help_text="Highest SM utilisation of a GPU running the job, %."
    )
    gpu_mem_total_mib = serializers.IntegerField(allow_null=True, help_text="Memory of the GPU it ran on.")
    used_gpu_hours = serializers.FloatField(help_text="GPU-hours the GPUs were busy (telemetry).")
    hint = RightsizingHintSerializer(
        allow_null=True, help_text="A smaller size that holds the peaks; rerun with its gpus / mps_slices."
    )

    class Meta:
        ref_name = "Rightsizing"


def plan_of(context: dict[str, Any]) -> accounting.SlicePlan:
    """The slice plan, read once per response (kept in the serializer's context)."""
    if "slice_plan" not in context:
        context["slice_plan"] = dict(accounting.slice_plan())
    plan: accounting.SlicePlan = context["slice_plan"]
    return plan


def rightsizing_of(job: Job, context: dict[str, Any]) -> dict[str, Any]:
    """The block for one job."""
    plan = plan_of(context)
    hint = rightsizing.suggest(job, per_gpu=rightsizing.per_gpu_for(job, plan))
    return {
        "peak_gpu_mem_mib": job.peak_gpu_mem_mib,
        "peak_sm_pct": job.peak_sm_pct,
        "gpu_mem_total_mib": job.gpu_mem_total_mib,
        "used_gpu_hours": round(accounting.job_used_hours(job, plan), 4),
        "hint": None
        if hint is None
        else {"text": hint.text, "gpus": hint.gpus, "mps_slices": hint.mps_slices},
    }
