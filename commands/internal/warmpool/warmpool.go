// Package warmpool runs work on a bounded set of long-lived goroutines, handing each
// piece to the goroutine that finished most recently.
//
// A goroutine started per request begins with a small stack and grows it (copying it
// each time) whenever the request goes deep: JSON encoding, schema validation and
// Pebble reads together do so on every command. Reusing the most recently idle
// goroutine (last in, first out) keeps work on stacks that have already grown, and the
// garbage collector, which shrinks stacks of goroutines that sit idle, mostly finds the
// busy few in use.
package warmpool

import "sync"

// Pool runs functions on at most max goroutines. The zero value is not usable; use New.
type Pool struct {
	mu     sync.Mutex
	freed  *sync.Cond
	idle   []chan func() // last in, first out
	n, max int
	closed bool
}

// New returns a pool of at most max goroutines (max >= 1), started as work arrives.
func New(max int) *Pool {
	if max < 1 {
		max = 1
	}
	p := &Pool{max: max}
	p.freed = sync.NewCond(&p.mu)
	return p
}

// Go runs fn on an idle goroutine of the pool, the one idle most recently, or on a new
// one while there are fewer than max. When all max are busy it blocks until one is
// free, so a caller feeding the pool from a queue keeps its backlog there. It returns
// false, without running fn, once the pool is closed.
func (p *Pool) Go(fn func()) bool {
	p.mu.Lock()
	for !p.closed && len(p.idle) == 0 && p.n >= p.max {
		p.freed.Wait()
	}
	if p.closed {
		p.mu.Unlock()
		return false
	}
	if k := len(p.idle); k > 0 {
		ch := p.idle[k-1]
		p.idle = p.idle[:k-1]
		p.mu.Unlock()
		ch <- fn // buffered: never blocks
		return true
	}
	p.n++
	p.mu.Unlock()
	ch := make(chan func(), 1)
	ch <- fn
	go p.run(ch)
	return true
}

// Close stops idle goroutines and makes Go refuse work; running functions finish (Wait
// waits for them).
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, ch := range p.idle {
		close(ch)
	}
	p.idle = nil
	p.freed.Broadcast()
}

func (p *Pool) run(ch chan func()) {
	for fn := range ch {
		fn()
		p.mu.Lock()
		if p.closed {
			p.n--
			p.freed.Broadcast()
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, ch)
		p.freed.Signal()
		p.mu.Unlock()
	}
	p.mu.Lock()
	p.n--
	p.freed.Broadcast()
	p.mu.Unlock()
}

// Wait blocks until the pool is closed and every goroutine of it has stopped.
func (p *Pool) Wait() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed || p.n > 0 {
		p.freed.Wait()
	}
}

// Size returns how many goroutines the pool has started and not yet stopped.
func (p *Pool) Size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}
