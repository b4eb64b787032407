package admission

import (
	"sync"
	"time"

	"github.com/cairn-io/cairn"
)

// Refusal is one command admission refused, as kept for operators (LINSTOR's error
// reports show them).
type Refusal struct {
	At        time.Time    `json:"at"`
	Verb      string       `json:"verb"`
	CommandID string       `json:"command_id"`
	Actor     string       `json:"actor"`
	Error     *cairn.Error `json:"error"`
}

// refusalRing keeps the last refusals of this process, oldest overwritten first.
type refusalRing struct {
	mu   sync.Mutex
	buf  []Refusal
	next int
	full bool
}

func newRefusalRing(n int) *refusalRing { return &refusalRing{buf: make([]Refusal, n)} }

func (r *refusalRing) add(f Refusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf[r.next] = f
	r.next = (r.next + 1) % len(r.buf)
	r.full = r.full || r.next == 0
}

// newestFirst copies the kept refusals, newest first.
func (r *refusalRing) newestFirst() []Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	out := make([]Refusal, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, r.buf[(r.next-i+len(r.buf))%len(r.buf)])
	}
	return out
}

// RecentRefusals returns the last 1,000 commands this process refused, newest first
// (every serve keeps its own; a refusal is also in the log and in its reply).
func (a *Admission) RecentRefusals() []Refusal { return a.refusals.newestFirst() }
