package labrun

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsRefuseWhatCannotWork(t *testing.T) {
	cases := map[string]struct {
		opts Options
		want string
	}{
		"token lifetime within a request": {Options{TokenLifetime: 20 * time.Second}, "token lifetime 20s: at least 30s"},
		"service provider":                {Options{ServiceProvider: "ipvs"}, `service provider "ipvs"`},
		"targets":                         {Options{Targets: -1}, "targets: -1"},
		"LB name":                         {Options{LBs: []string{"proxy"}}, `invalid component name "proxy"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := c.opts.withDefaults(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("withDefaults() error = %v, want one with %q", err, c.want)
			}
		})
	}
	for _, d := range []time.Duration{0, MinTokenLifetime} {
		if _, err := (Options{TokenLifetime: d}).withDefaults(); err != nil {
			t.Fatalf("token lifetime %s: %v", d, err)
		}
	}
}
