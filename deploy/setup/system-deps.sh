#!/usr/bin/env bash
# Installs the Debian packages the tests need (Postgres, Redis, Chromium, npm, and mmdebstrap, umoci,
# skopeo, crun for `make images`, shellcheck for tests/cluster_setup, and for the real node of
# tests/realnode containerd, runc, the CNI plugins, iptables (kube-proxy) and ipset (kube-router)),
# only when something is missing, so a warm run costs nothing; then the front-end packages (frontend.sh).
set -euo pipefail
need=()
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
[ -n "$PG_BIN" ] && [ -x "$PG_BIN/initdb" ] || need+=(postgresql)
command -v redis-server >/dev/null || need+=(redis-server)
command -v chromium >/dev/null || need+=(chromium)
command -v npm >/dev/null || need+=(npm)
for tool in mmdebstrap umoci skopeo crun shellcheck containerd runc iptables ipset; do command -v "$tool" >/dev/null || need+=("$tool"); done
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
if [ ${#need[@]} -gt 0 ]; then
  echo "[system-deps] installing ${need[*]} from Debian" >&2
  [ "$(id -u)" = 0 ] || { echo "[system-deps] ERROR: need root to apt-get install ${need[*]}" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
bash "$(dirname "$0")/frontend.sh"
