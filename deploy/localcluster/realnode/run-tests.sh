#!/usr/bin/env bash
# Runs tests/realnode inside the run's own network namespace (deploy/localcluster/netns.py), with its
# own Postgres and Redis there: the host's loopback servers are not reachable from inside, and these
# must not share their data directories. `make test` calls it as
#   python -m deploy.localcluster.netns run -- bash deploy/localcluster/realnode/run-tests.sh [PYTEST ARGS]
set -euo pipefail
[ -n "${GPUPORTAL_NETNS:-}" ] || { echo "run-tests.sh: run me through python -m deploy.localcluster.netns run --" >&2; exit 2; }
export GPUPORTAL_PG_PORT=54339 GPUPORTAL_REDIS_PORT=63809
export GPUPORTAL_PG_DIR=/var/tmp/gpuportal-pg-realnode GPUPORTAL_RUN_DIR="$PWD/.run/realnode"
unset DATABASE_URL REDIS_URL GPUPORTAL_KUBECONFIG
# shellcheck source=../../setup/services.sh
source deploy/setup/services.sh env
bash deploy/setup/services.sh up
trap 'bash deploy/setup/services.sh down' EXIT
.venv/bin/python -m pytest tests/realnode "$@"
