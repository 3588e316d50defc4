package labrun

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/causeway-net/causeway/pkg/lab/topo"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
)

// stateFile is the lab's description of a run, next to topo's record, so
// that another process (status, down) knows the names and addresses.
const stateFile = "lab.json"

// labState is what a run is made of; it is rewritten on every change.
type labState struct {
	ID             string   `json:"id"`
	BinDir         string   `json:"binDir"`
	Trench         string   `json:"trench"`
	Conduit        string   `json:"conduit"`
	Namespace      string   `json:"namespace"`
	VIPs           []string `json:"vips"`
	LBs            []string `json:"lbs"`
	Targets        []string `json:"targets"`
	ReleaseDelay   string   `json:"releaseDelay"`
	IPAMPrefixIPv4 string   `json:"ipamPrefixIPv4"`
	IPAMPrefixIPv6 string   `json:"ipamPrefixIPv6"`
	EchoPort       int      `json:"echoPort"`
	// ServicePort is the targets' echo port as service endpoints (0: the
	// lab runs without services); ServiceProvider the proxy's provider.
	ServicePort     int      `json:"servicePort,omitempty"`
	ServiceProvider string   `json:"serviceProvider,omitempty"`
	NSEExpiration   string   `json:"nseExpiration"`
	TokenLifetime   string   `json:"tokenLifetime,omitempty"`
	LogLevel        string   `json:"logLevel"`
	IPAMEnv         []string `json:"ipamEnv,omitempty"`
	ProxyEnv        []string `json:"proxyEnv,omitempty"`
	// ProxyPod counts the proxy's pod replacements (ReplaceProxyPod): a
	// replaced pod has a new name.
	ProxyPod int `json:"proxyPod,omitempty"`
	// Owner is the `lab run` process that started the components and
	// takes the control socket's requests.
	OwnerPID       int    `json:"ownerPid"`
	OwnerStartTime uint64 `json:"ownerStartTime"`
}

func (s *labState) clone() labState {
	c := *s
	c.VIPs = append([]string(nil), s.VIPs...)
	c.LBs = append([]string(nil), s.LBs...)
	c.Targets = append([]string(nil), s.Targets...)
	c.IPAMEnv = append([]string(nil), s.IPAMEnv...)
	c.ProxyEnv = append([]string(nil), s.ProxyEnv...)
	return c
}

func saveState(dir string, s labState) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode lab state: %w", err)
	}
	tmp := filepath.Join(dir, "."+stateFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write lab state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, stateFile)); err != nil {
		return fmt.Errorf("write lab state: %w", err)
	}
	return nil
}

func loadState(dir string) (labState, error) {
	var s labState
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return s, fmt.Errorf("read lab state: %w", err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("decode lab state %s: %w", filepath.Join(dir, stateFile), err)
	}
	return s, nil
}

// RunInfo is a recorded run.
type RunInfo struct {
	ID      string
	Created time.Time
	// Owner is the pid of the process that runs the lab (0 if unknown) and
	// OwnerAlive whether it still runs.
	Owner      int
	OwnerAlive bool
}

// List returns the runs recorded under runBase (default topo.DefaultBase),
// oldest first.
func List(runBase string) ([]RunInfo, error) {
	ids, err := topo.ListRuns(runBase)
	if err != nil {
		return nil, err
	}
	var out []RunInfo
	for _, id := range ids {
		r, err := topo.OpenRun(runBase, id)
		if err != nil {
			continue
		}
		info := RunInfo{ID: id, Created: r.State().Created}
		if s, err := loadState(r.Dir); err == nil {
			info.Owner = s.OwnerPID
			info.OwnerAlive = topo.Alive(s.OwnerPID, s.OwnerStartTime)
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// Latest is the id of the most recent run under runBase.
func Latest(runBase string) (string, error) {
	runs, err := List(runBase)
	if err != nil {
		return "", err
	}
	if len(runs) == 0 {
		return "", fmt.Errorf("no lab run recorded under %s", baseOrDefault(runBase))
	}
	return runs[len(runs)-1].ID, nil
}

func baseOrDefault(b string) string {
	if b == "" {
		return topo.DefaultBase
	}
	return b
}

// tokenLifetime is the lab's NSM token lifetime (a lab saved before it was
// recorded has the default).
func (st labState) tokenLifetime() string {
	if st.TokenLifetime == "" {
		return controlplane.DefaultTokenLifetime.String()
	}
	return st.TokenLifetime
}

// tokenLifetimeArgs are the flags that give a stub the lab's token lifetime.
func (st labState) tokenLifetimeArgs() []string {
	return []string{"-token-lifetime", st.tokenLifetime()}
}
