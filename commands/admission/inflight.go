package admission

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
	// done is, per subject, the views' sequence holding the last claim on it that was
	// given back: a decision on an older view missed that claim (its append would only
	// conflict), so it decides again at once.
	done map[string]uint64
}

func newInflight() *inflight {
	return &inflight{taken: map[string]struct{}{}, released: make(chan struct{}), done: map[string]uint64{}}
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
//
// A decision made on a view (at viewSeq) older than a claim on one of the subjects that
// was given back meanwhile is refused too, with the sequence the views must reach first
// (stale > 0): decide again on views that hold it.
func (f *inflight) reserve(subjects []string, viewSeq uint64) (ok bool, released <-chan struct{}, stale uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range subjects {
		if _, ok := f.taken[s]; ok {
			return false, f.released, 0
		}
		if f.done[s] > viewSeq {
			return false, nil, f.done[s]
		}
	}
	for _, s := range subjects {
		f.taken[s] = struct{}{}
	}
	return true, nil, 0
}

// release gives back what reserve took; seq is the views' sequence that holds the
// command's claims (0: it appended nothing).
func (f *inflight) release(subjects []string, seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range subjects {
		delete(f.taken, s)
		if seq > f.done[s] {
			f.done[s] = seq
		}
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
