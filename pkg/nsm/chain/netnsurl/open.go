package netnsurl

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/vishvananda/netns"
)

// ErrNotFileURL is returned by Open for a URL that does not name a
// namespace by a file:// path.
var ErrNotFileURL = errors.New("not a file:// netns url")

// Open opens the namespace that a kernel mechanism's file:// URL names.
// The caller closes the handle. An error other than ErrNotFileURL wraps
// the open's error (e.g. fs.ErrNotExist when the namespace is gone).
func Open(rawURL string) (netns.NsHandle, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "file" {
		return -1, fmt.Errorf("%q: %w", rawURL, ErrNotFileURL)
	}
	h, err := netns.GetFromPath(u.Path)
	if err != nil {
		return -1, fmt.Errorf("open netns %s: %w", u.Path, err)
	}
	return h, nil
}
