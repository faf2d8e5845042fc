"""`manage.py node_token <node>` prints a working node token once."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from gpu.models import NodeToken
from gpu.services import node_token_authenticate
from gpu.tests.factories import make_node

pytestmark = pytest.mark.django_db


def test_it_prints_a_secret_that_authenticates_for_that_node() -> None:
    node = make_node("gpu-node-5")
    out = StringIO()
    call_command("node_token", "gpu-node-5", stdout=out)
    token = node_token_authenticate(secret=out.getvalue().strip())
    assert token is not None
    assert token.node == node
    assert out.getvalue().strip() not in NodeToken.objects.get().digest


def test_an_unknown_node_is_an_error_unless_asked_to_create_it() -> None:
    with pytest.raises(CommandError):
        call_command("node_token", "nope", stdout=StringIO())
    call_command("node_token", "new-node", "--create-node", stdout=StringIO())
    assert NodeToken.objects.filter(node__name="new-node").exists()
