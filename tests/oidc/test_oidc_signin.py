"""Sign-in through a real OpenID Connect provider process: the whole authorization-code flow.

The portal side runs in this process (Django's test client); the provider is tests/oidc/provider,
reached over HTTP both by the "browser" (authorize redirect) and by the portal (token, JWKS,
userinfo), as in production.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest
import requests
from allauth.socialaccount.models import SocialAccount
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from pytest_django.fixtures import Settings

from accounts.models import User
from portal.settings.oidc import oidc_providers
from tests.fixtures.personas import make_user
from tests.oidc.conftest import Provider

if TYPE_CHECKING:  # the test client's response type exists only in django-stubs
    from django.test.client import _MonkeyPatchedWSGIResponse as Answer

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/oidc/oidc/login/"


@pytest.fixture
def oidc(settings: Settings, oidc_provider: Provider) -> Provider:
    settings.SOCIALACCOUNT_PROVIDERS = oidc_provider.providers_setting()
    return oidc_provider


def _sign_in(client: Client) -> Answer:
    """Run the flow; the portal's answer to the provider's redirect back."""
    start = client.post(LOGIN)
    assert start.status_code == 302, start.content[:300]
    authorize = requests.get(start["Location"], allow_redirects=False, timeout=10)
    assert authorize.status_code == 302, authorize.text[:300]
    back = urlsplit(authorize.headers["Location"])
    return client.get(f"{back.path}?{back.query}")


def _lands_on(response: Answer) -> str:
    assert response.status_code == 302, response.content[:500]
    return str(response["Location"])


def _signed_in_as(client: Client) -> User | None:
    user = client.get("/").wsgi_request.user
    return user if isinstance(user, User) else None


def test_the_sign_in_page_offers_the_provider(oidc: Provider) -> None:
    page = Client().get("/accounts/login/").content.decode()
    assert "Lab SSO" in page
    assert LOGIN in page


def test_a_verified_email_links_the_existing_account_and_signs_in(oidc: Provider) -> None:
    alice = make_user("alice@lab.example")
    oidc.queue_user("idp-alice", "alice@lab.example", verified=True)
    client = Client()
    assert _lands_on(_sign_in(client)) == "/"
    assert _signed_in_as(client) == alice
    link = SocialAccount.objects.get(user=alice)
    assert (link.provider, link.uid) == ("oidc", "idp-alice")
    # Next time the provider's subject alone finds the account, whatever the email says.
    oidc.queue_user("idp-alice", "alice.new@lab.example", verified=True)
    again = Client()
    _sign_in(again)
    assert _signed_in_as(again) == alice


def test_an_id_token_for_another_audience_is_refused(oidc: Provider) -> None:
    make_user("bob@lab.example")
    oidc.queue_user("idp-bob", "bob@lab.example", audience="some-other-app")
    client = Client()
    refused = _sign_in(client)
    assert refused.status_code == 401
    assert "Third-Party Login Failure" in refused.content.decode()
    assert _signed_in_as(client) is None
    assert not SocialAccount.objects.exists()


def test_an_unverified_email_never_links_an_account(oidc: Provider) -> None:
    make_user("carol@lab.example")
    oidc.queue_user("idp-mallory", "carol@lab.example", verified=False)
    client = Client()
    answer = _sign_in(client)
    # Not carol's account: a new one would be made, and sign-up is closed.
    assert "Sign Up Closed" in answer.content.decode()
    assert _signed_in_as(client) is None
    assert not SocialAccount.objects.exists()


def test_new_accounts_come_from_the_provider_only_when_operators_allow(
    oidc: Provider, settings: Settings
) -> None:
    oidc.queue_user("idp-dave", "dave@lab.example")
    assert "Sign Up Closed" in _sign_in(Client()).content.decode()
    assert not User.objects.filter(email="dave@lab.example").exists()

    settings.SOCIALACCOUNT_ALLOW_SIGNUPS = True
    oidc.queue_user("idp-dave", "dave@lab.example")
    client = Client()
    assert _lands_on(_sign_in(client)) == "/"
    dave = User.objects.get(email="dave@lab.example")
    assert _signed_in_as(client) == dave
    assert not dave.is_staff


def test_an_operator_with_mfa_is_still_asked_for_the_code(oidc: Provider) -> None:
    make_user("ops@lab.example", staff=True, mfa=True)
    oidc.queue_user("idp-ops", "ops@lab.example")
    client = Client()
    assert _lands_on(_sign_in(client)) == "/accounts/2fa/authenticate/"
    assert _signed_in_as(client) is None


def test_a_provider_without_client_credentials_is_a_clear_settings_error() -> None:
    with pytest.raises(ImproperlyConfigured, match="GPUPORTAL_OIDC_CLIENT_ID"):
        oidc_providers(server_url="https://idp.example/realms/lab", client_id="", secret="", name="SSO")
