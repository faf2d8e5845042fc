from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.utils import timezone

from accounts.choices import Role, TokenScope


class TokenForm(forms.Form):
    name = forms.CharField(max_length=80, help_text="What uses it, e.g. 'laptop CLI'.")
    scopes = forms.MultipleChoiceField(
        choices=TokenScope.choices, widget=forms.CheckboxSelectMultiple, initial=[TokenScope.READ]
    )
    days = forms.IntegerField(min_value=1, max_value=365, initial=90, label="Expires after (days)")

    def expires_at(self) -> Any:
        return timezone.now() + timedelta(days=self.cleaned_data["days"])


class MemberAddForm(forms.Form):
    email = forms.EmailField()
    role = forms.ChoiceField(choices=Role.choices, initial=Role.MEMBER, required=False)

    def clean_role(self) -> str:
        return str(self.cleaned_data.get("role") or Role.MEMBER)


class SettingsForm(forms.Form):
    notify_by_email = forms.BooleanField(required=False, label="Email me when my jobs start, finish or fail")
