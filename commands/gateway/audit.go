// Package gateway is the operators' HTTP API: reads of every view, commands as POST,
// the audit log, metrics and health under /cairn/v1/, and LINSTOR's REST API v1 under
// /v1/ (package linstor). Commands travel over NATS to admission like any
// other client's, so the gateway holds no rules of its own.
package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/events"
)

// The views' digest and the event history (audit queries).

func (g *Gateway) digest(w http.ResponseWriter, r *http.Request) {
	d, err := g.DB.Digest()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// listEvents serves the audit log: ?subject=&type=&actor=&command_id=&from_seq=&to_seq=
// &since=&until= (RFC 3339) &limit= (default 100, at most 10000). The answer is
// {"events": [...], "next": S} with next the from_seq of the following page when the
// page is full (absent otherwise). A query for a command id the views know reads only
// that command's events (the views index every accepted command's sequences).
func (g *Gateway) listEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rng, match, limit, err := ParseAuditQuery(q.Get, 100)
	if err != nil {
		writeError(w, err)
		return
	}
	if match.CommandID != "" && g.DB != nil {
		if from, to, ok := g.commandSeqs(match.CommandID); ok {
			rng.FromSeq, rng.ToSeq = max(rng.FromSeq, from), min(nonZero(rng.ToSeq, to), to)
			if rng.FromSeq > rng.ToSeq {
				writeJSON(w, http.StatusOK, map[string]any{"events": []events.Record{}})
				return
			}
		}
	}
	out := []events.Record{}
	err = g.Store.Audit(r.Context(), rng, match, limit, func(rec events.Record) bool {
		out = append(out, rec)
		return true
	})
	if err != nil {
		writeError(w, cairn.Errorf(cairn.CodeUnavailable, "read events: %v", err))
		return
	}
	resp := map[string]any{"events": out}
	if limit > 0 && len(out) == limit {
		resp["next"] = out[len(out)-1].Seq + 1
	}
	writeJSON(w, http.StatusOK, resp)
}

// commandSeqs is the range of sequences of an accepted command's events, from the views.
func (g *Gateway) commandSeqs(id string) (from, to uint64, ok bool) {
	v, err := g.DB.Read()
	if err != nil {
		return 0, 0, false
	}
	defer v.Close()
	rec, ok, err := v.Command(id)
	if err != nil || !ok || len(rec.Events) == 0 {
		return 0, 0, false
	}
	from, to = rec.Events[0].Seq, rec.Events[0].Seq
	for _, e := range rec.Events {
		from, to = min(from, e.Seq), max(to, e.Seq)
	}
	return from, to, true
}

func nonZero(v, otherwise uint64) uint64 {
	if v == 0 {
		return otherwise
	}
	return v
}

// ParseAuditQuery reads audit filters from named parameters (HTTP query or CLI flags).
// Errors are invalid_argument naming the parameter.
func ParseAuditQuery(get func(string) string, defaultLimit int) (events.Range, events.Match, int, error) {
	var rng events.Range
	var err error
	rng.Subject = get("subject")
	parseSeq := func(name string) uint64 {
		s := get(name)
		if s == "" || err != nil {
			return 0
		}
		v, perr := strconv.ParseUint(s, 10, 64)
		if perr != nil {
			err = cairn.InvalidField(name, "%s must be a sequence number, got %q", name, s)
		}
		return v
	}
	parseTime := func(name string) time.Time {
		s := get(name)
		if s == "" || err != nil {
			return time.Time{}
		}
		t, perr := time.Parse(time.RFC3339Nano, s)
		if perr != nil {
			err = cairn.InvalidField(name, "%s must be an RFC 3339 time, got %q", name, s)
		}
		return t
	}
	rng.FromSeq = parseSeq("from_seq")
	rng.ToSeq = parseSeq("to_seq")
	rng.Since = parseTime("since")
	rng.Until = parseTime("until")
	limit := defaultLimit
	if s := get("limit"); s != "" && err == nil {
		l, perr := strconv.Atoi(s)
		if perr != nil || l < 0 || l > 10000 {
			err = cairn.InvalidField("limit", "limit must be 0..10000, got %q", s)
		}
		limit = l
	}
	if err == nil && rng.ToSeq > 0 && rng.FromSeq > rng.ToSeq {
		err = cairn.InvalidField("from_seq", "from_seq %d is after to_seq %d", rng.FromSeq, rng.ToSeq)
	}
	return rng, events.Match{Type: get("type"), Actor: get("actor"), CommandID: get("command_id")}, limit, err
}
