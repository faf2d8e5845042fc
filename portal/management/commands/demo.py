"""`manage.py demo`: the embedded portal on one machine, with a local simulated GPU cluster, demo
accounts, a queue of demo jobs, simulated node agents, and printed sign-in details."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from allauth.account.models import EmailAddress
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts.choices import Role
from accounts.models import Membership, Project, Quota, User

OPERATOR_EMAIL = "operator@example.com"
RESEARCHERS = ("researcher@example.com", "student@example.com")
DEMO_IMAGE = ("registry.example.com", "team/train")


def _ensure_user(email: str, *, staff: bool) -> tuple[User, str]:
    password = secrets.token_urlsafe(12)
    user, _ = User.objects.get_or_create(email=email, defaults={"username": email.split("@")[0]})
    user.is_staff = user.is_superuser = staff
    user.set_password(password)
    user.save()
    EmailAddress.objects.update_or_create(
        user=user, email=email, defaults={"verified": True, "primary": True}
    )
    return user, password


@transaction.atomic
def seed() -> tuple[Project, dict[str, str]]:
    from workloads.models import ImageRule

    passwords = {OPERATOR_EMAIL: _ensure_user(OPERATOR_EMAIL, staff=True)[1]}
    project, _ = Project.objects.get_or_create(slug="vision-lab", defaults={"name": "Vision lab"})
    Quota.objects.update_or_create(project=project, defaults={"gpus": 6, "mps_slices": 8})
    ImageRule.objects.get_or_create(project=project, registry=DEMO_IMAGE[0], repository=DEMO_IMAGE[1])
    for index, email in enumerate(RESEARCHERS):
        user, passwords[email] = _ensure_user(email, staff=False)
        role = Role.MANAGER if index == 0 else Role.MEMBER
        Membership.objects.get_or_create(project=project, user=user, defaults={"role": role})
    return project, passwords


def submit_demo_jobs(project: Project) -> int:
    """More GPU jobs than the quota holds, so a queue with positions and reasons forms."""
    from workloads.models import Job
    from workloads.services.jobs import job_submit

    if Job.objects.filter(project=project, name__startswith="train-").exists():
        return 0
    image = f"{DEMO_IMAGE[0]}/{DEMO_IMAGE[1]}:1.0"
    count = 0
    for index, email in enumerate([*RESEARCHERS, *RESEARCHERS, *RESEARCHERS, RESEARCHERS[0]]):
        actor = User.objects.get(email=email)
        data = {
            "name": f"train-{index}",
            "image": image,
            "gpus": 1 + index % 2,
            "max_runtime_minutes": 30,
            "command": ["python", "train.py"],
            "simulate": {"run_seconds": 90 + 30 * index},
        }
        job_submit(actor=actor, project=project, data=data)
        count += 1
    return count


class Command(BaseCommand):
    help = "Run the portal on embedded defaults with a local simulated GPU cluster (make demo)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--nodes", type=int, default=2, help="simulated GPU nodes (4 GPUs each)")
        parser.add_argument("--no-cluster", action="store_true", help="portal only, no Kubernetes")
        parser.add_argument(
            "--cluster-name",
            default="gpuportal-demo",
            help="the local cluster's name (a cluster of this name is replaced, and deleted on exit)",
        )
        parser.add_argument("--no-serve", action="store_true", help="prepare and print, then exit")
        parser.add_argument(
            "--real-node",
            action="store_true",
            help="also a real node running real containers (make demo REAL_NODE=1)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        # The demo serves static files from their apps (WhiteNoise's finders); an empty STATIC_ROOT
        # keeps WhiteNoise from warning that the collected files' folder is missing.
        Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
        call_command("migrate", verbosity=0, interactive=False)
        project, passwords = seed()
        url = f"http://127.0.0.1:{options['port']}/"
        if not options["no_cluster"] and not options["no_serve"]:
            self._run_with_cluster(project, options, url, passwords)
            return
        self._print(url, passwords)
        if not options["no_serve"]:
            call_command("runserver", f"127.0.0.1:{options['port']}", use_reloader=False)

    def _run_with_cluster(
        self, project: Project, options: dict[str, Any], url: str, passwords: dict[str, str]
    ) -> None:
        from deploy.localcluster import start_cluster, stop_cluster
        from portal.demo import runtime

        self.stdout.write("starting the local Kubernetes cluster (real control plane, kwok GPU nodes) ...")
        handle = start_cluster(name=options["cluster_name"], nodes=options["nodes"])
        settings.GPUPORTAL_KUBECONFIG = str(handle.kubeconfig)
        settings.GPUPORTAL_JOB_SIMULATION = True  # demo jobs "run" for the time they ask, in kwok
        stop = threading.Event()
        # SIGTERM ends the demo like Ctrl-C, so the cluster below is always deleted.
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
        try:
            with contextlib.ExitStack() as extras, runtime.worker_thread():
                if options["real_node"]:
                    extras.enter_context(_real_node(handle, self.stdout.write))
                runtime.start_background(stop)
                self.stdout.write(f"submitted {submit_demo_jobs(project)} demo jobs into project vision-lab")
                threading.Thread(target=_sim_agents, args=(url, stop), name="sim-agents", daemon=True).start()
                self._print(url, passwords)
                kubectl = f"KUBECONFIG={handle.kubeconfig} {handle.bin_dir}/kubectl get pods -A"
                self.stdout.write(f"  see the cluster: {kubectl}\n")
                call_command("runserver", f"127.0.0.1:{options['port']}", use_reloader=False)
        finally:
            stop.set()
            stop_cluster(handle.name, handle.run_dir)

    def _print(self, url: str, passwords: dict[str, str]) -> None:
        self.stdout.write(self.style.SUCCESS(f"\nGPU portal demo at {url}"))
        for email, password in passwords.items():
            self.stdout.write(f"  sign in as {email} / {password}")
        self.stdout.write(
            "  the operator is asked to set up TOTP two-factor authentication before the admin opens,\n"
            "  then to confirm it from the link the portal mails (the demo prints mail here)."
        )


@contextlib.contextmanager
def _real_node(handle: Any, say: Any) -> Iterator[None]:
    """The real node beside the kwok ones, and a job that runs a real command there (busybox, built
    here): its log, exit code and end come from a real container. It is in a project of its own,
    real-node-lab, so vision-lab's queue never holds it back."""
    from deploy.localcluster.realnode import config as rc
    from deploy.localcluster.realnode import real_node_with_plugin
    from workloads.models import ImageRule
    from workloads.services.jobs import job_submit

    with real_node_with_plugin(handle) as node:
        settings.GPUPORTAL_REAL_NODE_PLACEMENT = True
        project, _ = Project.objects.get_or_create(slug="real-node-lab", defaults={"name": "Real node lab"})
        Quota.objects.update_or_create(project=project, defaults={"gpus": 4, "mps_slices": 0})
        researcher = User.objects.get(email=RESEARCHERS[0])
        Membership.objects.get_or_create(project=project, user=researcher, defaults={"role": Role.MANAGER})
        registry, repository = rc.BUSYBOX_SOURCE
        ImageRule.objects.get_or_create(project=project, registry=registry, repository=repository)
        script = "echo hello from a real container; for i in 1 2 3 4 5 6; do echo step $i; sleep 5; done"
        data: dict[str, Any] = {"name": "real-hello", "image": rc.BUSYBOX_IMAGE, "placement": "real-node"}
        data |= {"command": ["sh", "-c", script], "gpus": 1, "cpu_millicores": 100, "memory_mib": 64}
        job_submit(actor=researcher, project=project, data=data)
        ready = node.timings["ready_s"]
        say(f"real node {node.name} Ready in {ready} s; job real-hello (project real-node-lab) runs there")
        yield


def _sim_agents(url: str, stop: threading.Event) -> None:
    """Simulated node agents, once the controller's node watch has mirrored the nodes."""
    from gpu.models import Node
    from portal.demo.agents import start_sim_agents

    while not Node.objects.filter(deleted=False, gpu_count__gt=0).exists():
        if stop.wait(1.0):
            return
    agents = start_sim_agents(url)
    stop.wait()
    agents.stop()
