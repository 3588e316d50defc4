package authorize_test

import (
	"context"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	sdkauthorize "github.com/networkservicemesh/sdk/pkg/networkservice/common/authorize"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/count"
	"google.golang.org/grpc/peer"

	"github.com/causeway-net/causeway/pkg/nsm/sdkreplacement/authorize"
)

// BenchmarkServerRequest: the decision on one Request with a signed path of
// three segments, by this package and (baseline, same run) by the SDK's
// authorize server evaluating its Rego policies with OPA.
func BenchmarkServerRequest(b *testing.B) {
	w := newIDs(b)
	hour := time.Now().Add(time.Hour)
	p := path(2, w.nsc.token(b, w.nsmgr.id, hour), w.nsmgr.token(b, w.nse.id, hour), w.nse.token(b, w.nsmgr.id, hour))
	ctx := peer.NewContext(context.Background(), tlsPeer(w.nsmgr.cert))
	for _, impl := range []struct {
		name   string
		server networkservice.NetworkServiceServer
	}{
		{"causeway", authorize.NewServer()},
		{"baseline-sdk-opa", sdkauthorize.NewServer()},
	} {
		b.Run(impl.name, func(b *testing.B) {
			c := chain.NewNetworkServiceServer(impl.server, &count.Server{})
			req := &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: "c", Path: p}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Request(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
