#!/usr/bin/env bash
# The real-GPU checks in one run, for a lent GPU machine (docs/gpu-check.md): `make gpu-check` (safe on a
# shared machine), then plugin.checks.gpureal (real CUDA work and a real MPS daemon) and the agent's CPU
# benchmark (`python -m bench B5`) on the real NVML. Wheels in .whl/ (if any) go to /tmp/site first: such
# a machine reaches no registry.
set -uo pipefail
cd "$(dirname "$0")/../.."
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl || exit 2
  export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1
nvidia-smi -L && nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv
command -v nvidia-cuda-mps-control unshare || true
rc=0
timeout 120 python3 -m plugin.checks.gpucheck || rc=1
timeout 300 python3 -m plugin.checks.gpureal || rc=1
GPUPORTAL_B5_BACKEND=real timeout 150 python3 -m bench B5 || rc=1
echo "gpu-machine: rc=$rc"
exit "$rc"
