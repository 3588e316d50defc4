package targetstub

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/api/pkg/api/networkservice/payload"

	"github.com/networkservicemesh/sdk/pkg/networkservice/common/clientinfo"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/retry"

	"github.com/causeway-net/causeway/pkg/lab/targetaddrs"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
)

// DefaultInterfaceName is the target's NSM interface unless configured.
const DefaultInterfaceName = "nsm-0"

// Config describes one target stub.
type Config struct {
	// Name identifies the target: echo replies, publication file, NSM names.
	Name string
	// NSMgrURL is the NSMgr to request through.
	NSMgrURL *url.URL
	// Service is the proxy's network service, proxy.<conduit>.<trench>.<ns>.
	Service string
	// Labels go on the request (e.g. nodeName, which the proxy's service
	// matches on).
	Labels map[string]string
	// VIPs are carried as source addresses with a policy route via the gateway.
	VIPs []netip.Addr
	// Port is the TCP and UDP echo port on every VIP.
	Port int
	// ServicePort, when set, is a TCP and UDP echo port on every address
	// of the target (the target as an endpoint of the proxy's service load
	// balancer); 0: none.
	ServicePort int
	// PublishDir is where the target publishes its address (see targetaddrs);
	// empty disables publishing.
	PublishDir string
	// Publish, when set, is the board the target publishes on instead of
	// PublishDir (targetaddrs.Pods in a cluster).
	Publish targetaddrs.Board `json:"-"`
	// InterfaceName of the NSM interface (default DefaultInterfaceName).
	InterfaceName string
	// NetNSPath, when set, is the target's namespace for a stub run in-process
	// for another namespace (default: the process's namespace).
	NetNSPath string
	// RequestTimeout bounds each try of a Request (default 15s); tries repeat
	// until Start's context ends.
	RequestTimeout time.Duration
	// TokenLifetime of the target's NSM tokens (default
	// controlplane.DefaultTokenLifetime): its connection refreshes at a third of it.
	TokenLifetime time.Duration
	// SPIFFE, when set, are the client's credentials instead of the lab's
	// (a target stub run as a pod of a cluster whose NSM is secure).
	SPIFFE *credentials.Credentials
	// PodLabels puts the names of the process's pod, node and cluster
	// (POD_NAME, NODE_NAME, CLUSTER_NAME, from the downward API) on the
	// connection's labels, with NSM's clientinfo element in the target's own
	// chain: the proxy's Kubernetes source matches a target to its pod by
	// them. Labels already set (Labels) are kept.
	PodLabels bool
}

// Target is a running target stub.
type Target struct {
	cfg    Config
	cancel context.CancelFunc
	client networkservice.NetworkServiceClient
	echo   *echoServer

	mu   sync.Mutex
	conn *networkservice.Connection
	once sync.Once
}

