#!/usr/bin/env bash
# Builds the images the real node runs, with no registry and no Docker engine, as docker archives that
# `ctr images import` loads (pods use them with imagePullPolicy: Never):
#   gpuportal.local/pause:1     the pod sandbox, pause.go built static
#   gpuportal.local/busybox:1   Debian's static busybox (sh, echo, sleep, cat, env...; nslookup,
#                               httpd, nc for the network tests) for test jobs. Its nc cannot look
#                               a name up (static glibc cannot load NSS) and its wget crashes:
#                               tests pass nc addresses from nslookup, which has its own resolver
#   gpuportal.local/coredns:1   the cluster DNS (deploy/localcluster/build.sh builds it, static)
# Cached in $GPUPORTAL_CACHE/realnode-images/<key of this script, pause.go and CoreDNS>; prints that folder.
# Seconds when cached. Needs go, umoci, skopeo (deploy/setup/system-deps.sh) and apt's package lists.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${GPUPORTAL_CACHE:-$HOME/.cache/gpuportal}/realnode-images
# The Kubernetes binaries' folder (build.sh prints it; seconds when they are built).
KUBE_BIN=$(bash "$HERE/../build.sh" 2>/dev/null | tail -n1)
if [ ! -x "$KUBE_BIN/coredns" ]; then
  echo "realnode-images: no CoreDNS in '$KUBE_BIN': run 'make cluster-build' first" >&2
  exit 2
fi
KEY=$(cat "$0" "$HERE/pause.go" "$KUBE_BIN/coredns" | sha256sum | cut -c1-16)
OUT=$CACHE/$KEY
BUSYBOX_APPLETS=(sh echo sleep cat env ls true false printf nslookup httpd nc hostname mkdir sed tail)
if [ -f "$OUT/done" ]; then echo "$OUT"; exit 0; fi
if [ -n "${GPUPORTAL_NETNS:-}" ]; then
  echo "realnode-images: not built yet, and nothing routes out of the run's namespace: run" \
    "'make realnode-images' (or this script) outside it first" >&2
  exit 2
fi
log() { echo "[realnode-images] $*" >&2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

build_pause() {
  mkdir -p "$WORK/pause-src" "$WORK/pause-root"
  cp "$HERE/pause.go" "$WORK/pause-src/"
  (cd "$WORK/pause-src" && go mod init local.invalid/pause >/dev/null 2>&1 &&
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$WORK/pause-root/pause" .)
}

build_busybox_root() {
  local root=$WORK/busybox-root applet
  (cd "$WORK" && apt-get download -qq busybox-static >/dev/null 2>&1) ||
    { apt-get update -qq && (cd "$WORK" && apt-get download -qq busybox-static); }
  dpkg-deb -x "$WORK"/busybox-static_*.deb "$WORK/deb"
  mkdir -p "$root/bin" "$root/tmp"
  install -m 0755 "$WORK/deb/bin/busybox" "$root/bin/busybox"
  for applet in "${BUSYBOX_APPLETS[@]}"; do
    ln -s busybox "$root/bin/$applet"
  done
}

# $1 name, $2 root folder, $3... entrypoint
make_image() {
  local name=$1 root=$2 layout=$WORK/oci
  shift 2
  umoci new --image "$layout:$name"
  umoci insert --image "$layout:$name" "$root" /
  local args=() arg
  for arg in "$@"; do args+=(--config.entrypoint "$arg"); done
  umoci config --image "$layout:$name" --os linux --architecture amd64 --config.env PATH=/bin "${args[@]}"
  skopeo copy -q "oci:$layout:$name" "docker-archive:$OUT.tmp/$name.tar:gpuportal.local/$name:1"
}

log "building the pause, busybox and CoreDNS images into $OUT"
rm -rf "$OUT.tmp" && mkdir -p "$OUT.tmp"
build_pause
build_busybox_root
umoci init --layout "$WORK/oci"
make_image pause "$WORK/pause-root" /pause
make_image busybox "$WORK/busybox-root" /bin/sh
mkdir -p "$WORK/coredns-root"
install -m 0755 "$KUBE_BIN/coredns" "$WORK/coredns-root/coredns"
make_image coredns "$WORK/coredns-root" /coredns
touch "$OUT.tmp/done"
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
echo "$OUT"
