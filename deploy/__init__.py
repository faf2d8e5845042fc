"""Deployment: the Helm chart, the images, the cluster-setup playbooks (plain files), and the local
Kubernetes cluster the demo and the tests run (`deploy.localcluster`, the one Python package here)."""
