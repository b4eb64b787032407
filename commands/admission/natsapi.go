package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/cairn-io/cairn"

	"github.com/cairn-io/cairn/commands/internal/warmpool"
	"github.com/nats-io/nats.go"
)

// Request headers understood on cairn.cmd.<verb> (and mirrored by the HTTP gateway).
const (
	HeaderCommandID     = "Cairn-Command-Id"
	HeaderActor         = "Cairn-Actor"
	HeaderCorrelationID = "Cairn-Correlation-Id"
	HeaderCausationID   = "Cairn-Causation-Id"
)

// QueueGroup is the queue group admission subscribes in: with several `cairn serve`
// processes on one NATS cluster, each command is answered by exactly one.
const QueueGroup = "cairn-admission"

// Listener answers commands until ctx ends or Close.
type Listener struct {
	sub  *nats.Subscription
	pool *warmpool.Pool
}

// Listen answers commands on <prefix>.cmd.> until ctx ends or the listener is closed,
// at most concurrency at once, on a pool of long-lived goroutines (warmpool) rather
// than one new goroutine per request.
func (a *Admission) Listen(ctx context.Context, nc *nats.Conn, concurrency int) (*Listener, error) {
	if concurrency <= 0 {
		concurrency = 256
	}
	pool := warmpool.New(concurrency)
	sub, err := nc.QueueSubscribe(a.names.CommandFilter(), QueueGroup, func(m *nats.Msg) {
		pool.Go(func() {
			req := RequestFromMsg(a.names.Verb(m.Subject), m)
			reply := a.submitRecovering(ctx, req)
			if m.Reply == "" {
				return
			}
			body, _ := json.Marshal(reply)
			_ = m.Respond(body)
		})
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("subscribe %s: %w", a.names.CommandFilter(), err)
	}
	// Requests wait here while every worker is busy; beyond this the client's request
	// times out (NATS reports a slow consumer) rather than memory growing without bound.
	_ = sub.SetPendingLimits(64<<10, 256<<20)
	l := &Listener{sub: sub, pool: pool}
	go func() { <-ctx.Done(); l.Close() }()
	return l, nil
}

// submitRecovering is Submit with a panic turned into an internal refusal, logged with
// its stack: one bad command must not take the process (and every other command in
// flight) down. What a panicking command appended before it panicked is in the stream
// and reaches the views as any event does; its retry with the same id is answered from
// there.
func (a *Admission) submitRecovering(ctx context.Context, req Request) (reply Reply) {
	defer func() {
		if p := recover(); p != nil {
			metricPanics.Inc()
			a.log.Error().Str("verb", req.Verb).Str("command_id", req.CommandID).Str("panic", fmt.Sprint(p)).
				Str("stack", string(debug.Stack())).Msg("command handling panicked")
			reply = refused(req.CommandID, cairn.Errorf(cairn.CodeInternal, "%s failed inside admission (a bug, logged); retry with the same command id", req.Verb))
		}
	}()
	return a.Submit(ctx, req)
}

// Close stops taking commands and waits for the ones being answered (which end soon
// once ctx has ended). It may be called more than once. Commands still queued get no answer: their clients time out and
// retry with the same command id, and nothing of them was appended.
func (l *Listener) Close() {
	_ = l.sub.Unsubscribe()
	l.pool.Close()
	l.pool.Wait()
}

// RequestFromMsg reads a command from a NATS message and its Cairn-* headers.
func RequestFromMsg(verb string, m *nats.Msg) Request {
	r := Request{Verb: verb, Body: m.Data}
	if m.Header != nil {
		r.CommandID = m.Header.Get(HeaderCommandID)
		r.Actor = m.Header.Get(HeaderActor)
		r.CorrelationID = m.Header.Get(HeaderCorrelationID)
		r.CausationID = m.Header.Get(HeaderCausationID)
	}
	return r
}
