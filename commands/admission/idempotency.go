package admission

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/projections"
)

// A command id seen before: the first reply again, from the views, the recent replies
// or the reply store; a different request under the same id is refused.

// replyFromViews answers a duplicate delivery from the command's record in the views.
func (a *Admission) replyFromViews(ctx context.Context, req Request, seq uint64) Reply {
	commandID := req.CommandID
	wctx, cancel := context.WithTimeout(ctx, a.opts.ReplyWait)
	defer cancel()
	for {
		target := seq
		if target == 0 {
			last, err := a.store.LastSeq(wctx)
			if err != nil {
				return refused(commandID, cairn.Errorf(cairn.CodeUnavailable, "stream unreadable: %v", err))
			}
			target = last
		}
		if err := a.proj.WaitFor(wctx, target); err != nil {
			return refused(commandID, cairn.Errorf(cairn.CodeUnavailable, "command %s was appended but the views lag; retry", commandID))
		}
		view, err := a.db.Read()
		if err != nil {
			return refused(commandID, cairn.Errorf(cairn.CodeUnavailable, "views unreadable: %v", err))
		}
		rec, ok, err := view.Command(commandID)
		view.Close()
		if err != nil {
			return refused(commandID, err)
		}
		if ok {
			return a.sameRequest(req, rec.Digest, acceptedReply(rec, nil))
		}
		if seq != 0 {
			seq = 0 // the record is on a later sequence than the one reported
		}
		select {
		case <-wctx.Done():
			return refused(commandID, cairn.Errorf(cairn.CodeUnavailable, "command %s was appended but the views lag; retry", commandID))
		case <-time.After(time.Millisecond):
		}
	}
}

// RequestDigest identifies a request for idempotency: the first 128 bits of the SHA-256
// of its verb and its body in a canonical form (keys sorted, no spaces, numbers as
// written, the command_id field left out: the id may come in the body or the header),
// in hex. A command id is bound to the digest of the request that first carried it.
func RequestDigest(verb string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(verb))
	h.Write([]byte{0})
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var obj map[string]any
	if dec.Decode(&obj) == nil && obj != nil {
		delete(obj, "command_id")
		if canon, err := json.Marshal(obj); err == nil { // map keys come out sorted
			body = canon
		}
	}
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// sameRequest answers a command id seen before: with that first reply when the request
// is the same (same digest, or the earlier one predates digests), else with
// idempotency_mismatch.
func (a *Admission) sameRequest(req Request, digest string, first Reply) Reply {
	if digest == "" || digest == req.digest {
		return first
	}
	metricMismatches.Inc()
	return refused(req.CommandID, cairn.Errorf(cairn.CodeIdempotencyMismatch,
		"command id %q was already used for another request (%s with another body, or another verb); use a new command id for a new request", req.CommandID, req.Verb).
		WithDetails(map[string]any{"command_id": req.CommandID}))
}

// remember keeps the reply of a command that appended nothing, here and (with
// Options.Replies) for every serve, so a retry with its id gets the same answer.
func (a *Admission) remember(ctx context.Context, req Request, r Reply) {
	a.recent.put(req.CommandID, req.digest, r, a.opts.Now())
	if a.opts.Replies == nil || req.generated {
		return
	}
	if err := a.opts.Replies.Put(ctx, req.CommandID, StoredReply{Digest: req.digest, Reply: r}); err != nil {
		a.log.Warn().Err(err).Str("command_id", req.CommandID).Msg("reply not shared with the other serves")
	}
}

func acceptedReply(rec projections.CommandRecord, warnings []string) Reply {
	r := Reply{OK: true, CommandID: rec.CommandID, Warnings: warnings}
	for _, e := range rec.Events {
		r.Events = append(r.Events, EventRef{Seq: e.Seq, Type: e.Type, Subject: e.Subject})
	}
	return r
}
