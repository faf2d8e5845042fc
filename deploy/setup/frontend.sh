#!/usr/bin/env bash
# Front-end libraries (htmx, Pico CSS, Chart.js; axe-core for the accessibility tests) from the npm
# registry, never copied into the repo.
# `make demo` and `make test` both need them: without them every page renders without CSS or JS.
set -euo pipefail
if ! command -v npm >/dev/null; then
  echo "[frontend] installing npm from Debian" >&2
  [ "$(id -u)" = 0 ] || { echo "[frontend] ERROR: need root to apt-get install npm" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends npm >/dev/null
fi
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "[frontend] npm ci" >&2
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi
