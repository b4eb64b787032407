package admission

import (
	"container/list"
	"sync"
	"time"

	"github.com/cairn-io/cairn"
)

// EventRef names one appended event in a reply.
type EventRef struct {
	Seq     uint64 `json:"seq"`
	Type    string `json:"type"`
	Subject string `json:"subject"`
}

// Reply is the answer to every command, over NATS and HTTP alike.
type Reply struct {
	OK        bool         `json:"ok"`
	CommandID string       `json:"command_id"`
	Events    []EventRef   `json:"events,omitempty"`
	Warnings  []string     `json:"warnings,omitempty"`
	Error     *cairn.Error `json:"error,omitempty"`
}

func refused(commandID string, err error) Reply {
	return Reply{OK: false, CommandID: commandID, Error: cairn.AsError(err)}
}

// recentReplies remembers the replies of commands that appended nothing (refusals and
// no-ops), so that a retried command id gets its first reply back. Accepted commands
// need no such memory: their record lives in the views. Bounded by count and age.
type recentReplies struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	order *list.List // of *recentEntry, oldest first
	byID  map[string]*list.Element
}

type recentEntry struct {
	id     string
	at     time.Time
	digest string
	reply  Reply
}

func newRecentReplies(max int, ttl time.Duration) *recentReplies {
	return &recentReplies{max: max, ttl: ttl, order: list.New(), byID: map[string]*list.Element{}}
}

func (r *recentReplies) get(id string, now time.Time) (Reply, string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	el, ok := r.byID[id]
	if !ok {
		return Reply{}, "", false
	}
	e := el.Value.(*recentEntry)
	if now.Sub(e.at) > r.ttl {
		r.order.Remove(el)
		delete(r.byID, id)
		return Reply{}, "", false
	}
	return e.reply, e.digest, true
}

func (r *recentReplies) put(id, digest string, reply Reply, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byID[id]; ok {
		return // the first reply wins
	}
	r.byID[id] = r.order.PushBack(&recentEntry{id: id, at: now, digest: digest, reply: reply})
	for r.order.Len() > r.max {
		old := r.order.Front()
		r.order.Remove(old)
		delete(r.byID, old.Value.(*recentEntry).id)
	}
}
