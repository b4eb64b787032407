package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
)

// DefaultStreamBuffer is how many events a subscriber of the event stream may be behind
// before it is cut off (Gateway.StreamBuffer).
const DefaultStreamBuffer = 1024

// streamKeepalive is how often an idle event stream sends a comment (proxies close
// connections that stay silent).
var streamKeepalive = 15 * time.Second

var errSubscriberSlow = errors.New("subscriber too slow")

// streamEvents serves GET /cairn/v1/events/stream: the events as Server-Sent Events,
// one per message (id: the stream sequence, event: the type, data: the record as the
// audit log shows it), from the sequence after Last-Event-ID (a reconnecting client
// resumes with no gap and no duplicate), else from ?from_seq=, else from the next event
// stored. Filters: ?type=, ?actor=, ?command_id=, and one of ?subject= (wildcards
// allowed), ?node= (the node's subject, cairn.ev.node.<node>) or ?resource= (the
// definition's, cairn.ev.rd.<resource>). Each subscriber reads its own ordered consumer
// and may be StreamBuffer events behind; one slower than that is sent an event "error"
// naming the sequence to resume from, and cut off, so it never holds memory or slows the
// others. Idle, a comment is sent every 15 s.
func (g *Gateway) streamEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, subject, match, err := g.streamQuery(r.Context(), q.Get, r.Header.Get("Last-Event-ID"))
	if err != nil {
		writeError(w, err)
		return
	}
	g.sse(w, r, from, "events", func(ctx context.Context, push func(uint64, string, []byte) error) error {
		return g.Store.Follow(ctx, subject, from, match, func(rec events.Record) error {
			data, _ := json.Marshal(rec)
			return push(rec.Seq, rec.Type, data)
		})
	})
}

// streamStatus serves GET /cairn/v1/status/stream: the agents' reports (replica states,
// resync progress, storage pools, shared pools, heartbeats) as Server-Sent Events, as
// the event stream serves events: id the status stream's sequence (resume after
// Last-Event-ID), event the report's kind (drbd, sp, zpool, node), data {"seq",
// "subject", "node", "kind", "id", "stored_at", "report"}. Filters: ?node=, ?kind=,
// ?id= (the resource or pool); ?from_seq=new starts with the next report (default: every
// subject's latest first). The status stream keeps each subject's latest report, so
// a resumed client gets the latest of what changed meanwhile.
func (g *Gateway) streamStatus(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	names := g.Store.Names()
	var from uint64
	var err error
	switch {
	case r.Header.Get("Last-Event-ID") != "":
		from, err = strconv.ParseUint(strings.TrimSpace(r.Header.Get("Last-Event-ID")), 10, 64)
		from++
	case q.Get("from_seq") == "new":
		from = events.FromNew // only what is reported from now on
	case q.Get("from_seq") != "":
		from, err = strconv.ParseUint(q.Get("from_seq"), 10, 64)
	default:
		from = 0 // every subject's latest report, then what comes
	}
	if err != nil {
		writeError(w, cairn.InvalidField("from_seq", "Last-Event-ID and from_seq must be a stream sequence"))
		return
	}
	tok := func(s string) string {
		if s == "" {
			return "*"
		}
		return events.Token(s)
	}
	subject := fmt.Sprintf("%s.status.%s.%s.%s", names.Prefix, tok(q.Get("node")), tok(q.Get("kind")), tok(q.Get("id")))
	g.sse(w, r, from, "reports", func(ctx context.Context, push func(uint64, string, []byte) error) error {
		return g.Store.FollowStatus(ctx, subject, from, func(raw events.Raw) error {
			node, kind, id, _ := names.ParseStatus(raw.Subject)
			report := json.RawMessage(raw.Data)
			if !json.Valid(report) {
				report = json.RawMessage("null")
			}
			data, _ := json.Marshal(map[string]any{"seq": raw.Seq, "subject": raw.Subject, "node": node, "kind": kind, "id": id,
				"stored_at": raw.Stored, "report": report})
			return push(raw.Seq, kind, data)
		})
	})
}

