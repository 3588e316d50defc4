package daemon

import (
	"errors"
	"fmt"
	"slices"
)

// CheckPorts returns one problem per port outside 0-65535, each naming its
// environment variable (0 is valid: any free port for a service's own, or
// off for an optional one).
func CheckPorts(ports map[string]int) error {
	var errs []error
	for _, env := range sortedKeys(ports) {
		if p := ports[env]; p < 0 || p > 65535 {
			errs = append(errs, fmt.Errorf("%s: %d is not a port (0-65535)", env, p))
		}
	}
	return errors.Join(errs...)
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
