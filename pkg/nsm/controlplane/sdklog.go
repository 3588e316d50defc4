package controlplane

import (
	"io"

	"github.com/sirupsen/logrus"
)

// QuietSDKLogs silences the NSM SDK's logrus output without lowering its
// level.
//
// Lowering the logrus level to Warn or below is NOT an option: at those
// levels the SDK's trace wrapper (sdk/pkg/networkservice/core/trace) calls
// the next element without its grpc.CallOptions, which silently drops the
// per-RPC credentials that sendfd/recvfd hang their file descriptors on:
// every kernel-mechanism Request then times out in recvfd.
func QuietSDKLogs() {
	logrus.SetOutput(io.Discard)
	if logrus.GetLevel() < logrus.InfoLevel {
		logrus.SetLevel(logrus.InfoLevel)
	}
}
