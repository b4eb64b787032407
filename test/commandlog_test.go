package test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
)

// sent is one command of a load and what came of it.
type sent struct {
	id, verb string
	first    time.Time // first send
	acked    time.Time // the final answer
	answered bool
	ok       bool
	code     string
	seqs     []uint64
}

// commandLog sends commands over NATS as a client that retries does (an unanswered or
// `unavailable` command again with the same command id) and remembers every one, so
// that checkStored can hold the stream to the answers.
type commandLog struct {
	nc  *nats.Conn
	mu  sync.Mutex
	all []*sent
}

// send sends verb with a new command id until it is answered (other than unavailable)
// or deadline passes.
func (l *commandLog) send(verb, body string, deadline time.Duration) *sent {
	c := &sent{id: uuid.Must(uuid.NewV7()).String(), verb: verb, first: time.Now()}
	l.mu.Lock()
	l.all = append(l.all, c)
	l.mu.Unlock()
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		m := nats.NewMsg("cairn.cmd." + verb)
		m.Data = []byte(body)
		m.Header.Set("Cairn-Command-Id", c.id)
		resp, err := l.nc.RequestMsg(m, 3*time.Second)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue // unanswered: the same command id again
		}
		var r reply
		if json.Unmarshal(resp.Data, &r) != nil {
			continue
		}
		if !r.OK && r.Error.Code == "unavailable" {
			time.Sleep(50 * time.Millisecond)
			continue // may or may not be stored: the same command id again
		}
		l.mu.Lock()
		c.answered, c.ok, c.acked = true, r.OK, time.Now()
		if !r.OK {
			c.code = r.Error.Code
		}
		for _, e := range r.Events {
			c.seqs = append(c.seqs, e.Seq)
		}
		l.mu.Unlock()
		return c
	}
	return c
}

// checkStored holds the stored history (storedCommands) to the answers: every
// acknowledged command's events stored once, at the sequences its answer named; nothing
// of a refused one; every command answered. It returns how many were acknowledged.
func (l *commandLog) checkStored(t *testing.T, stored map[string][]uint64, last uint64) int {
	t.Helper()
	acked, refused, unknown := 0, 0, 0
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.all {
		switch {
		case c.ok:
			acked++
			assert.Equal(t, c.seqs, stored[c.id], "acknowledged %s %s", c.verb, c.id)
		case c.answered:
			refused++
			assert.Empty(t, stored[c.id], "refused %s %s (%s) has events", c.verb, c.id, c.code)
		default:
			unknown++
			t.Logf("no final answer: %s %s, first sent %s, stored at %v", c.verb, c.id, c.first.Format(time.RFC3339Nano), stored[c.id])
		}
	}
	t.Logf("%d commands acknowledged, %d refused, %d without a final answer; %d events", acked, refused, unknown, last)
	assert.Zero(t, unknown, "commands without a final answer after the retries")
	return acked
}
