#!/usr/bin/env bash
# Installs the Debian packages the tests and the demo need (Postgres, Redis, Chromium, Node for the
# front-end packages), only when something is missing, so a warm run costs nothing.
set -euo pipefail
need=()
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
[ -n "$PG_BIN" ] && [ -x "$PG_BIN/initdb" ] || need+=(postgresql)
command -v redis-server >/dev/null || need+=(redis-server)
command -v chromium >/dev/null || need+=(chromium)
command -v npm >/dev/null || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
  echo "[system-deps] installing ${need[*]} from Debian" >&2
  [ "$(id -u)" = 0 ] || { echo "[system-deps] ERROR: need root to apt-get install ${need[*]}" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Front-end libraries come from the npm registry (never copied into the repo).
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "[system-deps] npm ci" >&2
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi
