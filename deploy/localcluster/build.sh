#!/usr/bin/env bash
# Builds the local Kubernetes control plane from the Go module proxy into a versioned cache outside
# the repo (deploy/localcluster/README.md). Idempotent: with the cache present it exits in seconds.
set -euo pipefail

KV="${K8S_VERSION:-1.36.3}"            # Kubernetes
SV="0.${KV#1.}"                         # its staging modules: v1.36.3 -> v0.36.3
MINOR="$(echo "$KV" | cut -d. -f2)"
ETCD="${ETCD_VERSION:-3.6.8}"
KWOK="${KWOK_VERSION:-0.8.0}"
HELM="${HELM_VERSION:-3.22.0}"           # helm, for the chart (deploy/helm/gpu-portal)
COREDNS="${COREDNS_VERSION:-1.15.0}"     # the real node's cluster DNS
KUBE_ROUTER="${KUBE_ROUTER_VERSION:-2.1.0}"  # the real node's NetworkPolicy enforcer (its firewall alone)
PROMETHEUS="${PROMETHEUS_VERSION:-0.316.0}"  # promtool (Prometheus 3.16), checks the chart's alert rules
CACHE_ROOT="${GPUPORTAL_CACHE:-$HOME/.cache/gpuportal}"
K8S_CACHE="$CACHE_ROOT/k8s-$KV-etcd-$ETCD-kwok-$KWOK"
BIN="$K8S_CACHE/bin"
BUILD="$K8S_CACHE/build"

say() { printf '[cluster-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# Keep a long cold build from looking hung: print a heartbeat while a step runs.
run_step() {
  local what="$1"; shift
  say "$what ..."
  local start=$SECONDS
  "$@" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 30
    kill -0 "$pid" 2>/dev/null && say "  still $what ($((SECONDS - start)) s)"
  done
  wait "$pid" || die "$what failed (see the output above)"
  say "$what done in $((SECONDS - start)) s"
}

missing() {
  local b
  for b in kube-apiserver kube-controller-manager kube-scheduler etcd kwok kwokctl kubectl kubeadm kubelet kube-proxy coredns kube-router helm promtool; do
    [ -x "$BIN/$b" ] || printf '%s ' "$b"
  done
}

# A stamp, not `helm version`: it also records the link-time Kubernetes version below.
HELM_STAMP="$HELM-k8s1.37"
helm_ok() {
  [ -x "$BIN/helm" ] && [ "$(cat "$BIN/.helm-stamp" 2>/dev/null)" = "$HELM_STAMP" ]
}

coredns_ok() {
  [ -x "$BIN/coredns" ] && [ "$(cat "$BIN/.coredns-stamp" 2>/dev/null)" = "$COREDNS" ]
}

kube_router_ok() {
  [ -x "$BIN/kube-router" ] && [ "$(cat "$BIN/.kube-router-stamp" 2>/dev/null)" = "$KUBE_ROUTER" ]
}

promtool_ok() {
  [ -x "$BIN/promtool" ] && [ "$(cat "$BIN/.promtool-stamp" 2>/dev/null)" = "$PROMETHEUS" ]
}

have_all() {
  [ -z "$(missing)" ] && helm_ok && coredns_ok && kube_router_ok && promtool_ok \
    && "$BIN/kube-apiserver" --version 2>/dev/null | grep -q "Kubernetes v$KV"
}

if have_all; then
  say "cached: $BIN"
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null || die "go is not installed (need Go >= 1.26 on PATH)"
mkdir -p "$BIN" "$BUILD"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

build_kwok() {
  GOBIN="$BIN" go install "sigs.k8s.io/kwok/cmd/kwok@v$KWOK" "sigs.k8s.io/kwok/cmd/kwokctl@v$KWOK"
}

consumer_module() {
  cd "$BUILD"
  [ -f go.mod ] || go mod init local.invalid/k8sbins >/dev/null
  go mod edit -go=1.26.0 -godebug=default=go1.26
  local gomod
  gomod="$(go mod download -json "k8s.io/kubernetes@v$KV" | python3 -c 'import sys,json;print(json.load(sys.stdin)["GoMod"])')"
  [ -f "$gomod" ] || die "k8s.io/kubernetes@v$KV is not served by the module proxy"
  # One replace line per staging module, generated from the upstream go.mod.
  local m
  for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) => \./staging/.*#\1#p' "$gomod"); do
    go mod edit "-replace=$m=$m@v$SV"
  done
  cat > tools.go <<GO
//go:build tools

package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
)
GO
  go get "k8s.io/kubernetes@v$KV" "go.etcd.io/etcd/server/v3@v$ETCD"
  go mod tidy
  go list -m go.etcd.io/etcd/client/v3 >&2
}