// sse answers r as a Server-Sent Events stream of what follow pushes (id, event, data),
// each subscriber with its own buffer of StreamBuffer messages: one that falls further
// behind is sent an event "error" naming where to resume, and cut off.
func (g *Gateway) sse(w http.ResponseWriter, r *http.Request, from uint64, what string, follow func(ctx context.Context, push func(id uint64, event string, data []byte) error) error) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, cairn.Errorf(cairn.CodeInternal, "the connection cannot stream"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, ": cairn %s from sequence %d\n\n", what, from)
	flusher.Flush()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	size := g.StreamBuffer
	if size <= 0 {
		size = DefaultStreamBuffer
	}
	type message struct {
		id    uint64
		event string
		data  []byte
	}
	msgs := make(chan message, size)
	done := make(chan error, 1)
	go func() {
		done <- follow(ctx, func(id uint64, event string, data []byte) error {
			select {
			case msgs <- message{id, event, data}:
				return nil
			default:
				return errSubscriberSlow
			}
		})
	}()
	keepalive := time.NewTicker(streamKeepalive)
	defer keepalive.Stop()
	var last uint64 // the last id sent
	if from > 0 && from != events.FromNew {
		last = from - 1
	}
	write := func(m message) error {
		_, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", m.id, m.event, m.data)
		last = m.id
		return err
	}
	for {
		select {
		case m := <-msgs:
			if write(m) != nil {
				return
			}
			if len(msgs) == 0 {
				flusher.Flush()
			}
		case <-keepalive.C:
			fmt.Fprint(w, ": keepalive\n\n")
			flusher.Flush()
		case err := <-done:
			for len(msgs) > 0 { // what was read before the cut still goes out
				_ = write(<-msgs)
			}
			if err != nil && r.Context().Err() == nil {
				why := err.Error()
				if errors.Is(err, errSubscriberSlow) {
					why = fmt.Sprintf("this subscriber fell %d messages behind and was cut off; reconnect with Last-Event-ID: %d", size, last)
				}
				data, _ := json.Marshal(map[string]any{"error": why, "resume_after": last})
				fmt.Fprintf(w, "event: error\ndata: %s\n\n", data)
			}
			flusher.Flush()
			return
		case <-r.Context().Done():
			return
		}
	}
}

// streamQuery reads the event stream's start and filters; lastEventID, when set, wins
// over from_seq.
func (g *Gateway) streamQuery(ctx context.Context, get func(string) string, lastEventID string) (from uint64, subject string, match events.Match, err error) {
	seq := func(name, s string) uint64 {
		n, perr := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if perr != nil && err == nil {
			err = cairn.InvalidField(name, "%s must be a stream sequence, got %q", name, s)
		}
		return n
	}
	switch {
	case lastEventID != "":
		from = seq("Last-Event-ID", lastEventID) + 1
	case get("from_seq") != "":
		from = seq("from_seq", get("from_seq"))
	default:
		last, lerr := g.Store.LastSeq(ctx)
		if lerr != nil {
			return 0, "", match, cairn.Errorf(cairn.CodeUnavailable, "read events: %v", lerr)
		}
		from = last + 1
	}
	names := g.Store.Names()
	set := 0
	for _, f := range []struct{ name, subject string }{
		{"subject", get("subject")},
		{"node", ifSet(get("node"), func(n string) string { return names.Event("node", n) })},
		{"resource", ifSet(get("resource"), func(n string) string { return names.Event("rd", n) })},
	} {
		if f.subject != "" {
			set++
			subject = f.subject
		}
	}
	if set > 1 && err == nil {
		err = cairn.InvalidField("subject", "filter by one of subject, node and resource")
	}
	return from, subject, events.Match{Type: get("type"), Actor: get("actor"), CommandID: get("command_id")}, err
}

func ifSet(s string, f func(string) string) string {
	if s == "" {
		return ""
	}
	return f(s)
}

// promotionEvents serves LINSTOR's GET /v1/events/drbd/promotion (golinstor
// client/sse.go, EventService.DRBDPromotion): an event "may-promote-change" with
// {"resource_name", "node_name", "may_promote"} whenever a replica's may_promote, as its
// agent reports it from DRBD's events2, differs from the last one this stream sent for
// it; every replica's current one first. The id is the status stream's sequence; a
// client resuming with Last-Event-ID gets the changes after it.
func (g *Gateway) promotionEvents(w http.ResponseWriter, r *http.Request) {
	var from uint64
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		n, err := strconv.ParseUint(strings.TrimSpace(id), 10, 64)
		if err != nil {
			writeError(w, cairn.InvalidField("Last-Event-ID", "Last-Event-ID must be a stream sequence, got %q", id))
			return
		}
		from = n + 1
	}
	subject := g.Store.Names().Prefix + ".status.*.drbd.*"
	g.sse(w, r, from, "may-promote changes", func(ctx context.Context, push func(uint64, string, []byte) error) error {
		sent := map[string]bool{}
		return g.Store.FollowStatus(ctx, subject, from, func(raw events.Raw) error {
			var st drbd.Status
			if json.Unmarshal(raw.Data, &st) != nil || st.MayPromote == nil || st.Resource == "" {
				return nil
			}
			key := st.Resource + "\x00" + st.Node
			if prev, ok := sent[key]; ok && prev == *st.MayPromote {
				return nil
			}
			sent[key] = *st.MayPromote
			data, _ := json.Marshal(map[string]any{"resource_name": st.Resource, "node_name": st.Node, "may_promote": *st.MayPromote})
			return push(raw.Seq, "may-promote-change", data)
		})
	})
}
