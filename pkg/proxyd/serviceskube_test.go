package proxyd_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/proxy"
	"github.com/causeway-net/causeway/pkg/proxyd"
	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/kubesource"
	"github.com/causeway-net/causeway/pkg/servicelb/kubesource/clientset"
	"github.com/causeway-net/causeway/pkg/servicelb/kubesource/kubefake"
	"github.com/causeway-net/causeway/pkg/servicelb/nftlb"
	"github.com/causeway-net/causeway/pkg/servicelb/userspace"
)

// kubeProxyName is the proxy name the test's configuration derives:
// <conduit>.<trench>.<namespace>.
const kubeProxyName = conduit + "." + trench + ".ns"

// kubeService is a Service of the conduit in namespace shop: TCP port
// "http" 80 to 8080, selecting app=<name>.
func kubeService(name string, ips ...string) *corev1.Service {
	var fams []corev1.IPFamily
	for _, ip := range ips {
		fam := corev1.IPv4Protocol
		if netip.MustParseAddr(ip).Is6() {
			fam = corev1.IPv6Protocol
		}
		fams = append(fams, fam)
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{kubesource.ProxyNameLabel: kubeProxyName}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ips[0], ClusterIPs: ips, IPFamilies: fams,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}},
	}
}

// kubePod is a pod of namespace shop on the proxy's node.
func kubePod(name, app string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

// remoteSlice is the slice another node's proxy published for web: its
// target is behind that node's proxy, never an endpoint of this one.
func remoteSlice() *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-nodeb-v4", Labels: map[string]string{
			kubesource.ServiceNameLabel: "web", kubesource.ManagedByLabel: kubesource.ManagedBy,
			kubesource.ProxyNameLabel: kubeProxyName, kubesource.NodeLabel: "node-b"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(8080))}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"172.16.9.9"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
}

