package configfile

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/internal/yamlfile"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const good = `
trenches:
  - name: red
  - name: blue
conduits:
  - name: lb
    trench: red
    destinationPortNats:
      - port: 80
        targetPort: 8080
        protocol: TCP
        vips: [v4]
  - name: lb
    trench: blue
vips:
  - name: v4
    address: 20.0.0.1/32
    trench: red
  - name: net
    address: 40.0.0.0/24
    trench: red
  - name: v4
    address: 2001:db8::1/128
    trench: blue
`

func TestParseGood(t *testing.T) {
	cfg, err := Parse([]byte(good))
	require.NoError(t, err)
	assert.Equal(t, []Trench{{Name: "red"}, {Name: "blue"}}, cfg.Trenches)
	require.Len(t, cfg.Conduits, 2)
	assert.Equal(t, []PortNat{{Port: 80, TargetPort: 8080, Protocol: "TCP", VIPs: []string{"v4"}}},
		cfg.Conduits[0].DestinationPortNats)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("20.0.0.1/32"), netip.MustParsePrefix("40.0.0.0/24")},
		cfg.VIPPrefixes("red"))
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("2001:db8::1/128")}, cfg.VIPPrefixes("blue"))
	assert.Len(t, cfg.VIPPrefixes(""), 3)
	assert.Empty(t, cfg.VIPPrefixes("green"))
	require.NoError(t, cfg.Validate())
}

func TestParseEmptyConfigs(t *testing.T) {
	for _, doc := range []string{"trenches: []", "{}", "trenches:\nconduits:\nvips:\n"} {
		cfg, err := Parse([]byte(doc))
		require.NoError(t, err, doc)
		assert.Empty(t, cfg.VIPPrefixes(""))
	}
}

func TestParseBad(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		want []string // substrings of the error
	}{
		{"empty file", "", []string{"empty"}},
		{"only comments", "# nothing\n", []string{"empty"}},
		{"two documents", "trenches: []\n---\ntrenches: []\n", []string{"more than one YAML document"}},
		{"not yaml", "trenches: [", []string{"not valid YAML: line 1: did not find expected node content"}},
		{"unknown top-level field", "trenches: []\nvip: []\n", []string{"line 2", "field vip not found"}},
		{"unknown vip field", "trenches: [{name: a}]\nvips:\n  - name: x\n    adress: 1.1.1.1/32\n    trench: a\n",
			[]string{"line 4", "field adress not found"}},
		{"wrong type", "trenches: [{name: a}]\nconduits: [{name: c, trench: a, destinationPortNats: [{port: http}]}]\n",
			[]string{`line 2: "http" is not a whole number in range`}},
		{"type names", "trenches: {name: a}\nvips: [{name: v, address: [1]}]\nconduits: [{name: c, trench: a, extra: 1}]\n",
			[]string{"line 1: a mapping is not a list\n", "line 2: a list is not text\n",
				"line 3: field extra not found: not a key of this entry (mistyped?)"}},
		{"empty trench name", "trenches: [{name: ''}]", []string{`trenches[0] (line 1): name is empty`}},
		{"duplicate trench", "trenches:\n  - name: a\n  - name: a\n", []string{`trenches[1] "a" (line 3): name is already used by trenches[0]`}},
		{"vip without trench", "trenches: [{name: a}]\nvips:\n  - {name: v, address: 1.1.1.1/32}\n",
			[]string{`vips[0] "v" (line 3): trench is empty`}},
		{"vip unknown trench", "trenches: [{name: a}]\nvips:\n  - {name: v, address: 1.1.1.1/32, trench: b}\n",
			[]string{`vips[0] "v" (line 3): trench "b" is not defined under trenches`}},
		{"vip bad address", "trenches: [{name: a}]\nvips:\n  - {name: v, address: 1.1.1.300/32, trench: a}\n",
			[]string{`vips[0] "v" (line 3): address "1.1.1.300/32" is not a prefix in CIDR notation`}},
		{"vip plain address", "trenches: [{name: a}]\nvips:\n  - {name: v, address: 1.1.1.1, trench: a}\n",
			[]string{`add /32 or /128`}},
		{"vip host bits", "trenches: [{name: a}]\nvips:\n  - {name: v, address: 40.0.0.1/24, trench: a}\n",
			[]string{`host bits set; did you mean 40.0.0.0/24?`}},
		{"vip empty address", "trenches: [{name: a}]\nvips:\n  - {name: v, trench: a}\n", []string{`address is empty`}},
		{"vip empty name", "trenches: [{name: a}]\nvips:\n  - {address: 1.1.1.1/32, trench: a}\n", []string{`vips[0] (line 3): name is empty`}},
		{"vip duplicate name", "trenches: [{name: a}]\nvips:\n  - {name: v, address: 1.1.1.1/32, trench: a}\n  - {name: v, address: 1.1.1.2/32, trench: a}\n",
			[]string{`vips[1] "v" (line 4): name is already used by vips[0] in trench "a"`}},
		{"vip duplicate address", "trenches: [{name: a}]\nvips:\n  - {name: v, address: 1.1.1.1/32, trench: a}\n  - {name: w, address: 1.1.1.1/32, trench: a}\n",
			[]string{`vips[1] "w" (line 4): address 1.1.1.1/32 is already used by vips[0]`}},
		{"conduit unknown trench", "trenches: [{name: a}]\nconduits: [{name: c, trench: x}]\n",
			[]string{`conduits[0] "c" (line 2): trench "x" is not defined`}},
		{"conduit duplicate", "trenches: [{name: a}]\nconduits: [{name: c, trench: a}, {name: c, trench: a}]\n",
			[]string{`conduits[1] "c" (line 2): name is already used by conduits[0] in trench "a"`}},
		{"port nat", "trenches: [{name: a}]\nvips: [{name: v, address: 1.1.1.1/32, trench: a}]\nconduits:\n  - name: c\n    trench: a\n    destinationPortNats:\n      - {port: 0, targetPort: 70000, protocol: icmp, vips: [w]}\n      - {port: 1, targetPort: 1, protocol: udp}\n",
			[]string{
				`conduits[0] "c" (line 4) destinationPortNats[0]: port 0 is not in 1-65535`,
				`targetPort 70000 is not in 1-65535`,
				`protocol "icmp" is not one of tcp, udp, sctp`,
				`vip "w" is not defined in trench "a"`,
				`destinationPortNats[1]: vips is empty`,
				"5 problems",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.doc))
			require.Error(t, err)
			assert.Nil(t, cfg)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestInvalidErrorUnwraps(t *testing.T) {
	_, err := Parse([]byte("trenches: [{name: ''}, {name: ''}]"))
	var inv *yamlfile.InvalidError
	require.True(t, errors.As(err, &inv))
	assert.Len(t, inv.Problems, 2)
}

func TestLoad(t *testing.T) {
	_, err := Load(t.TempDir() + "/missing.yaml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "read config")
}

func TestExampleFileIsValid(t *testing.T) {
	cfg, err := Load("testdata/example.yaml")
	require.NoError(t, err)
	assert.Len(t, cfg.VIPPrefixes("trench-a"), 3)
	assert.Len(t, cfg.Conduits[0].DestinationPortNats, 1)
}

// Decode errors speak of values, not of Go types.
func TestDecodeErrorsNameNoGoType(t *testing.T) {
	_, err := Parse([]byte("trenches: {name: a}\nconduits: [{name: c, trench: a, extra: 1}]\nvips: [3]\n"))
	require.Error(t, err)
	for _, goName := range []string{"configfile.", "[]", "in type", "!!"} {
		assert.NotContains(t, err.Error(), goName)
	}
	assert.Contains(t, err.Error(), `line 3: "3" is not a mapping (key: value)`)
}
