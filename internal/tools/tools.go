//go:build tools

// Package tools pins, in go.mod, the code generators that `make generate`
// runs and the dependencies DESIGN.md chose before the code that uses them
// lands. It is never built.
package tools

import (
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/google/nftables"
	_ "github.com/kelseyhightower/envconfig"
	_ "github.com/mdlayher/arp"
	_ "github.com/mdlayher/ndp"
	_ "github.com/networkservicemesh/api/pkg/api/networkservice"
	_ "github.com/networkservicemesh/sdk-kernel/pkg/kernel/networkservice/connectioncontextkernel"
	_ "github.com/networkservicemesh/sdk/pkg/networkservice/chains/endpoint"
	_ "github.com/networkservicemesh/sdk/pkg/tools/sandbox"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/spiffe/go-spiffe/v2/workloadapi"
	_ "github.com/stretchr/testify/require"
	_ "github.com/ti-mo/conntrack"
	_ "github.com/vishvananda/netlink"
	_ "go.etcd.io/bbolt"
	_ "go.uber.org/goleak"
	_ "google.golang.org/grpc/cmd/protoc-gen-go-grpc"
	_ "google.golang.org/protobuf/cmd/protoc-gen-go"
	_ "gopkg.in/yaml.v3"
)
