package policy

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/cairn-io/cairn/commands/admission"
	"github.com/rs/zerolog"
)

// Decision is a policy's recent decision, with its reason (GET /cairn/v1/policies).
type Decision struct {
	At        time.Time `json:"at"`
	Verb      string    `json:"verb,omitempty"`
	Subject   string    `json:"subject"`
	Outcome   string    `json:"outcome"` // ok, or the refusal's code
	Reason    string    `json:"reason"`
	CommandID string    `json:"command_id,omitempty"`
}

// sender sends a policy's commands and remembers what came of them: a command refused
// is not sent again before its backoff (2 s, doubling to 5 min) has passed, so a policy
// never loops on a refusal; the last 50 decisions are kept for the status.
type sender struct {
	mu      sync.Mutex
	backoff map[string]backoff // by command id
	recent  []Decision
}

type backoff struct {
	until time.Time
	wait  time.Duration
}

// submit sends req unless it is backing off from a refusal of it (false then), and
// records the decision on subject with its reason. It reports whether req was accepted.
func (s *sender) submit(ctx context.Context, adm *admission.Admission, req admission.Request, subject, reason string, now func() time.Time, log zerolog.Logger) bool {
	s.mu.Lock()
	if s.backoff == nil {
		s.backoff = map[string]backoff{}
	}
	b := s.backoff[req.CommandID]
	s.mu.Unlock()
	if now().Before(b.until) {
		return false
	}
	r := adm.Submit(ctx, req)
	d := Decision{At: now(), Verb: req.Verb, Subject: subject, Reason: reason, CommandID: req.CommandID, Outcome: "ok"}
	if !r.OK {
		d.Outcome, d.Reason = string(r.Error.Code), reason+"; refused: "+r.Error.Message
		b.wait = min(max(2*b.wait, 2*time.Second), 5*time.Minute)
		b.until = now().Add(b.wait)
	} else {
		b = backoff{}
	}
	metricMoves.WithLabelValues(req.Verb, d.Outcome).Inc()
	log.Info().Str("subject", subject).Str("verb", req.Verb).Str("actor", req.Actor).Str("outcome", d.Outcome).Str("reason", d.Reason).Msg("policy step")
	s.mu.Lock()
	s.backoff[req.CommandID] = b
	s.recent = append(s.recent, d)
	if len(s.recent) > 50 {
		s.recent = s.recent[len(s.recent)-50:]
	}
	s.mu.Unlock()
	return r.OK
}

// retryNow drops the backoffs of the command ids starting with prefix (the situation
// changed: try them at once).
func (s *sender) retryNow(prefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.backoff {
		if strings.HasPrefix(id, prefix) {
			delete(s.backoff, id)
		}
	}
}

// decisions are the recent decisions, newest last.
func (s *sender) decisions() []Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Decision{}, s.recent...)
}
