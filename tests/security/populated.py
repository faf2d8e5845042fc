"""A portal with one real object of every kind a URL can name, for the walks over every URL pattern
(security headers, CSRF): project alpha with a job, a template, a grant, a webhook and tokens, a node
with GPUs and a node token, and a row in every admin-registered model the fixtures can make."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import Group
from django.utils import timezone

from accounts import services as account_services
from accounts.choices import TokenScope
from accounts.models import ApiToken, Membership, ProjectWebhook
from gpu import services as gpu_services
from gpu.models import Gpu, GpuEvent, Node
from tests.fixtures.personas import World
from workloads.models import Job, JobTemplate, QuotaGrant
from workloads.services import jobs as job_services
from workloads.services import templates as template_services
from workloads.tests.conftest import IMAGE, allow_images


@dataclass
class Populated:
    world: World
    job: Job
    template: JobTemplate
    token: ApiToken
    node: Node
    gpu: Gpu


def populate(world: World) -> Populated:
    allow_images(world.alpha)
    job = job_services.job_submit(
        actor=world.owner, project=world.alpha, data={"image": IMAGE, "name": "walk-job"}
    )
    template = template_services.template_create(
        actor=world.owner, project=world.alpha, name="walk-template", spec={"image": IMAGE}
    )
    token, _ = account_services.token_create(
        user=world.owner, name="walk", scopes=[TokenScope.READ], expires_at=None
    )
    QuotaGrant.objects.create(
        project=world.alpha,
        requested_by=world.owner,
        gpus=1,
        until=timezone.now() + timedelta(days=1),
        reason="walk",
    )
    ProjectWebhook.objects.create(project=world.alpha, url="https://hooks.example.org/x", secret="w" * 64)
    node = Node.objects.create(name="walk-node-0", gpu_count=1, labels={"type": "kwok"})
    gpu = Gpu.objects.create(node=node, index=0, uuid="GPU-walk-node-0-0", memory_mib=32768)
    GpuEvent.objects.create(gpu=gpu, kind=GpuEvent._meta.get_field("kind").choices[0][0])  # type: ignore[index]
    gpu_services.node_token_create(node=node)
    Group.objects.create(name="walk-group")
    _rows_for_the_admin(world, job)
    assert Membership.objects.filter(project=world.alpha).exists()
    return Populated(world=world, job=job, template=template, token=token, node=node, gpu=gpu)


def _rows_for_the_admin(world: World, job: Job) -> None:
    """One row in each admin-registered model the objects above do not already make."""
    from allauth.socialaccount.models import SocialAccount, SocialApp, SocialToken

    from accounts.models import UserCap, WebhookDelivery
    from workloads.models import OrphanReport, QueueSettings, ReconcileOutbox

    app = SocialApp.objects.create(
        provider="openid_connect",
        provider_id="oidc",
        name="walk",
        client_id="c",
        settings={"server_url": "https://idp.example.org"},
    )
    account = SocialAccount.objects.create(user=world.member, provider="oidc", uid="walk-uid")
    SocialToken.objects.create(app=app, account=account, token="t")
    UserCap.objects.create(project=world.alpha, user=world.member)
    WebhookDelivery.objects.create(
        webhook=ProjectWebhook.objects.get(project=world.alpha), event="x", payload={}
    )
    OrphanReport.objects.create(namespace="gpuportal-alpha", name="walk-orphan")
    ReconcileOutbox.objects.get_or_create(job=job)
    QueueSettings.load()
