package servicelb

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
)

// ErrPortRangeExhausted is returned (wrapped with the range) when every port
// of a PortAllocator's range is in use.
var ErrPortRangeExhausted = errors.New("no port left in the proxy port range")

// PortAllocator hands out the local ports of proxy sockets.
type PortAllocator interface {
	// AllocateNext returns a free port, or 0 meaning "let the kernel
	// choose".
	AllocateNext() (int, error)
	// Release gives a port back; ports it never handed out are ignored.
	Release(port int)
}

// PortRange is Size ports from Base. The zero value is the empty range.
type PortRange struct {
	Base int
	Size int
}

// Empty reports whether r holds no port: the zero value, and "0-0" (port
// 0, as kube-proxy reads it), both the kernel's choice.
func (r PortRange) Empty() bool { return r.Base <= 0 || r.Size <= 0 }

// String is r as ParsePortRange reads it back: "first-last", "0-0" for port
// 0, "" for the zero value.
func (r PortRange) String() string {
	if r.Size <= 0 {
		return ""
	}
	return fmt.Sprintf("%d-%d", r.Base, r.Base+r.Size-1)
}

// ParsePortRange parses "first-last" or a single port with kube-proxy's
// syntax: blanks around the whole are ignored, blanks around the dash are
// not numbers. "" is the zero value; "0" and "0-0" are port 0 (both empty:
// the kernel's choice). A range from 0 to another port is refused.
func ParsePortRange(s string) (PortRange, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return PortRange{}, nil
	}
	lo, hi, found := strings.Cut(s, "-")
	if !found {
		hi = lo
	}
	first, err1 := strconv.Atoi(lo)
	last, err2 := strconv.Atoi(hi)
	if err := errors.Join(err1, err2); err != nil {
		return PortRange{}, fmt.Errorf("port range %q: %w", s, err)
	}
	if first == 0 && last == 0 {
		return PortRange{Size: 1}, nil
	}
	if first < 1 || last > 65535 || last < first {
		return PortRange{}, fmt.Errorf("port range %q: want 1 <= first <= last <= 65535, or 0-0", s)
	}
	return PortRange{Base: first, Size: last - first + 1}, nil
}

// NewPortAllocator returns an allocator over r; on the empty range it always
// answers 0 (the kernel chooses at bind time).
func NewPortAllocator(r PortRange) PortAllocator {
	if r.Empty() {
		return kernelPorts{}
	}
	return &rangeAllocator{r: r, used: make([]bool, r.Size)}
}

type kernelPorts struct{}

func (kernelPorts) AllocateNext() (int, error) { return 0, nil }
func (kernelPorts) Release(int)                {}

// rangeAllocator picks a random offset and takes the first free port from
// there, wrapping around, so consecutive allocations are not predictable and
// a port is never handed out twice before it is released.
type rangeAllocator struct {
	r    PortRange
	mu   sync.Mutex
	used []bool
	n    int
}

func (a *rangeAllocator) AllocateNext() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == a.r.Size {
		return 0, fmt.Errorf("allocate a port in %s (%d in use): %w", a.r, a.n, ErrPortRangeExhausted)
	}
	start := rand.IntN(a.r.Size)
	for i := range a.r.Size {
		off := (start + i) % a.r.Size
		if !a.used[off] {
			a.used[off] = true
			a.n++
			return a.r.Base + off, nil
		}
	}
	panic("servicelb: port allocator count out of step with its bitmap")
}

func (a *rangeAllocator) Release(port int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	off := port - a.r.Base
	if off < 0 || off >= a.r.Size || !a.used[off] {
		return
	}
	a.used[off] = false
	a.n--
}
