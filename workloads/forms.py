"""The submit form: plain text inputs turned into the typed request the API also accepts.

The same form edits a template and a rerun: `spec_initial` turns a stored request back into its
fields. Volumes are rows (volume, mount path, read-only) whose choices are the volumes of the
projects the user may submit to; `clean` keeps each row to the chosen project's own volumes.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from django import forms

from workloads.choices import Priority

VOLUME_ROWS, MAX_VOLUME_ROWS = 2, 16
_ROW_KEY = re.compile(r"^volume_(\d+)$")
# project slug -> volume name -> only read-only mounts allowed
Volumes = Mapping[str, Mapping[str, bool]]


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _split(text: str, what: str) -> list[str]:
    try:
        return shlex.split(text or "")
    except ValueError as exc:
        raise forms.ValidationError(f"Cannot split the {what}: {exc}") from exc


def volume_rows(data: Mapping[str, Any] | None, initial: Mapping[str, Any]) -> int:
    """How many volume rows to show: one free row after the prefilled ones, or the posted ones."""
    prefilled = [int(m[1]) + 2 for key in initial if (m := _ROW_KEY.match(key))]
    posted = [int(m[1]) + 1 for key in (data or {}) if (m := _ROW_KEY.match(key))]
    return min(MAX_VOLUME_ROWS, max([VOLUME_ROWS, *prefilled, *posted]))


def spec_initial(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A stored request (template, job) as the form's initial values."""
    data: dict[str, Any] = {k: v for k, v in spec.items() if k not in ("command", "args", "env", "volumes")}
    data["command"] = shlex.join(spec.get("command") or [])
    data["args"] = shlex.join(spec.get("args") or [])
    data["env"] = "\n".join(f"{e['name']}={e['value']}" for e in spec.get("env") or [])
    for i, volume in enumerate(spec.get("volumes") or []):
        data[f"volume_{i}"], data[f"mount_path_{i}"] = volume["volume"], volume["mount_path"]
        data[f"read_only_{i}"] = bool(volume.get("read_only"))
    sim = data.pop("simulate", None) or {}
    data["sim_run_seconds"], data["sim_exit_code"] = sim.get("run_seconds"), sim.get("exit_code")
    return data


class SubmitForm(forms.Form):
    project = forms.ChoiceField(help_text="The project the job runs in (and whose quota it uses).")
    name = forms.CharField(max_length=80, required=False, label="Job name")
    image = forms.CharField(
        max_length=300, help_text="From the project's allow-list, e.g. registry.example.com/team/train:1.0"
    )
    command = forms.CharField(
        required=False, help_text="Command and arguments, shell-quoted (no shell runs it)."
    )
    args = forms.CharField(
        required=False,
        label="Arguments",
        help_text="Passed to the image's entrypoint (or after the command), shell-quoted.",
    )
    env = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        label="Environment",
        help_text="NAME=value, one per line.",
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
    interactive = forms.BooleanField(
        required=False, help_text="A notebook or shell you work in: judged idle over a longer window."
    )
    sim_run_seconds = forms.IntegerField(required=False, min_value=0, label="Simulated run time (s)")
    sim_exit_code = forms.IntegerField(
        required=False, min_value=0, max_value=255, label="Simulated exit code"
    )

    def __init__(
        self,
        *args: Any,
        projects: list[tuple[str, str]],
        simulation: bool,
        volumes: Volumes | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        project_field = self.fields["project"]
        assert isinstance(project_field, forms.ChoiceField)  # noqa: S101 - declared above
        project_field.choices = projects
        if not simulation:
            del self.fields["sim_run_seconds"]
            del self.fields["sim_exit_code"]
        self.volumes: Volumes = volumes or {}
        self.max_rows = MAX_VOLUME_ROWS
        self.rows = volume_rows(self.data if self.is_bound else None, self.initial)
        self._add_volume_rows()

    def _add_volume_rows(self) -> None:
        names = sorted({name for per_project in self.volumes.values() for name in per_project})
        choices = [("", "none"), *((name, name) for name in names)]
        for i in range(self.rows):
            n = i + 1
            self.fields[f"volume_{i}"] = forms.ChoiceField(
                choices=choices,
                required=False,
                label=f"Volume {n}",
                widget=forms.Select(attrs={"data-volume-row": i}),
            )
            self.fields[f"mount_path_{i}"] = forms.CharField(
                max_length=250, required=False, label=f"Mount path {n}", help_text="e.g. /data"
            )
            self.fields[f"read_only_{i}"] = forms.BooleanField(required=False, label=f"Read-only {n}")

    def main_fields(self) -> list[forms.BoundField]:
        return [
            self[name]
            for name in self.fields
            if not name.startswith(("volume_", "mount_path_", "read_only_"))
        ]

    def volume_fields(self) -> list[tuple[forms.BoundField, forms.BoundField, forms.BoundField]]:
        return [
            (self[f"volume_{i}"], self[f"mount_path_{i}"], self[f"read_only_{i}"]) for i in range(self.rows)
        ]

    def clean_command(self) -> list[str]:
        return _split(self.cleaned_data.get("command") or "", "command")

    def clean_args(self) -> list[str]:
        return _split(self.cleaned_data.get("args") or "", "arguments")

    def clean_env(self) -> list[dict[str, str]]:
        out = []
        for line in _lines(self.cleaned_data.get("env") or ""):
            name, sep, value = line.partition("=")
            if not sep:
                raise forms.ValidationError(f"{line[:40]!r}: write NAME=value.")
            out.append({"name": name.strip(), "value": value})
        return out

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        mounts = [m for i in range(self.rows) if (m := self._mount(i, data)) is not None]
        data["volumes"] = mounts
        return data

    def _mount(self, i: int, data: dict[str, Any]) -> dict[str, Any] | None:
        """Row i as a mount, or None when it is empty (or wrong, with the error put on the row)."""
        name, path = data.pop(f"volume_{i}", ""), (data.pop(f"mount_path_{i}", "") or "").strip()
        read_only = bool(data.pop(f"read_only_{i}", False))
        if not name:
            if path:
                self.add_error(f"volume_{i}", "Choose the volume to mount here.")
            return None
        allowed = self.volumes.get(data.get("project") or "", {})
        if name not in allowed:
            self.add_error(f"volume_{i}", f"{name} is not a volume of project {data.get('project')}.")
        elif allowed[name] and not read_only:
            self.add_error(f"read_only_{i}", f"{name} is read-only in this project: tick Read-only.")
        if not path:
            self.add_error(f"mount_path_{i}", "Say where the volume appears, e.g. /data.")
        return {"volume": name, "mount_path": path, "read_only": read_only}

    def spec(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        data.pop("project")
        run, code = data.pop("sim_run_seconds", None), data.pop("sim_exit_code", None)
        if run is not None or code is not None:
            data["simulate"] = {"run_seconds": run, "exit_code": code}
        return data


class TemplateForm(forms.Form):
    """A template's own name and description (its spec comes from the submit form's fields)."""

    name = forms.CharField(max_length=80, label="Template name")
    description = forms.CharField(
        required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}), label="Description"
    )


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
