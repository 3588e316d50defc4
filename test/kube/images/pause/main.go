// Command pause is the test cluster's pod sandbox process: it holds the
// pod's namespaces, reaps the orphans a shared PID namespace hands it, and
// exits when it is told to stop. It is built and cached by scripts/cluster.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			return
		}
		reap()
	}
}

// reap collects every child that has exited.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
