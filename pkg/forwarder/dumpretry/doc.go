// Package dumpretry owns the NSM server element that retries a request
// failed by an interrupted netlink dump. The kernel marks a dump
// NLM_F_DUMP_INTR when the table changed while it was read (another
// interface getting its addresses at the same time, in a namespace with
// hundreds of them), and sdk-kernel's elements fail the request with
// netlink.ErrDumpInterrupted ("results may be incomplete or
// inconsistent"). The failed attempt has already closed what it set up, and
// NSM requests are idempotent, so the element runs the rest of the chain
// again, with a short pause growing to 100 ms, up to DefaultAttempts times
// while the request's context lasts.
package dumpretry
