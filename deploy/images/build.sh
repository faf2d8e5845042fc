#!/usr/bin/env bash
# Builds the two OCI images without a Docker engine and without pulling a base image:
#   gpu-portal/portal:<version>  web, Celery worker and beat, controller, migrations (the Helm chart)
#   gpu-portal/node:<version>    device plugin (`python -m plugin`) and telemetry agent (`python -m plugin.agent`)
# Debian bookworm comes from the apt mirror (mmdebstrap), the locked Python packages from PyPI (uv,
# run inside the image's root so the venv points at the image's own /usr/bin/python3.11), and umoci
# writes the layers into an OCI layout under the cache; skopeo packs each image into an OCI archive.
# Three layers per image, each keyed on what it is made of, so only what changed is rebuilt:
#   base (shared by both)   Debian packages, the uid 10001 user       key: package list + recipe
#   deps                    /opt/gpu-portal/venv                      key: base + lock + pyproject + recipe
#   code                    /app (+ collected static files)           key: deps + git revision + file contents
# Needs root (mmdebstrap's root mode, chroot). Usage: build.sh  (env: GPUPORTAL_IMAGE_CACHE, IMAGES_REBUILD=1)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${GPUPORTAL_IMAGE_CACHE:-$HOME/.cache/gpuportal/images}
LAYOUT=$CACHE/oci
UV=$ROOT/.venv/bin/uv
PY=$ROOT/.venv/bin/python
SUITE=bookworm
MIRROR=${GPUPORTAL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${GPUPORTAL_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# Runtime only: psycopg[binary] brings its own libpq, uv needs no python3-venv, grpcio links
# libstdc++ (the library, not the compiler). No compilers:
# every Python package comes as a wheel (uv --no-build), so nothing is ever built in the image.
BASE_PACKAGES=(python3.11 libstdc++6 ca-certificates tzdata)
VENV=/opt/gpu-portal/venv
APP_UID=10001
# What the node image imports (plugin/ imports no Django); the versions come from requirements.lock.
NODE_PACKAGES=(grpcio protobuf nvidia-ml-py httpx msgspec prometheus-client)
PORTAL_PATHS=(portal gpu accounts workloads plugin manage.py)
NODE_PATHS=(plugin)
SOURCE_URL=${GPUPORTAL_IMAGE_SOURCE:-https://github.com/gpu-portal/gpu-portal}

log() { echo "[images] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
sha() { sha256sum | cut -c1-16; }
# grep reads the whole list (no -q): an early exit would kill umoci with SIGPIPE under pipefail.
has_tag() { umoci ls --layout "$LAYOUT" | grep -xF "$1" >/dev/null; }

preflight() {
  [ "$(id -u)" = 0 ] || die "needs root (mmdebstrap root mode and chroot)"
  local tool
  for tool in mmdebstrap umoci skopeo; do
    command -v "$tool" >/dev/null || die "$tool is missing: run deploy/setup/system-deps.sh"
  done
  if [ ! -x "$UV" ] || [ ! -x "$PY" ]; then die "no $ROOT/.venv: run make venv"; fi
  [ -d "$ROOT/node_modules/htmx.org/dist" ] || die "no front-end libraries: run deploy/setup/frontend.sh"
  [ -e "$ROOT/plugin/_proto/deviceplugin_pb2.py" ] || die "no gRPC stubs in plugin/_proto: run make proto"
  mkdir -p "$CACHE"
  # A layout without its index is a broken one (an interrupted init): start it again.
  if [ ! -e "$LAYOUT/index.json" ]; then rm -rf "$LAYOUT" && umoci init --layout "$LAYOUT"; fi
}

# Debian root filesystem as a tar in $1. Docs, man pages and locales stay out; merged /usr is made by
# the hook so usrmerge (and the full perl it pulls) is never installed. mmdebstrap works in its own
# temporary directory (its mounts are its own) and calls back `build.sh base-hook <root>`.
make_base() {
  mmdebstrap --quiet --variant=essential --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --include="$(IFS=,; echo "${BASE_PACKAGES[*]}")" --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --dpkgopt='path-exclude=/usr/share/bash-completion/*' \
    --customize-hook="\"$ROOT/deploy/images/build.sh\" base-hook \"\$1\"" \
    "$SUITE" "$1" "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" \
    "deb $SECURITY_MIRROR $SUITE-security main" >"$WORK/mmdebstrap.log" 2>&1 ||
    { tail -n 30 "$WORK/mmdebstrap.log" >&2; die "mmdebstrap failed"; }
}

# Inside mmdebstrap's root $1: the unprivileged user, and nothing of the build host.
base_hook() {
  local dir=$1
  echo "gpuportal:x:$APP_UID:$APP_UID:GPU portal:/home/gpuportal:/usr/sbin/nologin" >>"$dir/etc/passwd"
  echo "gpuportal:x:$APP_UID:" >>"$dir/etc/group"
  echo "gpuportal:!:1::::::" >>"$dir/etc/shadow"
  install -d -m 0750 -o "$APP_UID" -g "$APP_UID" "$dir/home/gpuportal"
  # The container runtime mounts its own.
  : >"$dir/etc/resolv.conf"
  : >"$dir/etc/hostname"
  rm -rf "$dir"/var/log/*
}

# The image's requirements: the lock's pins for what $1 needs, nothing from the dev extra.
requirements() {
  local out=$WORK/$1.txt
  if [ "$1" = portal ]; then
    "$UV" pip compile -q "$ROOT/pyproject.toml" --python-version 3.11 -c "$ROOT/requirements.lock" \
      --no-header --no-annotate -o "$out"
  else
    printf '%s\n' "${NODE_PACKAGES[@]}" >"$WORK/node.in"
    "$UV" pip compile -q "$WORK/node.in" --python-version 3.11 -c "$ROOT/requirements.lock" \
      --no-header --no-annotate -o "$out"
  fi
  # A pin the lock does not have means the compile resolved something new: refuse it.
  if grep -vxFf <(grep -E '^[a-z0-9]' "$ROOT/requirements.lock") "$out" | grep -q .; then
    die "$1 requirements drift from requirements.lock: $(grep -vxFf <(grep -E '^[a-z0-9]' "$ROOT/requirements.lock") "$out" | tr '\n' ' ')"
  fi
  echo "$out"
}

# The venv layer for image $1, as a tar in $2: uv runs chrooted in the base, against its python.
make_deps() {
  local bundle=$WORK/deps-$1 req
  req=$(requirements "$1")
  umoci unpack --image "$LAYOUT:$BASE_TAG" "$bundle" >/dev/null
  local rootfs=$bundle/rootfs
  cp "$UV" "$rootfs/tmp/uv"
  cp "$req" "$rootfs/tmp/requirements.txt"
  # The build host's CAs (an egress proxy may re-sign TLS); they stay in /tmp, outside the layer.
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/tmp/host-ca.crt"
  cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  mkdir -p "$CACHE/uv-cache"
  mv "$CACHE/uv-cache" "$rootfs/tmp/uv-cache"  # a move, not a mount: rm -rf of the bundle can never reach it
  local status=0
  chroot "$rootfs" /usr/bin/env -i PATH=/usr/bin HOME=/root SSL_CERT_FILE=/tmp/host-ca.crt \
    UV_CACHE_DIR=/tmp/uv-cache UV_NO_PROGRESS=1 sh -c \
    "/tmp/uv venv -q --python /usr/bin/python3.11 $VENV && /tmp/uv pip sync -q --python $VENV/bin/python \
       --no-build --compile-bytecode --link-mode=copy /tmp/requirements.txt" || status=$?
  mv "$rootfs/tmp/uv-cache" "$CACHE/uv-cache"
  [ "$status" = 0 ] || die "uv pip sync failed for $1"
  tar -C "$rootfs" --numeric-owner -cf "$2" "${VENV#/}"
}

# The files of $@ (paths in the repo) that go into /app: tracked and new files, not tests, plus the
# generated gRPC stubs (git-ignored, made by `make proto`).
app_files() {
  (cd "$ROOT" && {
    git ls-files -z -co --exclude-standard -- "$@"
    find plugin/_proto -name '*_pb2*.py' -print0
  } | sort -zu | while IFS= read -r -d '' f; do
    case "$f" in */tests/*) continue ;; esac
    [ -f "$f" ] && printf '%s\0' "$f"
  done)
}

# /app for image $1 as a tar in $2: the code, compiled (the user cannot write __pycache__), and for the
# portal the collected static files.
make_code() {
  local stage=$WORK/code-$1
  mkdir -p "$stage/app"
  app_files "${@:3}" | (cd "$ROOT" && tar --null -T - -cf -) | tar -C "$stage/app" -xf -
  if [ "$1" = portal ]; then collect_static "$stage/app"; fi
  "$PY" -m compileall -q --invalidation-mode checked-hash -s "$stage" -p / "$stage/app" >/dev/null
  tar -C "$stage" --owner=0 --group=0 --numeric-owner -cf "$2" app
}

# whitenoise serves STATIC_ROOT (/app/staticfiles). The settings also list node_modules as finder dirs
# (WHITENOISE_USE_FINDERS): links to the collected copies keep those paths, and the staticfiles.W004
# check of `check --deploy`, valid without shipping the 27 MB of libraries twice.
collect_static() {
  local app=$1
  ln -s "$ROOT/node_modules" "$app/node_modules"
  (cd "$app" && env -i PATH=/usr/bin:/bin HOME="$WORK" DJANGO_SETTINGS_MODULE=portal.settings \
    "$PY" manage.py collectstatic --noinput -v0)
  [ -d "$app/staticfiles/vendor/htmx" ] || die "collectstatic did not write $app/staticfiles"
  rm "$app/node_modules"
  mkdir -p "$app/node_modules/@picocss/pico" "$app/node_modules/chart.js" "$app/node_modules/htmx.org"
  ln -s ../../../staticfiles/vendor/pico "$app/node_modules/@picocss/pico/css"
  ln -s ../../staticfiles/vendor/chartjs "$app/node_modules/chart.js/dist"
  ln -s ../../staticfiles/vendor/htmx "$app/node_modules/htmx.org/dist"
}

# Image config: no entrypoint (the chart gives every command), the venv first on PATH, uid 10001.
configure() {
  local name=$1 tag=$2 env=(PATH="$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=/app HOME=/home/gpuportal LANG=C.UTF-8)
  local args=(--config.user "$APP_UID:$APP_UID" --config.workingdir /app --os linux --architecture amd64
    --author "GPU portal" --history.created_by "deploy/images/build.sh (config)")
  local e
  if [ "$name" = portal ]; then
    env+=(DJANGO_SETTINGS_MODULE=portal.settings)
    args+=(--config.exposedports 8000/tcp --config.cmd python --config.cmd -m --config.cmd uvicorn
      --config.cmd portal.asgi:application --config.cmd --host --config.cmd 0.0.0.0 --config.cmd --port
      --config.cmd 8000 --config.label "org.opencontainers.image.description=GPU portal: web, workers, controller")
  else
    args+=(--config.exposedports 9400/tcp --config.cmd python --config.cmd -m --config.cmd plugin
      --config.label "org.opencontainers.image.description=GPU portal node: device plugin and telemetry agent")
  fi
  for e in "${env[@]}"; do args+=(--config.env "$e"); done
  for e in "title=gpu-portal-$name" "version=$VERSION" "revision=$REVISION" "source=$SOURCE_URL" \
    "vendor=GPU portal"; do
    args+=(--config.label "org.opencontainers.image.$e" --manifest.annotation "org.opencontainers.image.$e")
  done
  umoci config --image "$LAYOUT:$tag" "${args[@]}"
}

# Adds layer tar $3 (made by "${@:4}" into it) on top of tag $1 as tag $2, and records its unpacked size.
add_layer() {
  local from=$1 tag=$2 tar=$WORK/$2.tar
  "${@:4}" "$tar"
  umoci raw add-layer --image "$LAYOUT:$from" --tag "$tag" --history.created_by "deploy/images/build.sh ($3)" "$tar"
  mkdir -p "$CACHE/sizes"
  stat -c %s "$tar" >"$CACHE/sizes/$tag"
  rm -f "$tar"
}

ensure_base() {
  BASE_TAG=base-$( { printf '%s\n' "$SUITE" "${BASE_PACKAGES[@]}"; declare -f make_base base_hook; } | sha)
  has_tag "$BASE_TAG" && [ -z "${IMAGES_REBUILD:-}" ] && return
  log "base: Debian $SUITE with ${BASE_PACKAGES[*]} (mmdebstrap)"
  umoci new --image "$LAYOUT:$BASE_TAG.new"
  add_layer "$BASE_TAG.new" "$BASE_TAG" base make_base
  umoci rm --image "$LAYOUT:$BASE_TAG.new"
}

# Sets DEPS_TAG and CODE_TAG for image $1 and builds what is missing; the rest of "$@" are its paths.
build_image() {
  local name=$1 inputs
  inputs=$ROOT/requirements.lock
  if [ "$name" = portal ]; then inputs+=" $ROOT/pyproject.toml"; fi
  # shellcheck disable=SC2086  # $inputs is a list of paths without spaces, split on purpose
  DEPS_TAG=$name-deps-$( { echo "$BASE_TAG" "${NODE_PACKAGES[@]}"; "$UV" --version; cat $inputs;
    declare -f make_deps requirements; } | sha)
  if ! has_tag "$DEPS_TAG" || [ -n "${IMAGES_REBUILD:-}" ]; then
    log "$name: Python packages from requirements.lock into $VENV (uv)"
    add_layer "$BASE_TAG" "$DEPS_TAG" deps make_deps_for "$name"
  fi
  CODE_TAG=$name-$( { echo "$DEPS_TAG $REVISION $VERSION"; declare -f make_code app_files collect_static configure;
    cat "$ROOT/package-lock.json"; app_files "${@:2}" | (cd "$ROOT" && xargs -0 sha256sum); } | sha)
  if ! has_tag "$CODE_TAG" || [ -n "${IMAGES_REBUILD:-}" ]; then
    log "$name: code at $REVISION into /app"
    add_layer "$DEPS_TAG" "$CODE_TAG" code make_code_for "$name" "${@:2}"
    configure "$name" "$CODE_TAG"
  fi
  KEEP+=("$DEPS_TAG" "$CODE_TAG")
  archive "$name" "$CODE_TAG"
}

# add_layer passes the tar path last; these put it where make_deps/make_code take it.
make_deps_for() { make_deps "$1" "$2"; }
make_code_for() { local tar=${*: -1}; make_code "$1" "$tar" "${@:2:$#-2}"; }

# The OCI archive an operator pushes with `skopeo copy`, redone only when the image changed.
archive() {
  local name=$1 tag=$2 out=$CACHE/$1-$VERSION.tar
  if [ "$(cat "$out.key" 2>/dev/null)" != "$tag" ] || [ ! -e "$out" ]; then
    skopeo copy --quiet "oci:$LAYOUT:$tag" "oci-archive:$out.new:gpu-portal/$name:$VERSION"
    mv "$out.new" "$out"
    echo "$tag" >"$out.key"
  fi
  local packed unpacked=0 t
  packed=$(stat -c %s "$out")
  for t in "$BASE_TAG" "$DEPS_TAG" "$tag"; do unpacked=$((unpacked + $(cat "$CACHE/sizes/$t"))); done
  printf 'gpu-portal/%s:%s  %d MB packed, %d MB unpacked  %s (layout %s, tag %s)\n' "$name" "$VERSION" \
    $((packed / 1000000)) $((unpacked / 1000000)) "$out" "$LAYOUT" "$tag"
  MANIFEST+=("\"$name\": {\"layout\": \"$LAYOUT\", \"tag\": \"$tag\", \"archive\": \"$out\", \"ref\": \"gpu-portal/$name:$VERSION\", \"revision\": \"$REVISION\", \"packed_bytes\": $packed, \"unpacked_bytes\": $unpacked}")
}

# Old keys' tags and their blobs go; what this run uses stays.
prune() {
  local tag
  umoci ls --layout "$LAYOUT" | while read -r tag; do
    printf '%s\n' "${KEEP[@]}" | grep -qxF "$tag" || umoci rm --image "$LAYOUT:$tag"
  done
  umoci gc --layout "$LAYOUT"
}

main() {
  preflight
  exec 9>"$CACHE/.lock"
  flock 9  # two builds at once would race on the layout's index
  WORK=$(mktemp -d "$CACHE/work.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
  VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/pyproject.toml" | head -n1)
  REVISION=$(git -C "$ROOT" rev-parse HEAD)
  # Uncommitted changes under the image's paths: the revision alone does not name the content.
  if [ -n "$(git -C "$ROOT" status --porcelain -- "${PORTAL_PATHS[@]}")" ]; then REVISION+=-dirty; fi
  KEEP=() MANIFEST=()
  ensure_base
  KEEP+=("$BASE_TAG")
  build_image portal "${PORTAL_PATHS[@]}"
  build_image node "${NODE_PATHS[@]}"
  prune
  (IFS=,; echo "{${MANIFEST[*]}}") >"$CACHE/images.json"
}

case "${1:-}" in
  base-hook) base_hook "$2" ;;
  "") main ;;
  *) die "usage: build.sh" ;;
esac
