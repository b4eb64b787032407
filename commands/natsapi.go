package commands

import (
	"context"
	"encoding/json"
	"fmt"

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

// Listen answers commands on <prefix>.cmd.> until ctx ends. Each request is handled in
// its own goroutine, at most concurrency at once.
func (a *Admission) Listen(ctx context.Context, nc *nats.Conn, concurrency int) (*nats.Subscription, error) {
	if concurrency <= 0 {
		concurrency = 256
	}
	sem := make(chan struct{}, concurrency)
	sub, err := nc.QueueSubscribe(a.names.CommandFilter(), QueueGroup, func(m *nats.Msg) {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			req := RequestFromMsg(a.names.Verb(m.Subject), m)
			reply := a.Submit(ctx, req)
			if m.Reply == "" {
				return
			}
			body, _ := json.Marshal(reply)
			_ = m.Respond(body)
		}()
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", a.names.CommandFilter(), err)
	}
	// Requests wait here while every worker is busy; beyond this the client's request
	// times out (NATS reports a slow consumer) rather than memory growing without bound.
	_ = sub.SetPendingLimits(64<<10, 256<<20)
	go func() { <-ctx.Done(); _ = sub.Drain() }()
	return sub, nil
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