// Start opens the echo service, connects to the proxy's service and, once
// the proxy has answered with its gateways, re-requests with the VIPs and
// their policy routes. It returns when the connection carries the VIPs or
// fails when ctx ends first. The connection lives (refresh, heal) until Stop.
func Start(ctx context.Context, cfg Config) (_ *Target, err error) {
	if cfg.Name == "" || cfg.NSMgrURL == nil || cfg.Service == "" {
		return nil, fmt.Errorf("target stub: name, NSMgr URL and service are required")
	}
	if cfg.InterfaceName == "" {
		cfg.InterfaceName = DefaultInterfaceName
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 15 * time.Second
	}
	if cfg.Publish == nil && cfg.PublishDir != "" {
		cfg.Publish = targetaddrs.Dir(cfg.PublishDir)
	}
	t := &Target{cfg: cfg}
	var listen []netip.AddrPort
	if cfg.Port != 0 {
		for _, vip := range cfg.VIPs {
			listen = append(listen, netip.AddrPortFrom(vip, uint16(cfg.Port)))
		}
	}
	if cfg.ServicePort != 0 {
		listen = append(listen, netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(cfg.ServicePort)))
	}
	if len(listen) > 0 {
		if t.echo, err = startEcho(cfg.NetNSPath, cfg.Name, listen); err != nil {
			return nil, fmt.Errorf("target %s: %w", cfg.Name, err)
		}
	}
	// The connection outlives Start's ctx: it is bound to the stub's own.
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t.cancel = cancel
	defer func() {
		if err != nil {
			t.cancel()
			if t.echo != nil {
				t.echo.stop()
			}
		}
	}()
	t.client = retry.NewClient(controlplane.NewClient(life, controlplane.ClientConfig{
		Name:          cfg.Name,
		NSMgrURL:      cfg.NSMgrURL,
		InterfaceName: cfg.InterfaceName,
		NetNSPath:     cfg.NetNSPath,
		TokenLifetime: cfg.TokenLifetime,
		SPIFFE:        cfg.SPIFFE,
		Elements:      cfg.elements(),
	}), retry.WithTryTimeout(cfg.RequestTimeout), retry.WithInterval(time.Second))

	conn, err := t.client.Request(ctx, &networkservice.NetworkServiceRequest{
		Connection: &networkservice.Connection{
			Id:             cfg.Name + "-" + cfg.Service,
			NetworkService: cfg.Service,
			Labels:         cfg.Labels,
			Payload:        payload.Ethernet,
			Context:        &networkservice.ConnectionContext{IpContext: &networkservice.IPContext{}},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("target %s: request %s: %w", cfg.Name, cfg.Service, err)
	}
	if next := conn.Clone(); withVIPs(next, cfg.VIPs) {
		withVIPsConn, err := t.client.Request(ctx, &networkservice.NetworkServiceRequest{Connection: next})
		if err != nil {
			closeCtx, cancelClose := context.WithTimeout(context.WithoutCancel(ctx), cfg.RequestTimeout)
			defer cancelClose()
			_, _ = t.client.Close(closeCtx, conn)
			return nil, fmt.Errorf("target %s: request with VIPs: %w", cfg.Name, err)
		}
		conn = withVIPsConn
	}
	t.conn = conn
	slog.Info("target connected", "target", cfg.Name, "service", cfg.Service,
		"src", conn.GetContext().GetIpContext().GetSrcIpAddrs(), "gateways", conn.GetContext().GetIpContext().GetExtraPrefixes())
	return t, nil
}

// elements are the target's own chain elements, run before the kernel
// mechanism: its pod's labels (PodLabels), then the publication.
func (cfg Config) elements() []networkservice.NetworkServiceClient {
	var out []networkservice.NetworkServiceClient
	if cfg.PodLabels {
		out = append(out, clientinfo.NewClient())
	}
	return append(out, &publishClient{board: cfg.Publish, name: cfg.Name, vips: cfg.VIPs,
		nsPath: cfg.NetNSPath, ifname: cfg.InterfaceName})
}

// Connection is the target's current connection.
func (t *Target) Connection() *networkservice.Connection {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.conn.Clone()
}

// Addrs are the addresses the proxy handed out to the target (VIPs excluded).
func (t *Target) Addrs() []netip.Addr { return ownAddrs(t.Connection(), t.cfg.VIPs) }

// Stop withdraws the target's publication, closes its connection ("target
// leaves") and stops the echo service. It is safe to call more than once.
func (t *Target) Stop(ctx context.Context) error {
	var err error
	t.once.Do(func() {
		if t.cfg.Publish != nil {
			err = t.cfg.Publish.Withdraw(ctx, t.cfg.Name)
		}
		if _, cerr := t.client.Close(ctx, t.Connection()); cerr != nil && err == nil {
			err = fmt.Errorf("target %s: close: %w", t.cfg.Name, cerr)
		}
		t.cancel()
		if t.echo != nil {
			t.echo.stop()
		}
	})
	return err
}

// Run starts the target stub and keeps it connected until ctx ends, then
// stops it (withdraw, close): the body of a process that is one target. A
// stop while it connects is a clean stop too: Start has closed what it
// opened.
func Run(ctx context.Context, cfg Config) error {
	t, err := Start(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			slog.Info("target stopped while connecting", "target", cfg.Name, "error", err)
			return nil
		}
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return t.Stop(stopCtx)
}
