#!/usr/bin/env bash
# Starts (or stops) a throwaway Postgres and Redis on loopback for the tests, under .run/ in the repo.
# `source services.sh env` only exports the URLs; `services.sh up|down` manages the servers.
RUN_DIR="${GPUPORTAL_RUN_DIR:-$(pwd)/.run}"
PG_PORT="${GPUPORTAL_PG_PORT:-54329}"
REDIS_PORT="${GPUPORTAL_REDIS_PORT:-63799}"
export DATABASE_URL="${DATABASE_URL:-postgres://portal:portal@127.0.0.1:$PG_PORT/portal}"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:$REDIS_PORT/0}"
export GPUPORTAL_REDIS_PORT="$REDIS_PORT" GPUPORTAL_PG_PORT="$PG_PORT" GPUPORTAL_RUN_DIR="$RUN_DIR"
[ "${1:-}" = env ] && return 0 2>/dev/null

set -euo pipefail
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
# Postgres runs as the `postgres` user, which may not traverse the checkout's parents (e.g. under
# /root), so its directory lives in /var/tmp, one per port.
PG_DIR="${GPUPORTAL_PG_DIR:-/var/tmp/gpuportal-pg-$PG_PORT}"
PG_DATA="$PG_DIR/data"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

pg_up() {
  mkdir -p "$PG_DIR"
  [ "$(id -u)" = 0 ] && chown postgres: "$PG_DIR"
  if [ ! -f "$PG_DATA/PG_VERSION" ]; then
    as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust -E UTF8 >/dev/null
  fi
  if ! as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; then
    # fsync off: a throwaway test database trades durability for speed.
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_DIR/log" -w start \
      -o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" >/dev/null
  fi
  local psql=("$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -qtA)
  "${psql[@]}" -c "select 1 from pg_roles where rolname='portal'" | grep -q 1 ||
    "${psql[@]}" -c "create role portal login superuser password 'portal'"
  "${psql[@]}" -c "select 1 from pg_database where datname='portal'" | grep -q 1 ||
    "${psql[@]}" -c "create database portal owner portal"
  echo "[services] postgres on 127.0.0.1:$PG_PORT" >&2
}

redis_up() {
  mkdir -p "$RUN_DIR/redis"
  if ! redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --daemonize yes --save "" --appendonly no \
      --dir "$RUN_DIR/redis" --pidfile "$RUN_DIR/redis/redis.pid" --logfile "$RUN_DIR/redis/log"
    for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  fi
  echo "[services] redis on 127.0.0.1:$REDIS_PORT" >&2
}

down() {
  [ -f "$PG_DATA/PG_VERSION" ] && as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast stop >/dev/null 2>&1 || true
  redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
}

case "${1:-up}" in
  up) pg_up; redis_up ;;
  down) down ;;
  *) echo "usage: services.sh up|down|env" >&2; exit 2 ;;
esac
