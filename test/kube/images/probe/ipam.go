package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
)

// ipamCalls are the -call flags: op:trench:conduit:node:child.
type ipamCalls []string

func (c *ipamCalls) String() string { return strings.Join(*c, ",") }

func (c *ipamCalls) Set(v string) error {
	if f := strings.Split(v, ":"); len(f) != 5 || (f[0] != "allocate" && f[0] != "release") {
		return fmt.Errorf("a call is allocate|release:<trench>:<conduit>:<node>:<child>, not %q", v)
	}
	*c = append(*c, v)
	return nil
}

// callIPAM makes calls at the IPAM at addr (IPv4) under the pod's SVID
// from the Workload API at wl, and prints, per call, "<call>: <code>
// <answer or message>".
func callIPAM(ctx context.Context, wl, addr string, calls ipamCalls) error {
	if wl == "" || len(calls) == 0 {
		return errors.New("-ipam needs -svid and at least one -call")
	}
	src, err := workloadapi.NewX509Source(ctx, workloadapi.WithClientOptions(workloadapi.WithAddr(wl)))
	if err != nil {
		return fmt.Errorf("SVID from %s: %w", wl, err)
	}
	defer src.Close()
	svid, err := src.GetX509SVID()
	if err != nil {
		return err
	}
	fmt.Printf("svid %s\n", svid.ID)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(
		credentials.NewTLS(tlsconfig.MTLSClientConfig(src, src, tlsconfig.AuthorizeAny()))))
	if err != nil {
		return err
	}
	defer cc.Close()
	client := ipamv1.NewIpamClient(cc)
	for _, call := range calls {
		f := strings.Split(call, ":")
		child := &ipamv1.Child{Name: f[4], Subnet: &ipamv1.Subnet{
			Conduit: &nspv1.Conduit{Name: f[2], Trench: &nspv1.Trench{Name: f[1]}}, Node: f[3], IpFamily: ipamv1.IPFamily_IPV4,
		}}
		answer := ""
		if f[0] == "allocate" {
			var p *ipamv1.Prefix
			if p, err = client.Allocate(ctx, child); err == nil {
				answer = fmt.Sprintf("%s/%d", p.GetAddress(), p.GetPrefixLength())
			}
		} else {
			_, err = client.Release(ctx, child)
		}
		st := status.Convert(err)
		if err != nil {
			answer = st.Message()
		}
		fmt.Printf("%s: %s %s\n", call, st.Code(), answer)
	}
	return nil
}
