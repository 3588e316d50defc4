// Package configref is the reference of what Causeway's binaries take from
// their environment, read from their configuration structs (pkg/proxyd,
// pkg/ipamd, pkg/nspd, pkg/upgrade) with envconfig's own naming rules, plus the few
// facts a deployment must agree with: where each binary sits in its image,
// the image user, and the sysctls the proxy expects in its namespace.
//
// It is committed as deployments/config-reference.json (`go generate
// ./deployments/configref`), which the Helm chart's test, a module of its own,
// reads: a variable renamed in a struct changes the file (its test here
// fails until it is regenerated) and then fails the chart's test.
package configref

//go:generate go run ./gen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kelseyhightower/envconfig"

	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/ipamd"
	"github.com/causeway-net/causeway/pkg/nspd"
	"github.com/causeway-net/causeway/pkg/proxyd"
	"github.com/causeway-net/causeway/pkg/upgrade"
)

// File is the reference's path from the module root.
const File = "deployments/config-reference.json"

// ImageUser is the uid and gid of every image (the Dockerfile's USER).
const ImageUser = 10005

// ImageBinary is the path of a binary in its image, its entrypoint.
func ImageBinary(name string) string { return "/usr/local/bin/" + name }

// Var is one environment variable a binary reads.
type Var struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Default     string `json:"default"`
	Description string `json:"description"`
	// New marks Causeway's additions to Meridio's variables.
	New bool `json:"new,omitempty"`
}

// Binary is what one binary reads, in its struct's field order.
type Binary struct {
	Name string `json:"name"`
	// Image is the binary's path in its image (its entrypoint).
	Image string `json:"image"`
	Vars  []Var  `json:"vars"`
}

// Reference is the whole reference.
type Reference struct {
	ImageUser int      `json:"imageUser"`
	Binaries  []Binary `json:"binaries"`
	// ProxySysctls are dataplane.PodSysctls by NSM_IP_FAMILY value (ipv4,
	// ipv6, dualstack): what the proxy's init container sets.
	ProxySysctls map[string][]string `json:"proxySysctls"`
}

// spiffeSocket is read by go-spiffe's workload API client, not by a struct.
var spiffeSocket = Var{Name: "SPIFFE_ENDPOINT_SOCKET", Type: "String",
	Description: "the SPIRE agent's workload API socket ('unix://...', read by go-spiffe): SPIFFE mTLS; required unless plain gRPC is asked for"}

// Build reads the reference from the configuration structs.
func Build() (Reference, error) {
	ref := Reference{ImageUser: ImageUser, ProxySysctls: map[string][]string{}}
	for _, family := range []string{"ipv4", "ipv6", "dualstack"} {
		ref.ProxySysctls[family] = dataplane.PodSysctls((&proxyd.Config{IPFamily: family}).SysctlFamilies())
	}
	for _, b := range []struct {
		name, prefix string
		spec         any
		spiffe       bool // it reads SPIFFE_ENDPOINT_SOCKET too
	}{
		{"proxy", proxyd.EnvPrefix, &proxyd.Config{}, true},
		{"ipam", ipamd.EnvPrefix, &ipamd.Config{}, true},
		{"nsp", nspd.EnvPrefix, &nspd.Config{}, true},
		// In the proxy's image, run by the chart's upgrade Job and its report hook.
		{"causeway-upgrade", upgrade.EnvPrefix, &upgrade.Config{}, false},
	} {
		vars, err := structVars(b.prefix, b.spec)
		if err != nil {
			return Reference{}, fmt.Errorf("%s: %w", b.name, err)
		}
		if b.spiffe {
			vars = append(vars, spiffeSocket)
		}
		ref.Binaries = append(ref.Binaries, Binary{Name: b.name, Image: ImageBinary(b.name), Vars: vars})
	}
	return ref, nil
}

// Marshal renders the reference as the committed file holds it.
func (r Reference) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("encode reference: %w", err)
	}
	return buf.Bytes(), nil
}

// Field and record separators of the template below: no description holds
// them.
const (
	fieldSep  = "\x1f"
	recordSep = "\x1e"
)

// structVars lists the variables of spec as envconfig names them (prefix,
// split_words, envconfig tags).
func structVars(prefix string, spec any) ([]Var, error) {
	var buf bytes.Buffer
	format := "{{range .}}{{usage_key .}}" + fieldSep + "{{usage_type .}}" + fieldSep + "{{usage_default .}}" +
		fieldSep + "{{usage_description .}}" + recordSep + "{{end}}"
	if err := envconfig.Usagef(prefix, spec, &buf, format); err != nil {
		return nil, fmt.Errorf("envconfig usage: %w", err)
	}
	var vars []Var
	for _, rec := range strings.Split(strings.TrimSuffix(buf.String(), recordSep), recordSep) {
		f := strings.Split(rec, fieldSep)
		if len(f) != 4 {
			return nil, fmt.Errorf("unexpected usage record %q", rec)
		}
		v := Var{Name: f[0], Type: f[1], Default: f[2], Description: f[3]}
		if d, isNew := strings.CutPrefix(v.Description, "new: "); isNew {
			v.Description, v.New = d, true
		}
		vars = append(vars, v)
	}
	return vars, nil
}
