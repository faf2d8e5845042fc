"""The NVML telemetry agent (`python -m plugin.agent`): ~1 Hz samples per GPU to the portal and /metrics."""
