// Package sendfd owns the NSM server element that passes the file a
// connection's mechanism names (its network namespace) back to the client
// as a descriptor: the SDK's sendfd server without its false failure.
//
// The SDK's element hands the file to grpcfd (v1.1.4), whose SendFilename
// closes the file twice: once at once, and once more when the connection
// has written the descriptor, reporting that second close ("file already
// closed") as the send's error. The SDK looks at the send's errors once,
// without waiting, to catch a file that does not exist; when the connection
// wrote the descriptor in that short window (another stream's frame went
// out, the handler was preempted on a loaded machine), it sees the close
// error and fails a Request or a Close whose file was in fact sent. In the
// lab this failed an NSC's Close of an LB connection (see
// docs/registry-find-race.md for the same bug in the registry's sendfd).
//
// This element reads that first error the same way and takes a close error
// for what it is, the proof that the descriptor went out. It also keeps
// reading a send's later errors, so that grpcfd's forwarding goroutine does
// not block for ever on a send that failed after the check.
package sendfd
