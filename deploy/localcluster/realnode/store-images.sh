#!/usr/bin/env bash
# Builds the stand-ins for the chart's bundled data stores, which default to Docker Hub's official
# images (a real cluster pulls those; nothing here can), from Debian's packages with the tooling of
# deploy/images/build.sh (mmdebstrap, umoci, skopeo), as docker archives `ctr images import` loads:
#   gpuportal.local/postgres:15   postgresql-15 and an entrypoint that does what the official image's
#                                 does with POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB and PGDATA;
#                                 stopped with SIGINT like it (a fast shutdown: SIGTERM waits for
#                                 every client to leave, and the kubelet's grace ends in SIGKILL)
#   gpuportal.local/redis:7       redis-server (the chart gives its command)
# Both run as uid 999, as the official images and the chart's pod security context do. Beside them:
#   gpuportal.local/train:1       Debian's python3-torch (a CPU build: PyPI's wheels pull the CUDA
#                                 libraries) with torchrun, and Open MPI with python3-mpi4py, the SSH
#                                 client and server and nss_wrapper (a passwd entry for the project's
#                                 UID), for the real node's jobs of several workers
# Cached in $GPUPORTAL_CACHE/realnode-images/stores-<key of the two scripts>; prints that folder.
# Needs root (mmdebstrap's root mode). The chart's real-node test loads the stores, the workers' test
# the training image.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${GPUPORTAL_CACHE:-$HOME/.cache/gpuportal}/realnode-images
OUT=$CACHE/stores-$(cat "$0" "$HERE/postgres-entrypoint.sh" | sha256sum | cut -c1-16)
SUITE=bookworm
MIRROR=${GPUPORTAL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${GPUPORTAL_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
STORE_UID=999
if [ -f "$OUT/done" ]; then echo "$OUT"; exit 0; fi
if [ -n "${GPUPORTAL_NETNS:-}" ]; then
  echo "store-images: not built yet, and nothing routes out of the run's namespace: run" \
    "'make realnode-images' (or this script) outside it first" >&2
  exit 2
fi
log() { echo "[store-images] $*" >&2; }

# Inside mmdebstrap's root $1, after the packages: the store's user $2 takes uid 999 (initdb refuses
# to run as a uid without a name; "-": none), and the cluster Debian's postinst made goes (PGDATA
# holds ours).
store_hook() {
  local dir=$1 user=$2
  if [ "$user" != - ]; then
    sed -i "s/^$user:x:[0-9]*:[0-9]*:/$user:x:$STORE_UID:$STORE_UID:/" "$dir/etc/passwd"
    sed -i "s/^$user:x:[0-9]*:/$user:x:$STORE_UID:/" "$dir/etc/group"
  fi
  rm -rf "$dir/etc/postgresql/"* "$dir/var/lib/postgresql/"* "$dir"/var/log/* "$dir/etc/redis/"*
  rm -f "$dir"/etc/ssh/ssh_host_*  # a job's workers use the job's own key as their host key
  : >"$dir/etc/resolv.conf"
  : >"$dir/etc/hostname"
}

# The root filesystem of $1 (postgres, redis) with Debian packages $3..., as a tar in $2.
make_root() {
  local name=$1 tar=$2 user
  shift 2
  case $name in postgres | redis) user=$name ;; *) user=- ;; esac
  mmdebstrap --quiet --variant=essential --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --include="$(IFS=,; echo "$*")" --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook="\"$HERE/store-images.sh\" store-hook \"\$1\" $user" \
    "$SUITE" "$tar" "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" \
    "deb $SECURITY_MIRROR $SUITE-security main" >"$WORK/$name.log" 2>&1 ||
    { tail -n 30 "$WORK/$name.log" >&2; log "mmdebstrap failed for $name"; exit 1; }
}

# $1 name, $2 tag, $3 root tar, then umoci config arguments.
make_image() {
  local name=$1 tag=$2 tar=$3 layout=$WORK/oci
  shift 3
  umoci new --image "$layout:$name"
  umoci raw add-layer --image "$layout:$name" "$tar"
  umoci config --image "$layout:$name" --os linux --architecture amd64 \
    --config.user "$STORE_UID:$STORE_UID" "$@"
  skopeo copy -q "oci:$layout:$name" "docker-archive:$OUT.tmp/$name.tar:gpuportal.local/$name:$tag"
}

main() {
  [ "$(id -u)" = 0 ] || { log "needs root (mmdebstrap's root mode)"; exit 1; }
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  log "building the Postgres and Redis stand-ins into $OUT"
  rm -rf "$OUT.tmp" && mkdir -p "$OUT.tmp"
  umoci init --layout "$WORK/oci"
  make_root postgres "$WORK/postgres.tar" postgresql-15
  # Appended to mmdebstrap's (uncompressed) tar: one layer.
  mkdir -p "$WORK/entry/usr/local/bin"
  install -m 0755 "$HERE/postgres-entrypoint.sh" "$WORK/entry/usr/local/bin/postgres-entrypoint"
  tar -C "$WORK/entry" --owner=0 --group=0 --numeric-owner -rf "$WORK/postgres.tar" usr/local/bin/postgres-entrypoint
  make_image postgres 15 "$WORK/postgres.tar" \
    --config.env PATH=/usr/lib/postgresql/15/bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.env LANG=C.UTF-8 --config.env PGDATA=/var/lib/postgresql/data \
    --config.entrypoint /usr/local/bin/postgres-entrypoint --config.cmd postgres --config.stopsignal SIGINT \
    --config.exposedports 5432/tcp
  make_root redis "$WORK/redis.tar" redis-server
  make_image redis 7 "$WORK/redis.tar" --config.env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    --config.cmd redis-server --config.exposedports 6379/tcp
  make_root train "$WORK/train.tar" python3-torch python3-mpi4py openmpi-bin openssh-client \
    openssh-server libnss-wrapper
  make_image train 1 "$WORK/train.tar" --config.env PATH=/usr/bin:/bin --config.env HOME=/tmp \
    --config.env LANG=C.UTF-8
  touch "$OUT.tmp/done"
  rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
  echo "$OUT"
}

case "${1:-}" in
  store-hook) store_hook "$2" "$3" ;;
  "") main ;;
  *) log "usage: store-images.sh"; exit 2 ;;
esac
