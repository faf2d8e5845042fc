"""The submit form: plain text inputs turned into the typed request the API also accepts."""

from __future__ import annotations

import shlex
from typing import Any

from django import forms

from workloads.choices import Priority


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


class SubmitForm(forms.Form):
    project = forms.ChoiceField(help_text="The project the job runs in (and whose quota it uses).")
    name = forms.CharField(max_length=80, required=False)
    image = forms.CharField(
        max_length=300, help_text="From the project's allow-list, e.g. registry.example.com/team/train:1.0"
    )
    command = forms.CharField(
        required=False, help_text="Command and arguments, shell-quoted (no shell runs it)."
    )
    env = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, help_text="NAME=value, one per line."
    )
    gpus = forms.IntegerField(min_value=0, max_value=8, initial=1, label="GPUs")
    gpu_type = forms.CharField(
        max_length=80, required=False, label="GPU type", help_text="e.g. NVIDIA-GeForce-RTX-5090; empty: any."
    )
    mps_slices = forms.IntegerField(
        min_value=0, initial=0, label="MPS slices", help_text="Instead of whole GPUs: MPS slices."
    )
    cpu_millicores = forms.IntegerField(min_value=100, initial=1000, label="CPU (millicores)")
    memory_mib = forms.IntegerField(min_value=64, initial=4096, label="Memory (MiB)")
    max_runtime_minutes = forms.IntegerField(min_value=1, initial=60, label="Longest run (minutes)")
    priority = forms.ChoiceField(choices=Priority.choices, initial=Priority.NORMAL)
    preemptible = forms.BooleanField(required=False)
    sim_run_seconds = forms.IntegerField(required=False, min_value=0, label="Simulated run time (s)")
    sim_exit_code = forms.IntegerField(
        required=False, min_value=0, max_value=255, label="Simulated exit code"
    )

    def __init__(self, *args: Any, projects: list[tuple[str, str]], simulation: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        project_field = self.fields["project"]
        assert isinstance(project_field, forms.ChoiceField)  # noqa: S101 - declared above
        project_field.choices = projects
        if not simulation:
            del self.fields["sim_run_seconds"]
            del self.fields["sim_exit_code"]

    def clean_command(self) -> list[str]:
        try:
            return shlex.split(self.cleaned_data.get("command") or "")
        except ValueError as exc:
            raise forms.ValidationError(f"Cannot split the command: {exc}") from exc

    def clean_env(self) -> list[dict[str, str]]:
        out = []
        for line in _lines(self.cleaned_data.get("env") or ""):
            name, sep, value = line.partition("=")
            if not sep:
                raise forms.ValidationError(f"{line[:40]!r}: write NAME=value.")
            out.append({"name": name.strip(), "value": value})
        return out

    def spec(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        data.pop("project")
        run, code = data.pop("sim_run_seconds", None), data.pop("sim_exit_code", None)
        if run is not None or code is not None:
            data["simulate"] = {"run_seconds": run, "exit_code": code}
        return data


class GrantRequestForm(forms.Form):
    """A temporary quota grant request (workloads.services.grants.grant_request decides what is allowed)."""

    gpus = forms.IntegerField(min_value=0, max_value=64, initial=1, label="GPUs")
    slices = forms.IntegerField(min_value=0, max_value=256, initial=0, label="MPS slices")
    starts_at = forms.DateTimeField(
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="UTC; empty: now.",
    )
    until = forms.DateTimeField(
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}), help_text="UTC; at most 31 days."
    )
    reason = forms.CharField(max_length=300, required=False, widget=forms.Textarea(attrs={"rows": 2}))
