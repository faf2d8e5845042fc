"""Generated gRPC/protobuf code (`make proto`); never hand-edit. Sources: plugin/protos/plugin/_proto/."""
