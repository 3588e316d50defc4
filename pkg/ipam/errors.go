package ipam

import "errors"

// Typed engine errors. Every error the engine returns wraps one of them (or a
// context error); the gRPC adapter maps them to status codes.
var (
	// ErrInvalidArgument: a required field is missing or a name is
	// malformed. Nothing was changed. (gRPC InvalidArgument)
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotServed: the trench or family is not served by this IPAM.
	// (gRPC FailedPrecondition)
	ErrNotServed = errors.New("not served by this IPAM")
	// ErrExhausted: the pool, conduit or node has no free prefix left.
	// (gRPC ResourceExhausted)
	ErrExhausted = errors.New("no free prefix")
	// ErrUnavailable: the change could not be made durable (store failure
	// or shutdown). A new allocation may still be persisted later; calling
	// Allocate again returns the same address. (gRPC Unavailable)
	ErrUnavailable = errors.New("store unavailable")
	// ErrDraining: the conduit is no longer in the configuration server's
	// list; its existing allocations are kept and renewed, new ones are
	// refused until it is listed again. (gRPC FailedPrecondition)
	ErrDraining = errors.New("conduit is not in the configuration (draining)")
)
