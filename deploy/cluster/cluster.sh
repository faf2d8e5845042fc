#!/usr/bin/env bash
# Bare-metal cluster setup from one site file (docs/cluster-setup.md).
#   cluster.sh SITE.yaml check                 validate the site file only (names each bad field)
#   cluster.sh SITE.yaml preflight             report what is wrong on each host; changes nothing
#   cluster.sh SITE.yaml site [ARGS]           everything: prepare, packages, init, joins, CNI, GPU, NFS, portal
#   cluster.sh SITE.yaml STEP [ARGS]           one step: prepare kube-packages control-plane join cni gpu storage portal
#   cluster.sh SITE.yaml add-node NAME         prepare and join one node newly added to the site file
#   cluster.sh SITE.yaml remove-node NAME      drain, delete and reset one node
#   cluster.sh SITE.yaml upgrade               kubeadm/kubelet to the site file's kubernetes.version (one minor up)
# ARGS go to ansible-playbook (e.g. --check --diff, --limit). The site file is validated and rendered
# (inventory, kubeadm configurations, portal values) into .run/cluster/<name>/ before Ansible starts.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
[ $# -ge 2 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
site=$1 step=$2
shift 2
"$PY" "$HERE/sitefile.py" check "$site"
[ "$step" = check ] && exit 0
name=$("$PY" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["cluster"]["name"])' "$site")
out=$ROOT/.run/cluster/$name
"$PY" "$HERE/sitefile.py" render "$site" "$out" >/dev/null
export ANSIBLE_CONFIG=$HERE/automation/ansible.cfg PATH="$ROOT/.venv/bin:$PATH"
args=()
case $step in
  add-node)
    [ $# -ge 1 ] || { echo "add-node NAME" >&2; exit 2; }
    args=(--limit "$1,first_control_plane,localhost"); shift ;;
  remove-node)
    [ $# -ge 1 ] || { echo "remove-node NAME" >&2; exit 2; }
    args=(-e "node=$1"); shift ;;
esac
playbook=$HERE/automation/playbooks/$step.yml
[ -f "$playbook" ] || { echo "no step $step (see $0)" >&2; exit 2; }
cd "$HERE/automation"
exec ansible-playbook -i "$out/inventory.yml" "${args[@]}" "$@" "$playbook"
