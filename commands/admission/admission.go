// Package admission is the command pipeline: it decodes and validates each command
// (size, UTF-8, JSON Schema, command id), runs its verb's handler on a consistent view,
// appends the decided events conditionally on the decision's boundary (deciding again
// when the boundary moved), remembers replies for retried command ids and answers over
// NATS. A refused or malformed command appends nothing. It knows no verb: the families
// register their handlers (commands.New).
package admission

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/agnivade/levenshtein"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/schemas"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"
)

var (
	metricCommands = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_commands_total", Help: "Commands answered, by verb and outcome (ok or the error code)."},
		[]string{"verb", "outcome"})
	metricLatency = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name: "cairn_command_duration_seconds", Help: "Time to answer a command.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"verb"})
	metricConflicts = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_command_append_conflicts_total", Help: "Appends refused because the boundary moved; the command was decided again."},
		[]string{"verb"})
	metricBusy = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_command_append_busy_total", Help: "Appends JetStream refused as busy (too many atomic batches in flight); retried."},
		[]string{"verb"})
	metricPanics = promauto.NewCounter(prometheus.CounterOpts{
		Name: "cairn_command_panics_total", Help: "Commands whose handling panicked (recovered, answered internal, logged with the stack)."})
	metricMismatches = promauto.NewCounter(prometheus.CounterOpts{
		Name: "cairn_command_idempotency_mismatches_total", Help: "Commands refused because their id had been used for another request."})
)

// Request is one command as it reaches admission.
type Request struct {
	Verb          string
	Body          []byte
	CommandID     string // idempotency key; "" = take the body's command_id or make one up
	Actor         string
	CorrelationID string
	CausationID   string
	// ForgetRefusals: a refusal of this request is not remembered under its command id,
	// so the same request sent again is decided anew. For the control plane's own
	// commands (policies), whose deterministic ids would otherwise get back a transient
	// refusal (a node offline a moment) for as long as refusals are remembered.
	ForgetRefusals bool

	// generated is true when admission made the command id up (nobody can retry it).
	generated bool
	// digest is RequestDigest of the verb and body, set by Decode for a client's id.
	digest string
}

// Options tune admission. Zero values take the defaults in parentheses.
type Options struct {
	MaxBody       int           // largest accepted body in bytes (64 KiB)
	MaxAttempts   int           // decisions per command before giving up on contention (100)
	CatchUpWait   time.Duration // how long to wait for the views to move after a conflict (5 s)
	ReplyWait     time.Duration // how long an accepted command waits for its events in the views (5 s)
	AppendTimeout time.Duration // how long one append waits for JetStream's acknowledgement (5 s)
	// Replies shares the replies of commands that appended nothing (refusals, no-ops)
	// between the serves of one NATS cluster, so that a retry with the same command id
	// gets the same answer from any of them (ReplyKV); nil: this process only.
	Replies ReplyStore
	// Deadline bounds a whole command, every wait included (the retry lock, the views
	// catching up, the reply wait): past it the command is answered unavailable, and
	// the client may retry with the same command id (10 s).
	Deadline      time.Duration
	RecentReplies int // refusals remembered for retried command ids (10000, for 15 min)
	Now           func() time.Time
}

// DefaultDeadline bounds a command's whole handling in admission (Options.Deadline).
const DefaultDeadline = 10 * time.Second

// Admission validates commands, decides them against the views and appends their events.
type Admission struct {
	store    *events.Store
	db       *projections.DB
	proj     *projections.Projector
	names    events.Names
	log      zerolog.Logger
	opts     Options
	handlers map[string]decide.Handler
	recent   *recentReplies
	refusals *refusalRing
	// retryLocks serialize the retries of commands that lost the same boundary.
	retryLocks *retryLocks
	// appender groups concurrent multi-event appends into one atomic batch.
	appender *events.GroupAppender
	// claims are the claim subjects of this process's commands under way.
	claims *inflight
}

// New returns admission over the store, the views and the projector that feeds them,
// with no verb yet: Register adds the handlers (commands.New registers every family's).
func New(store *events.Store, db *projections.DB, proj *projections.Projector, log zerolog.Logger, opts Options) *Admission {
	a := newDecider(store.Names(), log, opts)
	a.store, a.db, a.proj = store, db, proj
	a.appender = events.NewGroupAppender(store, a.opts.AppendTimeout)
	return a
}

