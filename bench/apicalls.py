"""What a benchmark asked of the kube-apiserver: its own request counter (`apiserver_request_total`
on /metrics) by verb and resource, read before and after, so the work per job is counted, not
guessed. Long-running WATCH requests count once per stream opened."""

from __future__ import annotations

from collections import Counter

from kubernetes.client import ApiClient
from prometheus_client.parser import text_string_to_metric_families

from deploy.localcluster import kube

Calls = Counter[tuple[str, str]]


def snapshot(api: ApiClient) -> Calls:
    calls: Calls = Counter()
    text = kube.call(api, "GET", "/metrics").decode()
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request":  # the parser drops the counter's _total
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                key = (sample.labels.get("verb", ""), sample.labels.get("resource", ""))
                calls[key] += int(sample.value)
    return calls


def per_job(before: Calls, after: Calls, jobs: int) -> str:
    """'POST pods 1.00, GET jobs 2.31, ...' per job, the largest first (at least 0.05 per job)."""
    spent = after - before
    shown = [
        (f"{verb} {resource}", n / jobs) for (verb, resource), n in spent.most_common() if n / jobs >= 0.05
    ]
    total = sum(spent.values()) / jobs
    return f"{total:.1f} requests per job: " + ", ".join(f"{name} {n:.2f}" for name, n in shown)
