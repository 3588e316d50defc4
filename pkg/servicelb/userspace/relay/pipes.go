package relay

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// pipeSize is the capacity asked for each pipe: as much as one splice
// moves (the kernel keeps the default when it refuses).
const pipeSize = 1 << 20

// maxFreePipes bounds the idle pipes kept for reuse.
const maxFreePipes = 64

// pipe is a kernel pipe that carries one direction's bytes between a
// splice from the source and a splice to the destination. A direction holds
// one only while bytes are in it.
type pipe struct {
	r, w int
	size int
}

// pipePool keeps emptied pipes for the next direction that reads.
type pipePool struct {
	free []*pipe
}

func (pp *pipePool) get() (*pipe, error) {
	if n := len(pp.free); n > 0 {
		p := pp.free[n-1]
		pp.free = pp.free[:n-1]
		return p, nil
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	p := &pipe{r: fds[0], w: fds[1]}
	_, _ = unix.FcntlInt(uintptr(p.w), unix.F_SETPIPE_SZ, pipeSize)
	size, err := unix.FcntlInt(uintptr(p.w), unix.F_GETPIPE_SZ, 0)
	if err != nil || size <= 0 {
		size = 64 << 10
	}
	p.size = size
	return p, nil
}

// put returns an empty pipe.
func (pp *pipePool) put(p *pipe) {
	if len(pp.free) >= maxFreePipes {
		p.close()
		return
	}
	pp.free = append(pp.free, p)
}

func (pp *pipePool) closeAll() {
	for _, p := range pp.free {
		p.close()
	}
	pp.free = nil
}

func (p *pipe) close() {
	_ = unix.Close(p.r)
	_ = unix.Close(p.w)
}
