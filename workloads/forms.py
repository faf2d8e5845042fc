"""The submit form: plain text inputs turned into the typed request the API also accepts.

Its spec fields are made from the spec's declaration (workloads.spec.form). The same form edits a
template and a rerun: `spec_initial` turns a stored request back into its fields. Volumes are rows
(volume, mount path, read-only) whose choices are the volumes of the projects the user may submit
to; `clean` keeps each row to the chosen project's own volumes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django import forms

from workloads.app_settings import SiteSwitch
from workloads.spec.declaration import VolumeMount
from workloads.spec.fields import field_of
from workloads.spec.form import form_initial, form_request, spec_form_fields

VOLUME_ROWS, MAX_VOLUME_ROWS = 2, 16
_ROW_KEY = re.compile(r"^volume_(\d+)$")
# project slug -> volume name -> only read-only mounts allowed
Volumes = Mapping[str, Mapping[str, bool]]


def volume_rows(data: Mapping[str, Any] | None, initial: Mapping[str, Any]) -> int:
    """How many volume rows to show: one free row after the prefilled ones, or the posted ones."""
    prefilled = [int(m[1]) + 2 for key in initial if (m := _ROW_KEY.match(key))]
    posted = [int(m[1]) + 1 for key in (data or {}) if (m := _ROW_KEY.match(key))]
    return min(MAX_VOLUME_ROWS, max([VOLUME_ROWS, *prefilled, *posted]))


def spec_initial(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A stored request (template, job) as the form's initial values."""
    data = form_initial(spec)
    for i, volume in enumerate(spec.get("volumes") or []):
        data[f"volume_{i}"], data[f"mount_path_{i}"] = volume["volume"], volume["mount_path"]
        data[f"read_only_{i}"] = bool(volume.get("read_only"))
    return data


class SubmitForm(forms.Form):
    project = forms.ChoiceField(help_text="The project the job runs in (and whose quota it uses).")

    def __init__(
        self,
        *args: Any,
        projects: list[tuple[str, str]],
        switches: frozenset[SiteSwitch],
        volumes: Volumes | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        project_field = self.fields["project"]
        assert isinstance(project_field, forms.ChoiceField)  # noqa: S101 - declared above
        project_field.choices = projects
        self.fields.update(spec_form_fields(switches=switches))
        self.volumes: Volumes = volumes or {}
        self.max_rows = MAX_VOLUME_ROWS
        self.rows = volume_rows(self.data if self.is_bound else None, self.initial)
        self._add_volume_rows()

    def _add_volume_rows(self) -> None:
        names = sorted({name for per_project in self.volumes.values() for name in per_project})
        choices = [("", "none"), *((name, name) for name in names)]
        volume, path = field_of(VolumeMount, "volume"), field_of(VolumeMount, "mount_path")
        read_only = field_of(VolumeMount, "read_only")
        for i in range(self.rows):
            n = i + 1
            self.fields[f"volume_{i}"] = forms.ChoiceField(
                choices=choices,
                required=False,
                label=f"{volume.title} {n}",
                widget=forms.Select(attrs={"data-volume-row": i}),
            )
            self.fields[f"mount_path_{i}"] = forms.CharField(
                max_length=path.max_length,
                required=False,
                label=f"{path.title} {n}",
                help_text=path.hints.form_help or "",
            )
            self.fields[f"read_only_{i}"] = forms.BooleanField(required=False, label=f"{read_only.title} {n}")

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
        """The request the form's fields make (the service parses it with the project's limits)."""
        return {**form_request(self.cleaned_data), "volumes": self.cleaned_data["volumes"]}


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
