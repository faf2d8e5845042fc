# Local Kubernetes control plane: upstream binaries built from the Go module proxy, GPU nodes
# simulated by kwok (deploy/localcluster/README.md). Included by the top Makefile, which declares
# these targets phony.
CLUSTER_NAME ?= gpuportal
CLUSTER_NODES ?= 2

# Idempotent: seconds when ~/.cache/gpuportal/k8s-...-kwok-.../bin is complete.
cluster-build:
	@bash deploy/localcluster/build.sh >/dev/null

# The last line printed is the kubeconfig path: KUBECONFIG=$$(make -s cluster-up | tail -1).
# REAL_NODE=1: the cluster and a real node (kubelet, containerd, the device plugin on simulated GPUs)
# inside the run's own network namespace, held in the foreground until Ctrl-C, which stops both and
# leaves the host as found; `python -m deploy.localcluster.netns exec -- CMD` runs kubectl beside it.
cluster-up: venv cluster-build $(if $(REAL_NODE),realnode-images)
	@$(if $(REAL_NODE),$(BIN)/python -m deploy.localcluster.netns run --) \
	  $(BIN)/python -m deploy.localcluster --name $(CLUSTER_NAME) up --nodes $(CLUSTER_NODES) $(if $(REAL_NODE),--real-node)

cluster-down: venv
	@$(BIN)/python -m deploy.localcluster --name $(CLUSTER_NAME) down
