package endpoint

import (
	"log/slog"
	"net/url"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/api/pkg/api/networkservice/payload"
	"google.golang.org/grpc"
)

// Config says what to serve and where to register it.
type Config struct {
	// Name is the endpoint's name (NSM_NAME).
	Name string
	// Service is the network service it serves, proxy.<conduit>.<trench>.<ns>.
	Service string
	// NodeName is the value of the endpoint's nodeName label (NSM_HOST);
	// empty means no label.
	NodeName string
	// Labels are further labels of the endpoint for Service (the lab's
	// LBs and targets select on them).
	Labels map[string]string
	// ConnectTo is the NSMgr's URL.
	ConnectTo *url.URL
	// TokenGenerator signs the tokens of the endpoint's path segments and
	// registry calls; see pkg/nsm/credentials.
	TokenGenerator TokenGenerator
	// DialOptions are used to reach the NSMgr (registry calls).
	DialOptions []grpc.DialOption
	// ServerOptions are used for the endpoint's gRPC server (credentials).
	ServerOptions []grpc.ServerOption
	// Elements are the proxy's own server elements, placed after the SDK's
	// endpoint chain (typically mechanisms, ipcontext, connlink,
	// mtu). The package appends its file sender (pkg/nsm/sdkreplacement/sendfd).
	Elements []networkservice.NetworkServiceServer
}

// The endpoint's fixed settings.
const (
	// servicePayload is the payload of the network service: the proxy
	// bridges the targets' interfaces.
	servicePayload = payload.Ethernet
	// registrationLifetime is the expiration requested on every
	// (re-)registration; the registry client refreshes it before it runs
	// out.
	registrationLifetime = time.Minute
	// registerTimeout bounds the first registration's retries and the
	// unregistration at Stop.
	registerTimeout = 15 * time.Second
)

// Option changes a default.
type Option func(*options)

type options struct {
	listenURL    *url.URL
	socketPath   string
	noNodeMatch  bool
	authorize    networkservice.NetworkServiceServer
	onRegistered func(bool)
	background   bool
	logger       *slog.Logger
}

func newOptions(opts []Option) *options {
	o := &options{
		onRegistered: func(bool) {},
		logger:       slog.Default(),
	}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// WithBackgroundRegistration makes Start return once the endpoint serves:
// the registration is made, and retried without end, in the background
// (Registered and WithOnRegistered tell when it succeeds). A proxy started
// while NSM is away must still run: its data path needs no NSM, and its
// connections come back through NSM once it returns.
func WithBackgroundRegistration() Option { return func(o *options) { o.background = true } }

// WithListenURL serves on the given unix:// or tcp:// URL (tcp port 0 picks
// a free port) instead of a socket in a fresh temporary directory.
func WithListenURL(u *url.URL) Option {
	return func(o *options) { o.listenURL = u }
}

// WithSocketPath serves on the unix socket at path, creating its directory
// and replacing a stale socket file left by an earlier run, so that an
// endpoint restarted in place keeps its URL (the lab's NSEs).
func WithSocketPath(path string) Option {
	return func(o *options) { o.socketPath = path }
}

// WithoutNodeMatch registers the network service without the nodeName
// match, so that any client reaches any of its endpoints (the lab's LB and
// target services, which are not per node).
func WithoutNodeMatch() Option {
	return func(o *options) { o.noNodeMatch = true }
}

// WithAuthorizeServer sets the endpoint's authorization element (default:
// the SDK's default policies, authorize.NewServer() of pkg/nsm/sdkreplacement/authorize;
// use authorize.Any() with insecure credentials).
func WithAuthorizeServer(a networkservice.NetworkServiceServer) Option {
	return func(o *options) { o.authorize = a }
}

// WithRegistrationState is told each time the registration is lost (a
// refresh failed; it is retried for as long as the endpoint runs) or
// regained, the first time from Start.
func WithRegistrationState(fn func(registered bool)) Option {
	return func(o *options) {
		if fn != nil {
			o.onRegistered = fn
		}
	}
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}
