package test

import (
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// blackhole is a TCP proxy to a server that can stop passing bytes either way while
// keeping every connection open: what a process sees of a network partition, or of a
// server that stopped answering, while the process itself runs on.
type blackhole struct {
	addr    string
	mu      sync.Mutex
	blocked bool
	resume  *sync.Cond
}

// startBlackhole proxies a fresh loopback address to target until the test ends.
func startBlackhole(t *testing.T, target string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := &blackhole{addr: ln.Addr().String()}
	b.resume = sync.NewCond(&b.mu)
	t.Cleanup(func() { ln.Close(); b.set(false) })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			go b.pipe(in, out)
			go b.pipe(out, in)
		}
	}()
	return b
}

// set blocks (true) or lets through (false) every byte from now on.
func (b *blackhole) set(blocked bool) {
	b.mu.Lock()
	b.blocked = blocked
	b.mu.Unlock()
	b.resume.Broadcast()
}

func (b *blackhole) pipe(from, to net.Conn) {
	defer from.Close()
	defer to.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		b.mu.Lock()
		for b.blocked {
			b.resume.Wait()
		}
		b.mu.Unlock()
		if n > 0 {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
