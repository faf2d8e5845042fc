from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.utils import timezone

from accounts.choices import NotifyEvent, Role, TokenScope
from accounts.models import User


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


class NotificationsForm(forms.Form):
    """The master switch, then one box per kind of job event (NotifyEvent); a box left out is off."""

    email = forms.BooleanField(required=False, label="Email me about my jobs")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for value, label in NotifyEvent.choices:
            self.fields[value] = forms.BooleanField(required=False, label=label)

    @classmethod
    def of(cls, user: User, data: Any = None) -> NotificationsForm:
        return cls(data, initial={"email": user.notify_by_email, **user.email_events()})

    def events(self) -> list[forms.BoundField]:
        return [self[value] for value in NotifyEvent.values]

    def choices(self) -> dict[str, bool]:
        return {event: bool(self.cleaned_data[event]) for event in NotifyEvent.values}


class WebhookForm(forms.Form):
    url = forms.URLField(
        max_length=500,
        assume_scheme="https",
        label="Webhook URL",
        help_text="An https URL the portal can reach on the internet; job events are POSTed to it, signed.",
    )
