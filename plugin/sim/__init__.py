"""Simulated node hardware and a test kubelet: NVML, the MPS control daemon, and a kubelet that speaks
the real device-plugin gRPC API. The tests, the demo and the benchmarks run the node daemon against
these where no GPU (or no kubelet that can be driven into a fault on demand) exists."""
