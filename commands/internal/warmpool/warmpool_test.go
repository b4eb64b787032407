package warmpool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goid identifies the goroutine running it (from the stack header "goroutine N [").
func goid() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	for i := len("goroutine "); i < len(buf); i++ {
		if buf[i] == ' ' {
			return string(buf[len("goroutine "):i])
		}
	}
	return string(buf)
}

func TestSequentialWorkStaysOnOneGoroutine(t *testing.T) {
	p := New(8)
	defer p.Close()
	seen := map[string]int{}
	for range 50 {
		ids := make(chan string, 1)
		require.True(t, p.Go(func() { ids <- goid() }))
		seen[<-ids]++
		// Wait until the goroutine is idle again, as a request that is answered is.
		require.Eventually(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.idle) == 1 }, time.Second, time.Millisecond)
	}
	assert.Len(t, seen, 1, "the most recently idle goroutine takes the next piece of work")
	assert.Equal(t, 1, p.Size())
}

func TestAtMostMaxRunAtOnceAndGoBlocksWhenAllAreBusy(t *testing.T) {
	p := New(3)
	defer p.Close()
	release := make(chan struct{})
	var running, peak atomic.Int32
	for range 3 {
		require.True(t, p.Go(func() {
			n := running.Add(1)
			for {
				old := peak.Load()
				if n <= old || peak.CompareAndSwap(old, n) {
					break
				}
			}
			<-release
			running.Add(-1)
		}))
	}
	fourth := make(chan struct{})
	go func() {
		p.Go(func() { running.Add(1); running.Add(-1) })
		close(fourth)
	}()
	select {
	case <-fourth:
		t.Fatal("Go returned while all 3 goroutines were busy")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-fourth:
	case <-time.After(time.Second):
		t.Fatal("Go stayed blocked after a goroutine was freed")
	}
	assert.EqualValues(t, 3, peak.Load())
	assert.Equal(t, 3, p.Size())
}

func TestCloseRefusesWorkAndWaitWaitsForRunningWork(t *testing.T) {
	p := New(4)
	release := make(chan struct{})
	var done atomic.Bool
	require.True(t, p.Go(func() { <-release; done.Store(true) }))
	var wg sync.WaitGroup
	for range 3 { // idle ones, to be stopped by Close
		wg.Add(1)
		require.True(t, p.Go(wg.Done))
	}
	wg.Wait()
	p.Close()
	assert.False(t, p.Go(func() { t.Error("ran after Close") }))
	waited := make(chan struct{})
	go func() { p.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned while work was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-waited:
	case <-time.After(time.Second):
		t.Fatal("Wait did not return after the work ended")
	}
	assert.True(t, done.Load())
	assert.Equal(t, 0, p.Size())
}

func TestCloseWakesABlockedGo(t *testing.T) {
	p := New(1)
	release := make(chan struct{})
	require.True(t, p.Go(func() { <-release }))
	result := make(chan bool)
	go func() { result <- p.Go(func() {}) }()
	time.Sleep(20 * time.Millisecond)
	p.Close()
	select {
	case ok := <-result:
		assert.False(t, ok)
	case <-time.After(time.Second):
		t.Fatal("a Go blocked on a full pool was not woken by Close")
	}
	close(release)
	p.Wait()
}
