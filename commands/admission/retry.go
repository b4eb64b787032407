package admission

import (
	"hash/fnv"

	"github.com/cairn-io/cairn/events"
)

// Retrying a command whose boundary moved: the striped retry locks and why an attempt
// lost.

// retryLocks are striped locks by consistency boundary for commands that lost a
// conditional append: channels of one slot, so that waiting for one can end with the
// command's context.
type retryLocks [64]chan struct{}

func newRetryLocks() *retryLocks {
	var l retryLocks
	for i := range l {
		l[i] = make(chan struct{}, 1)
	}
	return &l
}

func (l *retryLocks) of(b events.Expect) chan struct{} {
	h := fnv.New32a()
	_, _ = h.Write([]byte{byte(b.Kind)})
	_, _ = h.Write([]byte(b.Subject + "\x00" + b.Filter))
	if len(b.Checks) > 0 {
		// The first subject read: the definition (or node) the command is about.
		_, _ = h.Write([]byte(b.Checks[0].Subject))
	}
	return l[h.Sum32()%uint32(len(l))]
}

// race is what an attempt lost to another command of this process: the claim subjects
// it decided on and a channel closed when some command gives its claims back.
type race struct {
	claims   []string
	released <-chan struct{}
	stale    uint64 // for retryStale: the sequence the views must reach
}

// retryKind says whether and why admission decides a command again.
type retryKind int

const (
	retryNone  retryKind = iota
	retryMoved           // the boundary moved: wait for the views, decide again
	retryBusy            // JetStream was busy: nothing appended, try again shortly
	retryRace            // another command of this process took a port or node decided on: decide again now
	retryStale           // decided on views older than a claim of this process on the same: decide again once they hold it
)
