package traffic

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"
)

// Throughput measures TCP goodput over one connection from the namespace
// at nsPath (source local when valid) to an echo service at addr: after the
// service's greeting line, it writes 1 KiB lines for d and counts the bytes
// echoed back,
// so the data crosses the path both ways. It returns bytes per second of
// echoed data.
func Throughput(ctx context.Context, nsPath string, local netip.Addr, addr netip.AddrPort, d time.Duration) (float64, error) {
	c, err := dialIn(ctx, nsPath, "tcp", local, addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	r := bufio.NewReaderSize(c, 256<<10)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); err != nil {
		return 0, fmt.Errorf("throughput %s: greeting: %w", addr, err)
	}
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Lines of 1 KiB: the targets' echo answers line by line.
		buf := make([]byte, 64<<10)
		for i := range buf {
			buf[i] = 'x'
			if i%1024 == 1023 {
				buf[i] = '\n'
			}
		}
		_ = c.SetWriteDeadline(end)
		for time.Now().Before(end) && ctx.Err() == nil {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	_ = c.SetReadDeadline(end)
	n, err := io.Copy(io.Discard, r)
	took := time.Since(start)
	_ = c.Close()
	wg.Wait()
	if n == 0 {
		return 0, fmt.Errorf("throughput %s: nothing echoed: %v", addr, err)
	}
	return float64(n) / took.Seconds(), nil
}
