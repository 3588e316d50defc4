package topo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// StartProcess starts argv inside the namespace netnsName (`ip netns exec`;
// empty for the current namespace) with env added to the environment and
// stdout and stderr appended to <LogDir>/<name>.log, and records it so that
// Down stops it. The process (and what it starts) also carries the run's
// marker (MarkerEnv) in its environment: Down finds it by that even if the
// record never reached the state (a crash between start and record). The
// caller owns the returned command and must Wait for it.
func (r *Run) StartProcess(netnsName, name string, argv, env []string) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("start %s: empty command", name)
	}
	if err := os.MkdirAll(r.LogDir(), 0o755); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	logFile, err := os.OpenFile(filepath.Join(r.LogDir(), name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer logFile.Close() // the child has its own copy
	full := argv
	if netnsName != "" {
		full = append([]string{"ip", "netns", "exec", netnsName}, argv...)
	}
	cmd := exec.Command(full[0], full[1:]...)
	// The marker comes last: of duplicate keys the last one counts.
	cmd.Env = append(append(os.Environ(), env...), MarkerEnv+"="+r.Marker())
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := r.RecordProcess(cmd.Process.Pid, name); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	return cmd, nil
}
