package proxyd

import (
	"github.com/vishvananda/netns"
	"google.golang.org/grpc"

	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/nsm/chain/connlink"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
	"github.com/causeway-net/causeway/pkg/proxy"
	"github.com/causeway-net/causeway/pkg/servicelb/kubesource"
)

// Dataplane is what the daemon uses of pkg/dataplane: the proxy's Apply and
// conntrack flush, the link table (feeding the link matcher), the
// kernel snapshot of -debug, and Close. *dataplane.Dataplane is the
// production one; tests inject a fake with WithDataplane.
type Dataplane interface {
	proxy.Dataplane
	// Subscribe returns the link events from now on and a function that
	// ends the subscription; Link and LinkByName read the one table of the
	// namespace's links (the link matcher's Links).
	Subscribe() (<-chan dataplane.LinkEvent, func())
	connlink.Links
	Snapshot() (dataplane.Snapshot, error)
	Close() error
}

var _ Dataplane = (*dataplane.Dataplane)(nil)

// Option changes how Start assembles the daemon. Without options it builds
// exactly the production daemon; the options exist for tests.
type Option func(*options)

type options struct {
	dataplane     Dataplane
	creds         *credentials.Credentials
	nsmDial       []grpc.DialOption
	nsmServer     []grpc.ServerOption
	keepSDKLogger bool
	serviceNetNS  netns.NsHandle
	kubeClient    kubesource.Client
}

// WithKubeClient makes the Kubernetes services source use c (a fake
// clientset, through kubesource/clientset) instead of the API server of
// NSM_KUBECONFIG or the service account.
func WithKubeClient(c kubesource.Client) Option { return func(o *options) { o.kubeClient = c } }

// WithServiceNetNS makes the service load balancer program the namespace ns
// instead of the daemon's own (for tests whose daemon runs in the test's
// namespace with a fake dataplane).
func WithServiceNetNS(ns netns.NsHandle) Option { return func(o *options) { o.serviceNetNS = ns } }

// WithDataplane makes the daemon use dp instead of creating the kernel
// dataplane in its namespace. The daemon closes it on Stop, as its own.
func WithDataplane(dp Dataplane) Option { return func(o *options) { o.dataplane = dp } }

// WithCredentials makes the daemon use c (NSM tokens and dial, server and
// authorization options; IPAM and NSP transport) instead of the ones
// NSM_INSECURE selects. The caller keeps ownership: Stop does not close c.
func WithCredentials(c *credentials.Credentials) Option { return func(o *options) { o.creds = c } }

// WithNSMDialOptions replaces the credentials' dial options toward the
// NSMgr (NSM client, registry clients, connection monitor, endpoint
// registration and health probe); without arguments it changes nothing.
func WithNSMDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.nsmDial = opts }
}

// WithNSMServerOptions replaces the credentials' options of the endpoint's
// gRPC server; without arguments it changes nothing.
func WithNSMServerOptions(opts ...grpc.ServerOption) Option {
	return func(o *options) { o.nsmServer = opts }
}

// WithoutSDKLogger leaves the NSM SDK's global logger alone (by default
// Start installs the daemon's logger there). The SDK's global logger is
// not synchronised: a test that already runs NSM components must not
// replace it.
func WithoutSDKLogger() Option { return func(o *options) { o.keepSDKLogger = true } }
