# plugin targets: `proto` generates the kubelet gRPC stubs, `gpu-check` and `gpu-check-real` verify the real
# NVML path.
# The .proto sources sit under plugin/protos/plugin/_proto/ so that, with -I plugin/protos, protoc
# names them plugin/_proto/<x>.proto and the generated *_pb2_grpc.py import `from plugin._proto ...`.
PLUGIN_PROTO_SRC := $(wildcard plugin/protos/plugin/_proto/*.proto)
PLUGIN_PROTO_OUT := $(patsubst plugin/protos/%.proto,%_pb2.py,$(PLUGIN_PROTO_SRC))

proto: $(PLUGIN_PROTO_OUT)

# One rule per .proto: rebuilt only when its source (or the venv) changes, so `make proto` is a no-op
# when up to date.
plugin/_proto/%_pb2.py: plugin/protos/plugin/_proto/%.proto $(VENV)/.synced
	$(BIN)/python -m grpc_tools.protoc -I plugin/protos \
	  --plugin=protoc-gen-mypy=$(BIN)/protoc-gen-mypy --plugin=protoc-gen-mypy_grpc=$(BIN)/protoc-gen-mypy_grpc \
	  --python_out=. --grpc_python_out=. --mypy_out=. --mypy_grpc_out=. $<
	touch $@

gpu-check: venv proto
	$(BIN)/python -m plugin.checks.gpucheck

# Real CUDA work and a real MPS daemon: only on a GPU machine nobody else uses (docs/gpu-check.md).
gpu-check-real: venv proto
	$(BIN)/python -m plugin.checks.gpureal
