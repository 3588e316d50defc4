package topo

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestSignalOnlyTheProcessThatStartedThen(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-ended
	})
	pid := cmd.Process.Pid
	start, err := ProcessStartTime(pid)
	if err != nil {
		t.Fatal(err)
	}

	if err := Signal(pid, start+1, syscall.SIGKILL); !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("Signal with another start time = %v, want os.ErrProcessDone", err)
	}
	select {
	case err := <-ended:
		t.Fatalf("a process with the same pid but another start time was signalled: %v", err)
	case <-time.After(200 * time.Millisecond):
	}

	if err := Signal(pid, start, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		ended <- err // for the clean-up
	case <-time.After(time.Minute):
		t.Fatal("the process did not end after SIGKILL")
	}
	if err := Signal(0, 0, syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("Signal(0) = %v", err)
	}
}
