"""Checks of the node daemon on a machine with real NVIDIA GPUs (docs/gpu-check.md): `gpucheck` is safe
on a shared machine, `gpureal` runs real CUDA work and a real MPS daemon."""
