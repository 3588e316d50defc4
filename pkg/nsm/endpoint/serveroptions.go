package endpoint

import "google.golang.org/grpc"

// leanServerOptions keep an idle gRPC connection small. An NSMgr opens one
// connection to the endpoint per NSM connection it forwards (a proxy with
// 500 targets serves 500), and gRPC gives each server transport a 32 KiB
// read buffer and a 32 KiB write buffer for its whole life: 60 % of the
// proxy's live heap at 500 targets. The endpoint's traffic is a Request or
// a monitor event now and then, so the framer reads the socket directly and
// a write buffer is taken from a shared pool only while a frame is written.
// The HPACK table the NSMgr may fill for its headers is 0 bytes instead of
// 4 KiB (its few headers then go uncompressed). They come first: the
// caller's ServerOptions may override them.
func leanServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ReadBufferSize(0),
		grpc.SharedWriteBuffer(true),
		grpc.HeaderTableSize(0),
	}
}
