package topo

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Signal sends sig to the process pid that started at start, and to no
// other: the process is held by a pidfd before its start time is compared,
// so a pid that was given to a new process since is never signalled.
// os.ErrProcessDone means that process is gone.
func Signal(pid int, start uint64, sig syscall.Signal) error {
	if pid <= 0 {
		return os.ErrProcessDone
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return os.ErrProcessDone
	}
	if err != nil {
		return fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	defer unix.Close(fd)
	if !Alive(pid, start) {
		return os.ErrProcessDone
	}
	err = unix.PidfdSendSignal(fd, sig, nil, 0)
	if errors.Is(err, unix.ESRCH) {
		return os.ErrProcessDone
	}
	if err != nil {
		return fmt.Errorf("signal %d: %w", pid, err)
	}
	return nil
}
