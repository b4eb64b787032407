package commands

import (
	"sync"

	"github.com/cairn-io/cairn/events"
)

// inflight holds the claim subjects (ports, nodes) of the commands this process is
// deciding or appending right now. It only steers choices: a decision skips a free
// port or a node another command of this process is about to claim, so concurrent
// commands pick different ones instead of all picking the lowest free port (and all
// but one conflicting). Correctness does not depend on it: the claims are conditional
// appends, and commands of other processes meet there.
type inflight struct {
	mu    sync.Mutex
	taken map[string]struct{}
	// released is closed (and replaced) whenever a command gives its subjects back.
	released chan struct{}
}

func newInflight() *inflight {
	return &inflight{taken: map[string]struct{}{}, released: make(chan struct{})}
}

// busy reports whether another command of this process holds subject.
func (f *inflight) busy(subject string) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.taken[subject]
	return ok
}

// reserve takes every subject for one command, or none when another command holds one
// of them: then it returns a channel closed when some command gives its subjects back
// (the command decides again then, or at once if it can avoid the taken ones).
func (f *inflight) reserve(subjects []string) (ok bool, released <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range subjects {
		if _, ok := f.taken[s]; ok {
			return false, f.released
		}
	}
	for _, s := range subjects {
		f.taken[s] = struct{}{}
	}
	return true, nil
}

// release gives back what reserve took.
func (f *inflight) release(subjects []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range subjects {
		delete(f.taken, s)
	}
	close(f.released)
	f.released = make(chan struct{})
}

// claimSubjects are the subjects of a decision's claim events.
func claimSubjects(drafts []events.Draft) []string {
	var out []string
	for _, d := range drafts {
		switch d.Payload.(type) {
		case *events.NodeClaimed, *events.PortClaimed:
			out = append(out, d.Subject)
		}
	}
	return out
}
