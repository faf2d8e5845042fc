"""Node side of the GPU portal: kubelet device plugin (`python -m plugin`) and NVML telemetry agent
(`python -m plugin.agent`). Never imports Django (import-linter contract)."""

VERSION = "0.1.0"
