"""Every write of the workloads app, one module per concern:

- `jobs`: submit, rerun, cancel, templates (and who may do them);
- `transitions`: the job state machine's one write path (compare-and-swap);
- `queue`: the admission cycle's moves and the operators' queue actions;
- `grants`: temporary quota grants;
- `cluster_sync`: reconcile jobs and namespaces, record what the cluster reported;
- `nodes`: cordon flags and the GPU sharing ConfigMap;
- `notifications`: email to job owners;
- `broadcast`: job updates pushed to the live pages;
- `publisher`: the one sender of Celery tasks (by name, after commit) and the outbox.
"""
