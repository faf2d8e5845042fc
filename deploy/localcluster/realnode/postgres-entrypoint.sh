#!/bin/sh
# What the official postgres image's entrypoint does for the chart: on an empty PGDATA, a cluster
# owned by POSTGRES_USER with POSTGRES_PASSWORD (scram-sha-256 over TCP, from any address; trust on
# the pod's own socket), then POSTGRES_DB; then the command (postgres), as pid 1's replacement.
set -eu
: "${PGDATA:?PGDATA is not set}"
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is not set}"
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
socket=/var/run/postgresql
# On every start, as the official image does: the kubelet gives a volume the pod's fsGroup, group
# bits included, at each mount, and postgres refuses a data directory others can read.
mkdir -p "$PGDATA"
chmod 0700 "$PGDATA"
if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  echo "unix_socket_directories = '$socket'" >>"$PGDATA/postgresql.conf"
  if [ "$db" != postgres ]; then
    # Local socket only while the database is made: no client reaches a half-made server.
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    psql -v ON_ERROR_STOP=1 -h "$socket" -U "$user" -d postgres -q -c "CREATE DATABASE \"$db\""
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  fi
  echo "postgres-entrypoint: initialised $PGDATA for $user, database $db"
fi
exec "$@"
