"""Project volumes in the cluster: the namespace reconcile makes (or, for an existing claim, reads)
each volume's PersistentVolumeClaim and writes what it saw back to the row for the admin.

Runs inside the namespace reconcile (`cluster_sync.namespace_sync`), so with a separate provisioner
the claims are written by the same identity as the namespace's other objects. Claims are never
deleted here or anywhere else in the portal: a volume removed in the admin keeps its data.
"""

from __future__ import annotations

from django.utils import timezone

from accounts.models import Project
from workloads.k8s.claims import ClaimStatus, api_message
from workloads.k8s.client import KubeClient
from workloads.k8s.errors import K8sError, K8sTransientError
from workloads.k8s.reconcilers.claim import ClaimReconciler
from workloads.models import ProjectVolume
from workloads.selectors import project_claims


def volumes_sync(*, project: Project, client: KubeClient) -> list[ClaimStatus]:
    """Converge every volume of the project; transient API errors propagate (the task retries)."""
    out = []
    for volume in project_claims(project=project).values():
        status = _converge(volume, project, client)
        ProjectVolume.objects.filter(pk=volume.pk).update(
            phase=status.phase[:20], status_message=status.message[:300], synced_at=timezone.now()
        )
        out.append(status)
    return out


def _converge(volume: ProjectVolume, project: Project, client: KubeClient) -> ClaimStatus:
    volume.project = project  # the builder labels the claim with the slug: no query per volume
    try:
        return ClaimReconciler(volume, client, namespace=project.namespace).converge()
    except K8sTransientError:
        raise
    except K8sError as exc:  # refused for good (invalid, forbidden by a quota): shown, not retried
        return ClaimStatus("Error", api_message(exc.message))
