"""The job spec's fields without a column of their own move into one JSON column, `spec_rest`: the
simulation's run time and exit code (two columns before) become its `simulate` object, as the spec
declares it (workloads.spec.JobSpec.simulate)."""

from django.db import migrations, models
from django.db.models import Q

BATCH = 1000


def columns_to_simulate(apps, schema_editor):
    Job = apps.get_model("workloads", "Job")
    simulated = Job.objects.filter(Q(sim_run_seconds__isnull=False) | Q(sim_exit_code__isnull=False))
    jobs = list(simulated.only("id", "sim_run_seconds", "sim_exit_code", "spec_rest"))
    for job in jobs:
        simulate = {"run_seconds": job.sim_run_seconds, "exit_code": job.sim_exit_code}
        job.spec_rest = {**job.spec_rest, "simulate": simulate}
    Job.objects.bulk_update(jobs, ["spec_rest"], batch_size=BATCH)


def simulate_to_columns(apps, schema_editor):
    Job = apps.get_model("workloads", "Job")
    jobs = list(Job.objects.filter(spec_rest__has_key="simulate").only("id", "spec_rest"))
    for job in jobs:
        simulate = job.spec_rest.get("simulate") or {}
        job.sim_run_seconds, job.sim_exit_code = simulate.get("run_seconds"), simulate.get("exit_code")
    Job.objects.bulk_update(jobs, ["sim_run_seconds", "sim_exit_code"], batch_size=BATCH)


class Migration(migrations.Migration):

    dependencies = [
        ('workloads', '0011_job_placement'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='spec_rest',
            field=models.JSONField(blank=True, default=dict, help_text="The spec's fields that have no column of their own."),
        ),
        migrations.RunPython(columns_to_simulate, simulate_to_columns),
        migrations.RemoveField(
            model_name='job',
            name='sim_exit_code',
        ),
        migrations.RemoveField(
            model_name='job',
            name='sim_run_seconds',
        ),
    ]