k8s_ldflags() {
  local ldf="-s -w" kv
  for kv in "gitVersion=v$KV" gitMajor=1 "gitMinor=$MINOR" gitTreeState=clean "buildDate=$(date -u +%FT%TZ)"; do
    ldf="$ldf -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
  done
  printf '%s' "$ldf"
}

build_k8s() {
  cd "$BUILD"
  go build -p 2 -trimpath -tags selinux,notest,grpcnotrace -ldflags "$(k8s_ldflags)" -o "$BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kubeadm \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy
}

# Added after the others, so a cache holding everything else builds only these (seconds to a minute):
# kubeadm (deploy/cluster renders kubeadm configs; tests/cluster_setup runs `kubeadm config validate`)
# and the kubelet and kube-proxy of the optional real node (deploy/localcluster/README.md).
LATE=(kubeadm kubelet kube-proxy)
build_late() {
  cd "$BUILD"
  local b pkgs=()
  for b in "${LATE[@]}"; do
    grep -q "cmd/$b\"" tools.go || sed "s#^)\$#\t_ \"k8s.io/kubernetes/cmd/$b\"\n)#" tools.go > tools.go.new
    [ -f tools.go.new ] && mv tools.go.new tools.go
    [ -x "$BIN/$b" ] || pkgs+=("k8s.io/kubernetes/cmd/$b")
  done
  go mod tidy
  go build -p 2 -trimpath -tags selinux,notest,grpcnotrace -ldflags "$(k8s_ldflags)" -o "$BIN/" "${pkgs[@]}"
}

only_late_missing() {
  local b
  for b in $(missing); do [[ " ${LATE[*]} " == *" $b "* ]] || return 1; done
  [ -n "$(missing)" ]
}

# Its own module graph (helm pins its own client-go), so `go install` rather than the consumer module.
# The Kubernetes version helm assumes offline (`helm template`, lint) is set at link time, as
# helm's own Makefile does from its client-go (v0.37 -> 1.37); unset, it would be 1.20.
build_helm() {
  local ldf="-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM" pkg
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldf="$ldf -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=37"
  done
  GOBIN="$BIN" go install -trimpath -ldflags "$ldf" "helm.sh/helm/v3/cmd/helm@v$HELM"
  echo "$HELM_STAMP" > "$BIN/.helm-stamp"
}

# Its own module graph too; every plugin of its default build is compiled in.
build_coredns() {
  GOBIN="$BIN" go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@v$COREDNS"
  echo "$COREDNS" > "$BIN/.coredns-stamp"
}

# kube-network-policies, the usual choice, hands new connections to user space with nftables'
# `queue`, which this kernel lacks (CONFIG_NFT_QUEUE); kube-router's firewall needs only iptables and
# ipset. 104 s here.
build_kube_router() {
  GOBIN="$BIN" go install -trimpath -ldflags "-s -w" \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@v$KUBE_ROUTER"
  echo "$KUBE_ROUTER" > "$BIN/.kube-router-stamp"
}

# Its own module graph too (Prometheus pins its own client-go).
build_promtool() {
  GOBIN="$BIN" go install -trimpath -ldflags "-s -w" "github.com/prometheus/prometheus/cmd/promtool@v$PROMETHEUS"
  echo "$PROMETHEUS" > "$BIN/.promtool-stamp"
}

build_etcd() {
  cd "$BUILD"
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
}

[ -x "$BIN/kwokctl" ] && [ -x "$BIN/kwok" ] || run_step "building kwok v$KWOK" build_kwok
helm_ok || run_step "building helm v$HELM" build_helm
coredns_ok || run_step "building CoreDNS v$COREDNS" build_coredns
kube_router_ok || run_step "building kube-router v$KUBE_ROUTER" build_kube_router
promtool_ok || run_step "building promtool v$PROMETHEUS" build_promtool
if only_late_missing && [ -f "$BUILD/go.mod" ] \
  && "$BIN/kube-apiserver" --version 2>/dev/null | grep -q "Kubernetes v$KV"; then
  run_step "building $(missing)v$KV" build_late
fi
if [ -x "$BIN/kube-apiserver" ] && have_all; then
  say "built into $BIN"
  echo "$BIN"
  exit 0
fi
run_step "preparing the consumer module for Kubernetes v$KV" consumer_module
[ -x "$BIN/etcd" ] || run_step "building etcd v$ETCD" build_etcd
run_step "building kube-apiserver, controller-manager, scheduler, kubectl v$KV (cold: ~20-40 min on 2 cores)" build_k8s
have_all || die "build finished but $BIN is incomplete: missing $(missing)(or kube-apiserver is not v$KV)"
say "built into $BIN"
echo "$BIN"