// ownSlice returns this node's slice of web for IPv4, or nil.
func ownSlice(t *testing.T, cs *fake.Clientset) *discoveryv1.EndpointSlice {
	t.Helper()
	s, err := cs.DiscoveryV1().EndpointSlices("shop").Get(context.Background(), kubesource.SliceName("web", node, corev1.IPv4Protocol), metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return s
}

// TestDaemonKubeServices runs the daemon with the Kubernetes source on a
// fake clientset and each provider in a namespace of its own:
// the Services reach the provider as they are added, changed and deleted;
// a target connected with its pod's name is published in an EndpointSlice
// (ready as its pod), read back as an endpoint, withdrawn when its pod is
// not ready and deleted when it leaves; another node's slice is never an
// endpoint; an API outage keeps the rules.
func TestDaemonKubeServices(t *testing.T) {
	for _, provider := range []string{servicelb.ProviderNftables, servicelb.ProviderUserspace} {
		t.Run(provider, func(t *testing.T) { testDaemonKubeServices(t, provider) })
	}
}

func testDaemonKubeServices(t *testing.T, provider string) {
	ns := testutil.NewNetNS(t, "pkube")
	e := newEnv(t)
	cfg := e.config(t, 20*time.Second)
	cfg.ServiceProvider = provider
	cfg.ServicesSource = proxyd.ServicesFromKubernetes
	cfg.ServicePrefixes = "10.96.0.0/24, fd00:96::/112"
	cfg.MetricsAddress = freeAddr(t)
	require.NoError(t, cfg.Validate())
	cs := fake.NewClientset(kubeService("web", "10.96.0.10", "fd00:96::10"), kubePod("target-1", "web", true), remoteSlice())
	api := kubefake.NewFlaky(cs)
	e.start(t, cfg, proxyd.WithServiceNetNS(ns.Handle), proxyd.WithKubeClient(clientset.New(cs)))
	ctx := e.ctx
	endpoints := func(port string) []netip.AddrPort { // sorted (the userspace balancer's order is its own)
		p, _ := servicePort(debugState(t, cfg.DebugSocket), port)
		slices.SortFunc(p.Endpoints, netip.AddrPort.Compare)
		return p.Endpoints
	}
	require.Eventually(t, func() bool {
		_, ok := servicePort(debugState(t, cfg.DebugSocket), "shop/web:http")
		return ok
	}, wait, tick, "the Service")
	require.Empty(t, endpoints("shop/web:http"), "the other node's target is not an endpoint")
	_, ok := servicePort(debugState(t, cfg.DebugSocket), "shop/web/IPv6:http")
	require.True(t, ok, "the Service's IPv6 part")
	serves := func(ip string) bool {
		// A provider writes its table after its model (in -debug) has the
		// endpoints: a missing table or map is "not yet".
		args := []string{"nft", "list", "table", "inet", userspace.TableName}
		if provider == servicelb.ProviderNftables {
			args = []string{"nft", "list", "map", "inet", nftlb.TableName, "dispatch4"}
		}
		out, err := ns.Exec(args...)
		return err == nil && strings.Contains(out, ip)
	}
	st := debugState(t, cfg.DebugSocket)
	require.Equal(t, "[10.96.0.0/24 fd00:96::/112]", sprint(st.Services.Prefixes))
	require.Equal(t, kubeProxyName, st.Services.Kubernetes.ProxyName)

	// A target of pod shop/target-1 connects: its slice, then its endpoint.
	nsc := e.targetClient()
	rctx, rcancel := context.WithTimeout(ctx, 2*wait)
	defer rcancel()
	req := targetRequest("target-1", nil)
	req.Connection.Labels[proxy.PodNameLabel] = "target-1"
	conn, err := nsc.Request(rctx, req)
	require.NoError(t, err)
	var routes []string
	for _, r := range conn.GetContext().GetIpContext().GetSrcRoutes() {
		routes = append(routes, r.GetPrefix()+" via "+r.GetNextHop())
	}
	require.Equal(t, []string{"10.96.0.0/24 via 172.16.0.1", "fd00:96::/112 via fd00::1"}, routes)
	target4 := netip.MustParsePrefix(conn.GetContext().GetIpContext().GetSrcIpAddrs()[0]).Addr()
	local := []netip.AddrPort{netip.AddrPortFrom(target4, 8080)}
	require.Eventually(t, func() bool { return slices.Equal(endpoints("shop/web:http"), local) }, wait, tick,
		"the target is an endpoint, the other node's still not")
	require.Eventually(t, func() bool { return serves("10.96.0.10") }, wait, tick, "in the kernel")
	s := ownSlice(t, cs)
	require.NotNil(t, s)
	require.Len(t, s.Endpoints, 1)
	require.Equal(t, []string{target4.String()}, s.Endpoints[0].Addresses)
	require.Equal(t, "target-1", s.Endpoints[0].TargetRef.Name)
	require.True(t, *s.Endpoints[0].Conditions.Ready)
	require.NotEmpty(t, s.Annotations[kubesource.TriggerTimeAnnotation])
	k := debugState(t, cfg.DebugSocket).Services.Kubernetes
	require.Equal(t, 2, k.Published.Slices, "one slice per family")
	require.Empty(t, k.Published.LastError)
	require.Empty(t, k.Pods.Unmatched)
	require.Eventually(t, func() bool {
		return metric(t, cfg.MetricsAddress, "kubeproxy_network_programming_duration_seconds_count") >= 1
	},
		wait, tick, "the target's slice, read back, programmed")
	t.Logf("FIGURE: proxy with the kubernetes source and the %s provider: network programming of a target's connection (its slice written, read back, synced): %.1f ms on average over %v changes",
		provider, 1000*metric(t, cfg.MetricsAddress, "kubeproxy_network_programming_duration_seconds_sum")/metric(t, cfg.MetricsAddress, "kubeproxy_network_programming_duration_seconds_count"),
		metric(t, cfg.MetricsAddress, "kubeproxy_network_programming_duration_seconds_count"))
	require.Positive(t, metric(t, cfg.MetricsAddress, "kubeproxy_sync_proxy_rules_duration_seconds_count"), "syncs counted")
	require.Positive(t, metric(t, cfg.MetricsAddress, "kubeproxy_sync_proxy_rules_last_timestamp_seconds"))

	// The pod turns not ready: so does its endpoint, which stops serving.
	pods := cs.CoreV1().Pods("shop")
	_, err = pods.UpdateStatus(ctx, kubePod("target-1", "web", false), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(endpoints("shop/web:http")) == 0 }, wait, tick)
	require.False(t, *ownSlice(t, cs).Endpoints[0].Conditions.Ready)
	_, err = pods.UpdateStatus(ctx, kubePod("target-1", "web", true), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return slices.Equal(endpoints("shop/web:http"), local) }, wait, tick)

	// Services added, changed, deleted.
	svcs := cs.CoreV1().Services("shop")
	_, err = svcs.Create(ctx, kubeService("api", "10.96.0.20"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return serves("10.96.0.20") }, wait, tick)
	changed := kubeService("api", "10.96.0.20")
	changed.Spec.Ports[0].Port = 8000
	_, err = svcs.Update(ctx, changed, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, _ := servicePort(debugState(t, cfg.DebugSocket), "shop/api:http")
		return p.Addr.Port() == 8000
	}, wait, tick)
	require.NoError(t, svcs.Delete(ctx, "api", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, ok := servicePort(debugState(t, cfg.DebugSocket), "shop/api:http")
		return !ok
	}, wait, tick)

	// The API server goes away: one outage, the rules stay.
	api.GoDown()
	require.Eventually(t, func() bool {
		st = debugState(t, cfg.DebugSocket)
		return st.Services.Kubernetes.Source.APIServerAway && st.Services.Kubernetes.Pods.APIServerAway
	}, wait, tick, "the services' and the pods' informers tell the outage")
	require.Equal(t, uint64(1), st.Services.Kubernetes.Source.Outages)
	require.Equal(t, 1.0, metric(t, cfg.MetricsAddress, "causeway_proxy_services_api_away"))
	require.Equal(t, 1.0, metric(t, cfg.MetricsAddress, "causeway_proxy_services_api_outages_total"))
	require.Equal(t, local, endpoints("shop/web:http"))
	require.True(t, serves("10.96.0.10"), "the rules stay")
	api.SetDown(false)
	require.Eventually(t, func() bool { return !debugState(t, cfg.DebugSocket).Services.Kubernetes.Source.APIServerAway }, wait, tick)

	// The target leaves: its slice goes, and its endpoint.
	_, err = nsc.Close(rctx, conn)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return ownSlice(t, cs) == nil }, wait, tick, "the slice withdrawn")
	require.Eventually(t, func() bool { return debugState(t, cfg.DebugSocket).Services.Kubernetes.Published.Slices == 0 }, wait, tick)
	require.Eventually(t, func() bool { return len(endpoints("shop/web:http")) == 0 }, wait, tick)
}

// freeAddr is a loopback address with a port free at the time.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// metric reads one unlabelled sample from the daemon's /metrics (-1 when
// absent).
func metric(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	return -1
}