// newDecider returns admission's decoding and deciding half: the options with their
// defaults, without the store, views or projector (New adds them; Memory keeps its own)
// and without handlers.
func newDecider(names events.Names, log zerolog.Logger, opts Options) *Admission {
	if opts.MaxBody <= 0 {
		opts.MaxBody = 64 << 10
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 100
	}
	if opts.CatchUpWait <= 0 {
		opts.CatchUpWait = 5 * time.Second
	}
	if opts.ReplyWait <= 0 {
		opts.ReplyWait = 5 * time.Second
	}
	if opts.AppendTimeout <= 0 {
		opts.AppendTimeout = 5 * time.Second
	}
	if opts.Deadline <= 0 {
		opts.Deadline = DefaultDeadline
	}
	if opts.RecentReplies <= 0 {
		opts.RecentReplies = 10000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	a := &Admission{names: names, log: log, opts: opts, retryLocks: newRetryLocks(),
		handlers: map[string]decide.Handler{}, claims: newInflight(), recent: newRecentReplies(opts.RecentReplies, 15*time.Minute),
		refusals: newRefusalRing(1000)}
	return a
}

// Register adds a handler; its verb must have a schema commands/<verb>.json.
func (a *Admission) Register(h decide.Handler) {
	if _, err := schemas.Get(schemas.CommandSchemaID(h.Verb)); err != nil {
		panic("commands: " + err.Error())
	}
	a.handlers[h.Verb] = h
}

// suggest is the known verb closest to a mistyped one (edit distance at most 3, the
// closest first, then by name), "" when none is that close.
func (a *Admission) suggest(verb string) string {
	best, dist := "", 4
	for _, v := range a.Verbs() {
		if d := levenshtein.ComputeDistance(verb, v); d < dist {
			best, dist = v, d
		}
	}
	return best
}

// Busy reports whether a command of this process under way has claimed subject (a node
// or port claim not yet in the views): a decision that picks among candidates skips it
// rather than lose the race.
func (a *Admission) Busy(subject string) bool { return a.claims.busy(subject) }

// Verbs lists the verbs admission answers, sorted.
func (a *Admission) Verbs() []string {
	out := make([]string, 0, len(a.handlers))
	for v := range a.handlers {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// Submit answers one command. It never returns an error: every failure is a refused
// Reply with a stable code. A refused command appends nothing; an accepted one has its
// events in the views when Submit returns (unless the views lag by more than ReplyWait,
// which the reply's warnings then say).
func (a *Admission) Submit(ctx context.Context, req Request) Reply {
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, a.opts.Deadline)
	defer cancel()
	reply := a.submit(ctx, req)
	outcome := "ok"
	if !reply.OK {
		outcome = reply.Error.Code
	}
	verb := req.Verb
	if _, known := a.handlers[verb]; !known {
		verb = "unknown"
	}
	metricCommands.WithLabelValues(verb, outcome).Inc()
	metricLatency.WithLabelValues(verb).Observe(time.Since(began).Seconds())
	ev := a.log.Debug()
	if !reply.OK {
		ev = a.log.Info().Str("code", reply.Error.Code).Str("error", reply.Error.Message)
		a.refusals.add(Refusal{At: a.opts.Now(), Verb: req.Verb, CommandID: reply.CommandID, Actor: req.Actor, Error: reply.Error})
	}
	ev.Str("verb", req.Verb).Str("command_id", reply.CommandID).Str("actor", req.Actor).
		Int("events", len(reply.Events)).Dur("took_ms", time.Since(began)).Msg("command")
	return reply
}

func (a *Admission) submit(ctx context.Context, req Request) Reply {
	req, h, err := a.Decode(req)
	if err != nil {
		return refused(req.CommandID, err)
	}
	if r, digest, ok := a.recent.get(req.CommandID, a.opts.Now()); ok {
		return a.sameRequest(req, digest, r)
	}
	if a.opts.Replies != nil && !req.generated {
		stored, ok, err := a.opts.Replies.Get(ctx, req.CommandID)
		if err != nil {
			return refused(req.CommandID, cairn.Errorf(cairn.CodeUnavailable, "replies of earlier attempts unreadable: %v; retry", err))
		}
		if ok {
			return a.sameRequest(req, stored.Digest, stored.Reply)
		}
	}
	if up := a.proj.Stopped(); up != nil {
		// The views cannot move past an event of a newer cairn: nothing can be decided
		// on them (a command appended now would never be in the views to answer it).
		return refused(req.CommandID, cairn.Errorf(cairn.CodeUnavailable, "%v", up))
	}

	var held chan struct{} // the boundary's retry lock, once a conflict made this command wait
	var lost race          // the claims another command of this process held, last attempt
	var raced []string     // the claims of the attempt before
	defer func() {
		if held != nil {
			<-held
		}
	}()
	for attempt := 1; ; attempt++ {
		view, err := a.db.Read()
		if err != nil {
			return refused(req.CommandID, cairn.Errorf(cairn.CodeUnavailable, "views unreadable: %v", err))
		}
		reply, seen, boundary, retry := a.attempt(ctx, h, req, view, &lost)
		view.Close()
		if retry == retryNone {
			return reply
		}
		if retry == retryStale {
			// Nothing appended, nothing conflicted: not an attempt.
			attempt--
			wctx, cancel := context.WithTimeout(ctx, a.opts.CatchUpWait)
			err := a.proj.WaitFor(wctx, lost.stale)
			cancel()
			if err != nil {
				return refused(req.CommandID, cairn.Errorf(cairn.CodeUnavailable,
					"the views did not catch up within %s after a concurrent change; retry", a.opts.CatchUpWait))
			}
			continue
		}
		if retry == retryRace {
			// Another command of this process decided on one of the same ports or
			// nodes a moment ago. The next decision sees it as taken and usually avoids
			// it (an autoplace picks another node, a port the next one); when it takes
			// the same again (a named node), it waits until some command is done.
			// Not an attempt: nothing was appended and nothing conflicted.
			attempt--
			if slices.Equal(lost.claims, raced) {
				select {
				case <-lost.released:
				case <-ctx.Done():
					return refused(req.CommandID, cairn.Errorf(cairn.CodeUnavailable,
						"%s: gave up waiting for another command on the same node or port: %v; retry with the same command id", req.Verb, ctx.Err()))
				}
			}
			raced = lost.claims
			continue
		}
		if retry == retryBusy {
			// Nothing was appended: back off and try again, without waiting for the views.
			metricBusy.WithLabelValues(req.Verb).Inc()
			if attempt >= a.opts.MaxAttempts {
				return refused(req.CommandID, cairn.Errorf(cairn.CodeUnavailable,
					"%s: %s stayed busy for %d attempts; retry with the same command id", req.Verb, a.names.EventsStream(), attempt))
			}
			select {
			case <-ctx.Done():
				return refused(req.CommandID, cairn.Errorf(cairn.CodeUnavailable, "%s: %v", req.Verb, ctx.Err()))
			case <-time.After(time.Millisecond + time.Duration(rand.Int64N(int64(min(attempt, 20))*int64(2*time.Millisecond)))):
			}
			continue
		}
		metricConflicts.WithLabelValues(req.Verb).Inc()
		if attempt >= a.opts.MaxAttempts {
			return refused(req.CommandID, cairn.Errorf(cairn.CodeConflict,
				"%s gave up after %d attempts: other commands kept changing the same state; retry", req.Verb, attempt))
		}
		// The boundary moved after the state we decided on: wait until the views hold
		// that change, back off a little (jitter spreads out competing retries), decide again.
		wctx, cancel := context.WithTimeout(ctx, a.opts.CatchUpWait)
		err = a.proj.WaitBeyond(wctx, seen)
		cancel()
		if err != nil {
			return refused(req.CommandID, cairn.Errorf(cairn.CodeUnavailable,
				"the views did not catch up within %s after a concurrent change; retry", a.opts.CatchUpWait))
		}
		if held == nil {
			// Decide again holding the boundary's retry lock: commands of this process
			// that lost the same boundary then take turns instead of racing again (a
			// command could otherwise keep losing until MaxAttempts). The lock only
			// orders attempts; the conditional append still decides, so commands of other
			// processes on the same stream are safe. Waiting for it respects the
			// command's deadline.
			lock := a.retryLocks.of(boundary)
			select {
			case lock <- struct{}{}:
				held = lock
			case <-ctx.Done():
				return refused(req.CommandID, cairn.Errorf(cairn.CodeUnavailable,
					"%s: gave up waiting for its turn on a contended boundary: %v; retry with the same command id", req.Verb, ctx.Err()))
			}
		}
	}
}

// attempt decides the command on one view and tries to append. seen is the view's
// sequence, boundary the decision's consistency boundary, retry whether and why to
// decide again.
func (a *Admission) attempt(ctx context.Context, h decide.Handler, req Request, view *projections.View, lost *race) (reply Reply, seen uint64, boundary events.Expect, retry retryKind) {
	seen = view.Seq()
	if rec, ok, err := view.Command(req.CommandID); err != nil {
		return refused(req.CommandID, err), seen, boundary, retryNone
	} else if ok {
		return a.sameRequest(req, rec.Digest, acceptedReply(rec, nil)), seen, boundary, retryNone
	}
	d, err := h.Decide(view, a.names, req.Body)
	boundary = d.Expect
	if err != nil || len(d.Events) == 0 {
		// A refusal or a no-op appends nothing, so no expectation guards it: confirm
		// that the view it was decided on is current for the boundary, else decide again.
		if d.Expect.Kind != 0 {
			stale, berr := a.store.Stale(ctx, d.Expect)
			if berr != nil {
				return refused(req.CommandID, cairn.Errorf(cairn.CodeUnavailable, "could not read %s: %v", a.names.EventsStream(), berr)), seen, boundary, retryNone
			}
			if stale {
				return Reply{}, seen, boundary, retryMoved
			}
		}
		r := Reply{OK: true, CommandID: req.CommandID, Warnings: d.Warnings}
		if err != nil {
			r = refused(req.CommandID, err)
		}
		if r.OK || r.Error.Code != cairn.CodeInternal && !req.ForgetRefusals {
			a.remember(ctx, req, r)
		}
		return r, seen, boundary, retryNone
	}
	if claims := claimSubjects(d.Events); len(claims) > 0 {
		ok, released, stale := a.claims.reserve(claims, seen)
		if stale > 0 {
			// Decided on views from before another command's claim on the same port or
			// node landed: its append would only conflict. Decide again on views that
			// hold that claim.
			lost.stale = stale
			return Reply{}, seen, boundary, retryStale
		}
		if !ok {
			lost.claims, lost.released = claims, released
			return Reply{}, seen, boundary, retryRace
		}
		defer func() {
			var landed uint64 // the sequence of the command's last event, once stored
			if reply.OK && len(reply.Events) > 0 {
				landed = reply.Events[len(reply.Events)-1].Seq
			}
			a.claims.release(claims, landed)
		}()
	}
	if d.Expect.Kind == events.ExpectChecks {
		d.Events = a.withCheckCarriers(req.Verb, d.Events, d.Expect.Checks)
	}
	envs, err := events.Seal(events.Meta{CommandID: req.CommandID, CorrelationID: req.CorrelationID,
		CausationID: req.CausationID, Actor: req.Actor, OccurredAt: a.opts.Now(), RequestDigest: req.digest}, d.Events)
	if err != nil {
		return refused(req.CommandID, err), seen, boundary, retryNone
	}
	actx, acancel := context.WithTimeout(ctx, a.opts.AppendTimeout)
	stored, err := a.appender.Append(actx, d.Expect, envs)
	acancel()
	var dup *events.DuplicateError
	switch {
	case errors.Is(err, events.ErrWrongLastSequence):
		return Reply{}, seen, boundary, retryMoved
	case errors.Is(err, events.ErrBusy):
		return Reply{}, seen, boundary, retryBusy
	case errors.As(err, &dup):
		// Another delivery of the same command id got there first: answer with its result.
		return a.replyFromViews(ctx, req, dup.Seq), seen, boundary, retryNone
	case err != nil:
		a.log.Error().Err(err).Str("verb", req.Verb).Str("command_id", req.CommandID).Msg("append failed")
		return refused(req.CommandID, cairn.Errorf(cairn.CodeUnavailable,
			"could not append to %s: %v; retry with the same command id", a.names.EventsStream(), err)), seen, boundary, retryNone
	}
	r := Reply{OK: true, CommandID: req.CommandID, Warnings: d.Warnings}
	for i, env := range envs {
		r.Events = append(r.Events, EventRef{Seq: stored[i].Seq, Type: env.Type, Subject: env.Subject})
	}
	// The reply waits until the views hold the events. Offering them to the projector
	// usually gets them there in one Pebble commit, before the consumer delivers them.
	a.proj.Offer(stored)
	wctx, cancel := context.WithTimeout(ctx, a.opts.ReplyWait)
	defer cancel()
	if err := a.proj.WaitFor(wctx, stored[len(stored)-1].Seq); err != nil {
		r.Warnings = append(r.Warnings, "events are stored but the views have not applied them yet")
	}
	return r, seen, boundary, retryNone
}

// withCheckCarriers adds command.checked events when the command read more subjects
// than its events can carry checks for (one per message of the atomic batch).
func (a *Admission) withCheckCarriers(verb string, drafts []events.Draft, checks events.Checks) []events.Draft {
	subjects := make([]string, len(drafts))
	for i, d := range drafts {
		subjects[i] = d.Subject
	}
	_, missing := events.AssignChecks(subjects, checks)
	if missing == 0 {
		return drafts
	}
	ev := &events.CommandChecked{Verb: verb}
	for _, c := range checks {
		ev.Checks = append(ev.Checks, events.ReadCheck{Subject: c.Subject, Seq: c.Seq})
	}
	for range missing {
		drafts = append(drafts, events.Draft{Subject: a.names.CheckedSubject(), Payload: ev})
	}
	return drafts
}
