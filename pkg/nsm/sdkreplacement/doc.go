// Package sdkreplacement groups the NSM elements that take the place of an
// SDK element of the same role in Causeway's chains, one per sub-package;
// each package's doc says what it does differently and why:
//
//   - authorize: the SDK's authorize server and client, with its default
//     policies written in Go instead of Rego on the Open Policy Agent;
//   - expiry: the SDK's timeout server, a timer per connection instead of a
//     goroutine;
//   - monitorconnection: the SDK's monitor server in a terminal endpoint,
//     one clone per event instead of one per open stream;
//   - sendfd: the SDK's sendfd server, without its false failure when the
//     descriptor went out before the send's error was read.
package sdkreplacement
