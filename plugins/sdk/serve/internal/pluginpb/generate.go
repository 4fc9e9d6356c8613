// Package pluginpb holds the protobuf messages and gRPC services of the
// broker–plugin protocol, generated from plugin.proto. Only
// plugins/sdk/serve uses it; regenerate with `go generate` (needs protoc,
// protoc-gen-go and protoc-gen-go-grpc; CI does not).
package pluginpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative plugin.proto
