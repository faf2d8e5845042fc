#!/bin/sh
# The portal's launcher for MPI and DeepSpeed in a job of several workers, mounted into each worker
# beside the job's key pair and hostfile. Worker 0 waits until every other worker's SSH server takes
# the job's key, runs the command it is given (mpirun ..., deepspeed ...), tells the others to stop
# and exits with the command's status; every other worker serves SSH until told.
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
run=${TMPDIR:-/tmp}/gpuportal-mpi
port=2222
mkdir -p "$run"

# ssh and sshd look the user up by UID: an image without an entry for the project's UID gets one
# through nss_wrapper, where the image has it.
if ! getent passwd "$(id -u)" >/dev/null 2>&1; then
  for lib in /usr/lib/*/libnss_wrapper.so /usr/lib64/libnss_wrapper.so /usr/lib/libnss_wrapper.so; do
    [ -e "$lib" ] || continue
    printf 'job:x:%s:%s:portal job:%s:/bin/sh\n' "$(id -u)" "$(id -g)" "${HOME:-/tmp}" >"$run/passwd"
    printf 'job:x:%s:\n' "$(id -g)" >"$run/group"
    export LD_PRELOAD="$lib" NSS_WRAPPER_PASSWD="$run/passwd" NSS_WRAPPER_GROUP="$run/group"
    break
  done
fi

# Every worker's host key is the job's key: the client trusts that key and no other.
printf '* %s\n' "$(cat "$dir/id_ed25519.pub")" >"$run/known_hosts"
cat >"$run/ssh_config" <<CONFIG
Host *
  Port $port
  IdentityFile $dir/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $run/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 5
  LogLevel ERROR
CONFIG

serve() {
  # A server of the pod's own user (no root, no privilege separation) that takes the job's key
  # only. A session gets the launcher's search path and user lookup.
  cat >"$run/sshd_config" <<CONFIG
Port $port
HostKey $dir/id_ed25519
AuthorizedKeysFile $dir/id_ed25519.pub
PidFile $run/sshd.pid
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
X11Forwarding no
AllowTcpForwarding no
AllowAgentForwarding no
SetEnv PATH=$PATH${LD_PRELOAD:+ LD_PRELOAD=$LD_PRELOAD NSS_WRAPPER_PASSWD=$NSS_WRAPPER_PASSWD NSS_WRAPPER_GROUP=$NSS_WRAPPER_GROUP}${LD_LIBRARY_PATH:+ LD_LIBRARY_PATH=$LD_LIBRARY_PATH}
CONFIG
  sshd=$(command -v sshd || echo /usr/sbin/sshd)
  "$sshd" -D -e -f "$run/sshd_config" &
  pid=$!
  trap 'kill "$pid" 2>/dev/null; exit 143' TERM INT
  while [ ! -e "$run/done" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      status=0
      wait "$pid" || status=$?
      echo "gpuportal-mpi: the SSH server stopped (status $status) before worker 0 was done" >&2
      exit 1
    fi
    sleep 1
  done
  kill "$pid" 2>/dev/null || true
  exit 0
}

if [ "${RANK:-0}" != 0 ]; then
  serve
fi

if [ "$#" = 0 ]; then
  echo "usage: $0 COMMAND [ARGUMENT...]  (worker 0 runs it, e.g. mpirun -np 8 python3 train.py)" >&2
  exit 2
fi
hosts=$(sed -n '2,$s/ .*//p' "$dir/hostfile")
for host in $hosts; do
  waited=0
  until ssh -F "$run/ssh_config" "$host" true 2>/dev/null; do
    waited=$((waited + 2))
    if [ "$waited" -ge 300 ]; then
      echo "gpuportal-mpi: $host took no SSH connection in 300 s" >&2
      ssh -F "$run/ssh_config" "$host" true || true
      exit 1
    fi
    sleep 2
  done
done

export OMPI_MCA_orte_default_hostfile="$dir/hostfile"
export OMPI_MCA_plm_rsh_agent=ssh
export OMPI_MCA_plm_rsh_args="-F $run/ssh_config"
# A worker's name is `<job>-<index>.<job>` (the job's Service): Open MPI would cut it at the dot.
export OMPI_MCA_orte_keep_fqdn_hostnames=1
# Cross-memory attach needs ptrace, which a restricted pod does not have.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export PDSH_SSH_ARGS_APPEND="-F $run/ssh_config"
status=0
"$@" || status=$?
for host in $hosts; do
  ssh -F "$run/ssh_config" "$host" "touch '$run/done'" || true
done
exit "$status"
