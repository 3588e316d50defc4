package sendfd

import (
	"errors"
	"fmt"
	"net/url"
	"os"

	"github.com/edwarnicke/grpcfd"
	"github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/common"
)

// sendFile sends the file that params' inode URL names (file://path) to
// the peer behind sender and rewrites the parameter to the inode://dev/ino
// form that the peer's recvfd element resolves. Parameters without a file
// URL are left as they are; on error they are unchanged.
func sendFile(sender grpcfd.FDSender, params map[string]string) error {
	raw, ok := params[common.InodeURL]
	if !ok {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("mechanism parameter %s %q: %w", common.InodeURL, raw, err)
	}
	if u.Scheme != "file" {
		return nil
	}
	inode, err := grpcfd.FilenameToURL(u.Path)
	if err != nil {
		return fmt.Errorf("inode of %s: %w", u.Path, err)
	}
	if err := settle(sender.SendFilename(u.Path)); err != nil {
		return fmt.Errorf("send %s to the client: %w", u.Path, err)
	}
	params[common.InodeURL] = inode.String()
	return nil
}

// settle reports what a send's error channel holds so far, without
// waiting: the descriptor is written with the answer, after the handler
// returns. A close error means grpcfd closed the sent file a second time
// after writing it, so the send succeeded. When nothing came yet, the
// channel is drained in the background until grpcfd closes it (once the
// descriptor is written or the connection closed): grpcfd sends a failed
// send's error and then its close error into a channel of one slot.
func settle(errs <-chan error) error {
	select {
	case err, open := <-errs:
		if !open || errors.Is(err, os.ErrClosed) {
			return nil
		}
		return err
	default:
		go drain(errs)
		return nil
	}
}

func drain(errs <-chan error) {
	for range errs { //nolint:revive // only emptied
	}
}
