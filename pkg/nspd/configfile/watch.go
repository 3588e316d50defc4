package configfile

import (
	"context"

	"github.com/causeway-net/causeway/internal/yamlfile"
)

// Watch follows the configuration file at path until ctx is done, and calls
// onChange with every valid version that differs from the previous one. last
// is the configuration the caller already has (nil if none): the first read
// delivers only if it differs from last. A version that cannot be read or does
// not validate is logged with its reason and skipped; the last good
// configuration stays in force. It is yamlfile.WatchParsed with Parse.
func Watch(ctx context.Context, path string, last *Config, onChange func(*Config), opts ...yamlfile.WatchOption) error {
	return yamlfile.WatchParsed(ctx, path, Parse, last, onChange, opts...)
}
