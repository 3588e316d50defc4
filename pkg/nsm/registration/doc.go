// Package registration keeps a network service endpoint registered with an
// NSMgr for as long as its owner runs. It owns the refresh and the retry of
// the registration: a refresh that fails (the NSMgr or its registry away,
// restarted empty) is retried with capped backoff until it succeeds again,
// however long that takes, and re-registers the network service first, so
// that a registry that lost everything is filled again. Callers build the
// SDK's registry clients without the SDK's own retry and heal, so that this
// package is the only one that retries.
package registration
