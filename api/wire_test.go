// Package api_test proves that the generated API stays wire-compatible with
// Meridio's ipam.v1 and nsp.v1: every message is encoded and compared with
// bytes built field by field from Meridio's field numbers and types, so a
// renumbered or retyped field fails, and every full gRPC method name is
// checked.
package api_test

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
)

// wire builds an expected encoding, one field at a time, in field order.
type wire []byte

func (w wire) str(num protowire.Number, s string) wire {
	w = protowire.AppendTag(w, num, protowire.BytesType)
	return protowire.AppendString(w, s)
}

func (w wire) msg(num protowire.Number, m wire) wire {
	w = protowire.AppendTag(w, num, protowire.BytesType)
	return protowire.AppendBytes(w, m)
}

func (w wire) varint(num protowire.Number, v uint64) wire {
	w = protowire.AppendTag(w, num, protowire.VarintType)
	return protowire.AppendVarint(w, v)
}

func trenchWire(name string) wire { return wire(nil).str(1, name) }

func vipWire(name, addr, trench string) wire {
	return wire(nil).str(1, name).str(2, addr).msg(3, trenchWire(trench))
}

func TestMessagesMatchContract(t *testing.T) {
	trench := &nspv1.Trench{Name: "trench-a"}
	vip := &nspv1.Vip{Name: "vip1", Address: "20.0.0.1/32", Trench: trench}
	portNat := &nspv1.Conduit_PortNat{Port: 80, TargetPort: 8080, Vips: []*nspv1.Vip{vip}, Protocol: "TCP"}
	conduit := &nspv1.Conduit{Name: "load-balancer", Trench: trench, DestinationPortNats: []*nspv1.Conduit_PortNat{portNat}}
	subnet := &ipamv1.Subnet{Conduit: conduit, Node: "worker-1", IpFamily: ipamv1.IPFamily_IPV6}

	portNatW := wire(nil).varint(1, 80).varint(2, 8080).msg(3, vipWire("vip1", "20.0.0.1/32", "trench-a")).str(4, "TCP")
	conduitW := wire(nil).str(1, "load-balancer").msg(2, trenchWire("trench-a")).msg(3, portNatW)
	subnetW := wire(nil).msg(1, conduitW).str(2, "worker-1").varint(3, 1)

	cases := []struct {
		name string
		msg  proto.Message
		want wire
	}{
		{"nsp.v1.Trench", trench, trenchWire("trench-a")},
		{"nsp.v1.Vip", vip, vipWire("vip1", "20.0.0.1/32", "trench-a")},
		{"nsp.v1.Conduit.PortNat", portNat, portNatW},
		{"nsp.v1.Conduit", conduit, conduitW},
		{"nsp.v1.VipResponse", &nspv1.VipResponse{Vips: []*nspv1.Vip{vip, vip}},
			wire(nil).msg(1, vipWire("vip1", "20.0.0.1/32", "trench-a")).msg(1, vipWire("vip1", "20.0.0.1/32", "trench-a"))},
		{"nsp.v1.ConduitResponse", &nspv1.ConduitResponse{Conduits: []*nspv1.Conduit{conduit}}, wire(nil).msg(1, conduitW)},
		{"ipam.v1.Prefix", &ipamv1.Prefix{Address: "172.16.0.1", PrefixLength: 24},
			wire(nil).str(1, "172.16.0.1").varint(2, 24)},
		{"ipam.v1.Prefix negative length", &ipamv1.Prefix{Address: "x", PrefixLength: -1},
			// int32 is encoded as a sign-extended 64-bit varint, unlike sint32.
			wire(nil).str(1, "x").varint(2, uint64(0xffffffffffffffff))},
		{"ipam.v1.Subnet", subnet, subnetW},
		{"ipam.v1.Subnet IPV4 omitted", &ipamv1.Subnet{Node: "n", IpFamily: ipamv1.IPFamily_IPV4}, wire(nil).str(2, "n")},
		{"ipam.v1.Child", &ipamv1.Child{Name: "bridge", Subnet: subnet}, wire(nil).str(1, "bridge").msg(2, subnetW)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := proto.MarshalOptions{Deterministic: true}.Marshal(tc.msg)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("encoding differs from the contract\n got: %x\nwant: %x", got, []byte(tc.want))
			}
			// And the contract's bytes decode back into an equal message.
			back := tc.msg.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(tc.want, back); err != nil {
				t.Fatalf("unmarshal contract bytes: %v", err)
			}
			if !proto.Equal(back, tc.msg) {
				t.Fatalf("contract bytes decode to %v, want %v", back, tc.msg)
			}
		})
	}
}

