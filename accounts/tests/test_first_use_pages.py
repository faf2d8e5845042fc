"""What a new user reads on the first pages: no sign-up offer while sign-up is closed, plain labels."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from workloads.forms import SubmitForm

pytestmark = pytest.mark.django_db


def test_the_sign_in_page_offers_sign_up_only_when_it_is_open() -> None:
    closed = Client().get("/accounts/login/").content.decode()
    assert "sign up" not in closed.lower()
    assert "ask them for one" in closed
    with override_settings(ACCOUNT_ALLOW_SIGNUPS=True):
        assert "sign up" in Client().get("/accounts/login/").content.decode().lower()


def test_the_submit_form_labels_read_like_words() -> None:
    form = SubmitForm(projects=[("alpha", "Alpha")], switches=frozenset())
    labels = {name: str(form[name].label) for name in ("gpus", "mps_slices", "cpu_millicores", "memory_mib")}
    assert labels == {
        "gpus": "GPUs",
        "mps_slices": "MPS slices",
        "cpu_millicores": "CPU (millicores)",
        "memory_mib": "Memory (MiB)",
    }
