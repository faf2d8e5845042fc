# Local Kubernetes control plane: upstream binaries built from the Go module proxy, GPU nodes
# simulated by kwok (deploy/localcluster/README.md). Included by the top Makefile, which declares
# these targets phony.
CLUSTER_NAME ?= gpuportal
CLUSTER_NODES ?= 2

# Idempotent: seconds when ~/.cache/gpuportal/k8s-...-kwok-.../bin is complete.
cluster-build:
	@bash deploy/localcluster/build.sh >/dev/null

# The last line printed is the kubeconfig path: KUBECONFIG=$$(make -s cluster-up | tail -1)
cluster-up: venv cluster-build
	@$(BIN)/python -m portal.localcluster --name $(CLUSTER_NAME) up --nodes $(CLUSTER_NODES)

cluster-down: venv
	@$(BIN)/python -m portal.localcluster --name $(CLUSTER_NAME) down
