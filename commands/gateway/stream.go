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
	fmt.Fprintf(w, ": cairn events from sequence %d\n\n", from)
	flusher.Flush()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	size := g.StreamBuffer
	if size <= 0 {
		size = DefaultStreamBuffer
	}
	recs := make(chan events.Record, size)
	done := make(chan error, 1)
	go func() {
		done <- g.Store.Follow(ctx, subject, from, match, func(rec events.Record) error {
			select {
			case recs <- rec:
				return nil
			default:
				return errSubscriberSlow
			}
		})
	}()
	keepalive := time.NewTicker(streamKeepalive)
	defer keepalive.Stop()
	next := from // the sequence to resume from
	for {
		select {
		case rec := <-recs:
			data, _ := json.Marshal(rec)
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", rec.Seq, rec.Type, data); err != nil {
				return
			}
			next = rec.Seq + 1
			if len(recs) == 0 {
				flusher.Flush()
			}
		case <-keepalive.C:
			fmt.Fprint(w, ": keepalive\n\n")
			flusher.Flush()
		case err := <-done:
			for len(recs) > 0 { // what was read before the cut still goes out
				rec := <-recs
				data, _ := json.Marshal(rec)
				fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", rec.Seq, rec.Type, data)
				next = rec.Seq + 1
			}
			if err != nil && r.Context().Err() == nil {
				why := err.Error()
				if errors.Is(err, errSubscriberSlow) {
					why = fmt.Sprintf("this subscriber fell %d events behind and was cut off; reconnect with Last-Event-ID: %d", size, next-1)
				}
				data, _ := json.Marshal(map[string]any{"error": why, "resume_after": next - 1})
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