func TestEnumValues(t *testing.T) {
	if ipamv1.IPFamily_IPV4 != 0 || ipamv1.IPFamily_IPV6 != 1 {
		t.Fatalf("IPFamily values changed: IPV4=%d IPV6=%d", ipamv1.IPFamily_IPV4, ipamv1.IPFamily_IPV6)
	}
	if got := ipamv1.IPFamily_IPV6.String(); got != "IPV6" {
		t.Fatalf("IPV6 name = %q", got)
	}
}

func TestFullNames(t *testing.T) {
	names := map[string]proto.Message{
		"nsp.v1.Trench":          &nspv1.Trench{},
		"nsp.v1.Conduit":         &nspv1.Conduit{},
		"nsp.v1.Conduit.PortNat": &nspv1.Conduit_PortNat{},
		"nsp.v1.Vip":             &nspv1.Vip{},
		"nsp.v1.VipResponse":     &nspv1.VipResponse{},
		"nsp.v1.ConduitResponse": &nspv1.ConduitResponse{},
		"ipam.v1.Prefix":         &ipamv1.Prefix{},
		"ipam.v1.Subnet":         &ipamv1.Subnet{},
		"ipam.v1.Child":          &ipamv1.Child{},
	}
	for want, m := range names {
		if got := string(m.ProtoReflect().Descriptor().FullName()); got != want {
			t.Errorf("message full name = %q, want %q", got, want)
		}
	}
	if got := ipamv1.IPFamily_IPV4.Descriptor().FullName(); got != "ipam.v1.IPFamily" {
		t.Errorf("enum full name = %q", got)
	}
}

func TestMethodNames(t *testing.T) {
	want := map[string]bool{
		"/ipam.v1.Ipam/Allocate":                    true,
		"/ipam.v1.Ipam/Release":                     true,
		"/nsp.v1.ConfigurationManager/WatchVip":     true,
		"/nsp.v1.ConfigurationManager/WatchConduit": true,
	}
	got := map[string]bool{
		ipamv1.Ipam_Allocate_FullMethodName:                    true,
		ipamv1.Ipam_Release_FullMethodName:                     true,
		nspv1.ConfigurationManager_WatchVip_FullMethodName:     true,
		nspv1.ConfigurationManager_WatchConduit_FullMethodName: true,
	}
	for m := range want {
		if !got[m] {
			t.Errorf("missing method %s; generated: %v", m, got)
		}
	}
	// The service descriptors name the same services and methods, with
	// the streaming shape of the contract.
	if ipamv1.Ipam_ServiceDesc.ServiceName != "ipam.v1.Ipam" || len(ipamv1.Ipam_ServiceDesc.Methods) != 2 {
		t.Errorf("Ipam service desc: %s with %d unary methods", ipamv1.Ipam_ServiceDesc.ServiceName, len(ipamv1.Ipam_ServiceDesc.Methods))
	}
	cm := nspv1.ConfigurationManager_ServiceDesc
	if cm.ServiceName != "nsp.v1.ConfigurationManager" || len(cm.Streams) != 2 {
		t.Fatalf("ConfigurationManager desc: %s with %d streams", cm.ServiceName, len(cm.Streams))
	}
	for _, s := range cm.Streams {
		if !s.ServerStreams || s.ClientStreams {
			t.Errorf("%s must be server-streaming only", s.StreamName)
		}
	}
}

func TestMethodSignatures(t *testing.T) {
	type sig struct{ in, out string }
	want := map[string]sig{
		"ipam.v1.Ipam.Allocate":                    {"ipam.v1.Child", "ipam.v1.Prefix"},
		"ipam.v1.Ipam.Release":                     {"ipam.v1.Child", "google.protobuf.Empty"},
		"nsp.v1.ConfigurationManager.WatchVip":     {"nsp.v1.Vip", "nsp.v1.VipResponse"},
		"nsp.v1.ConfigurationManager.WatchConduit": {"nsp.v1.Conduit", "nsp.v1.ConduitResponse"},
	}
	files := []protoreflect.FileDescriptor{ipamv1.File_api_ipam_v1_ipam_proto, nspv1.File_api_nsp_v1_configurationmanager_proto}
	seen := 0
	for _, f := range files {
		for i := 0; i < f.Services().Len(); i++ {
			svc := f.Services().Get(i)
			for j := 0; j < svc.Methods().Len(); j++ {
				m := svc.Methods().Get(j)
				w, ok := want[string(m.FullName())]
				if !ok {
					t.Errorf("unexpected method %s", m.FullName())
					continue
				}
				seen++
				if string(m.Input().FullName()) != w.in || string(m.Output().FullName()) != w.out {
					t.Errorf("%s: %s -> %s, want %s -> %s", m.FullName(), m.Input().FullName(), m.Output().FullName(), w.in, w.out)
				}
			}
		}
	}
	if seen != len(want) {
		t.Errorf("saw %d of %d methods", seen, len(want))
	}
}
