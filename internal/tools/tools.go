//go:build tools

// Package tools pins, in go.mod, the code generators that `make generate`
// runs (`make tools` installs them from the module cache). It is never
// built.
package tools

import (
	_ "google.golang.org/grpc/cmd/protoc-gen-go-grpc"
	_ "google.golang.org/protobuf/cmd/protoc-gen-go"
)
