package configfile

import (
	"fmt"
	"os"

	"github.com/causeway-net/causeway/internal/yamlfile"
)

// Load reads and parses the configuration file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes and validates one YAML document. It rejects unknown fields,
// an empty document, more than one document, and every semantic problem that
// Validate finds; each problem names the offending entry and its line.
func Parse(data []byte) (*Config, error) {
	var cfg Config
	l, err := yamlfile.DecodeStrict(data, &cfg, "write `trenches: []` for an empty configuration")
	if err != nil {
		return nil, err
	}
	if err := validate(&cfg, l); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// Validate checks the semantic rules of a Config: non-empty names unique per
// kind (trenches in the file, conduits and VIPs within their trench),
// references to existing trenches and VIPs, VIP addresses that are prefixes
// without host bits, and sane port NATs.
func (c *Config) Validate() error {
	return validate(c, nil)
}
