#!/usr/bin/env bash
# The OpenID Connect provider the sign-in tests run (tests/oidc/provider, mockoidc from the Go module
# proxy), built once into the cache and rebuilt only when its source changes. Prints the binary's path.
set -euo pipefail
cd "$(dirname "$0")/../.."
src=tests/oidc/provider
cache="${GPUPORTAL_CACHE:-$HOME/.cache/gpuportal}/oidc-provider"
stamp=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-16)
bin="$cache/$stamp/oidc-provider"
if [ ! -x "$bin" ]; then
  echo "[oidc-provider] building $src (Go module proxy)" >&2
  mkdir -p "$cache/$stamp"
  (cd "$src" && go build -trimpath -o "$bin.tmp" .)
  mv "$bin.tmp" "$bin"
fi
echo "$bin"
