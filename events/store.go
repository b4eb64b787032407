package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// ExpectKind says which consistency boundary an append is conditional on.
type ExpectKind int

const (
	// ExpectSubject: nothing appended to the subject of the first event since Seq.
	ExpectSubject ExpectKind = iota + 1
	// ExpectFilter: nothing appended to any subject matching Filter since Seq.
	ExpectFilter
	// ExpectStream: nothing appended to the stream since Seq.
	ExpectStream
	// ExpectChecks: nothing appended to any of Checks' subjects since its Seq: the
	// command is conditional on exactly the state it read.
	ExpectChecks
)

// Expect is the consistency boundary of an append: the last sequence the deciding
// command saw on it. Seq 0 means "nothing was ever appended there".
type Expect struct {
	Kind    ExpectKind
	Seq     uint64
	Subject string // for ExpectSubject: the subject (defaults to the first event's)
	Filter  string // for ExpectFilter
	// Checks, for ExpectChecks: one per subject (or filter) the decision read, with the
	// last sequence the view had on it. Sorted and without duplicates (see Checks.Add).
	Checks Checks
}

// Check is one subject (or subject filter, wildcards allowed) and the last sequence
// the deciding view had on it (0: nothing there yet).
type Check struct {
	Subject string
	Seq     uint64
}

// Checks is the read set of a decision.
type Checks []Check

// Add records a read of subject at seq; a second read of the same subject keeps the
// first sequence (a decision reads one view).
func (c Checks) Add(subject string, seq uint64) Checks {
	for _, x := range c {
		if x.Subject == subject {
			return c
		}
	}
	return append(c, Check{Subject: subject, Seq: seq})
}

// ErrTooManyChecks: a decision read more subjects than it appends events, and each
// message of an atomic batch carries one check. A programming error of the handler.
var ErrTooManyChecks = errors.New("events: more checks than events to carry them")

// ErrBusy: JetStream refused the append for now (too many atomic batches in flight);
// nothing was appended, the same append may be retried after a short wait.
var ErrBusy = errors.New("events: stream busy (too many atomic batches in flight)")

// jsErrCodeBatchTooManyInflight is JetStream's err_code for "atomic publish too many
// inflight" (HTTP-style code 429).
const jsErrCodeBatchTooManyInflight = 10210

// ErrWrongLastSequence: the boundary moved since the state the command decided on.
// The caller must catch up and decide again; it must never append blindly.
var ErrWrongLastSequence = errors.New("events: boundary moved (wrong last sequence)")

// DuplicateError: the command id was already appended (within the duplicate window).
// Seq is the stored sequence of the first duplicate when the server says it (0 if not).
type DuplicateError struct{ Seq uint64 }

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("events: command already appended (seq %d)", e.Seq)
}

// Store appends events to the events stream and reads them back.
type Store struct {
	js    jetstream.JetStream
	names Names
}

// NewStore returns a store on js for the deployment's names.
func NewStore(js jetstream.JetStream, names Names) *Store {
	return &Store{js: js, names: names}
}

// Names returns the deployment's subject and stream names.
func (s *Store) Names() Names { return s.names }

// MsgID is the Nats-Msg-Id of the i-th event of a command: derived from the command id
// so a retried command is de-duplicated by JetStream.
func MsgID(commandID string, i int) string { return commandID + "#" + strconv.Itoa(i) }

// Append stores the envelopes of one command atomically (all or none), conditional on
// exp. It returns each envelope as the stream stored it (sequence, subject, encoded
// body), which the caller may hand to the projector (Projector.Offer). Errors: ErrWrongLastSequence
// when the boundary moved, *DuplicateError when the command id was already appended,
// and the transport error otherwise (the append may or may not have happened; the
// caller resolves that through the command id).
func (s *Store) Append(ctx context.Context, exp Expect, envs []Envelope) ([]Raw, error) {
	if len(envs) == 0 {
		return nil, nil
	}
	msgs, err := s.messages(exp, envs)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 1 {
		ack, err := s.js.PublishMsg(ctx, msgs[0])
		if err != nil {
			return nil, mapAppendError(err)
		}
		if ack.Duplicate {
			return nil, &DuplicateError{Seq: ack.Sequence}
		}
		return stored(msgs, ack.Sequence), nil
	}
	ack, err := PublishBatch(ctx, s.js, msgs)
	if err != nil {
		return nil, mapAppendError(err)
	}
	return stored(msgs, ack.Sequence), nil
}

// Pending is one command's append waiting to be grouped with others (AppendGroup).
type Pending struct {
	Expect Expect
	Envs   []Envelope
}

// MaxGroupMessages bounds the messages of one grouped append (JetStream refuses an
// atomic batch of more than 1,000 by default).
const MaxGroupMessages = 1000

// AppendGroup stores the appends of several commands as one atomic batch: all of them
// or none, each conditional on its own boundary (its checks ride on its own messages).
// It is a group commit: an atomic batch on an R1 file stream costs a file store of its
// own, so several commands pay it once. The caller must not group a command whose
// checks cover a subject an earlier one in the group writes (the server evaluates a
// check against the stream before the batch; Overlaps says). Only ExpectChecks and
// ExpectSubject boundaries can be grouped. On any error nothing is stored, and the
// caller learns which command's boundary moved only by appending them one by one.
func (s *Store) AppendGroup(ctx context.Context, group []Pending) ([][]Raw, error) {
	var msgs []*nats.Msg
	for _, p := range group {
		if p.Expect.Kind != ExpectChecks {
			return nil, fmt.Errorf("events: a %v boundary cannot be grouped", p.Expect.Kind)
		}
		m, err := s.messages(p.Expect, p.Envs)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m...)
	}
	if len(msgs) > MaxGroupMessages {
		return nil, fmt.Errorf("events: a group of %d messages is over %d", len(msgs), MaxGroupMessages)
	}
	ack, err := PublishBatch(ctx, s.js, msgs)
	if err != nil {
		return nil, mapAppendError(err)
	}
	all := stored(msgs, ack.Sequence)
	out := make([][]Raw, len(group))
	for i, p := range group {
		out[i], all = all[:len(p.Envs)], all[len(p.Envs):]
	}
	return out, nil
}

// Overlaps reports whether a command with boundary exp must not join a group whose
// commands write the subjects written: one of its checks covers one of them (an equal
// subject, or a filter matching it). Appended in one batch, the check would be taken
// against the stream before the batch and miss the earlier command's event.
func Overlaps(exp Expect, written []string) bool {
	if exp.Kind != ExpectChecks {
		return true
	}
	for _, c := range exp.Checks {
		for _, w := range written {
			if c.Subject == w || subjectMatches(c.Subject, w) {
				return true
			}
		}
	}
	return false
}

// subjectMatches reports whether NATS filter matches subject (tokens, * and >).
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || (tok != "*" && tok != s[i]) {
			return false
		}
	}
	return len(f) == len(s)
}

// messages builds the messages of one command's append with its boundary's headers.
func (s *Store) messages(exp Expect, envs []Envelope) ([]*nats.Msg, error) {
	msgs := make([]*nats.Msg, len(envs))
	for i, env := range envs {
		body, err := Encode(env)
		if err != nil {
			return nil, err
		}
		m := nats.NewMsg(env.Subject)
		m.Data = body
		m.Header.Set(jetstream.MsgIDHeader, MsgID(env.CommandID, i))
		msgs[i] = m
	}
	first := msgs[0].Header
	seqStr := strconv.FormatUint(exp.Seq, 10)
	switch exp.Kind {
	case ExpectChecks:
		if err := placeChecks(msgs, exp.Checks); err != nil {
			return nil, err
		}
	case ExpectSubject:
		first.Set(jetstream.ExpectedLastSubjSeqHeader, seqStr)
		if exp.Subject != "" && exp.Subject != envs[0].Subject {
			first.Set(expectedLastSubjSeqSubjectHeader, exp.Subject)
		}
	case ExpectFilter:
		first.Set(jetstream.ExpectedLastSubjSeqHeader, seqStr)
		first.Set(expectedLastSubjSeqSubjectHeader, exp.Filter)
	case ExpectStream:
		first.Set(jetstream.ExpectedLastSeqHeader, seqStr)
	default:
		return nil, errors.New("events: append without a consistency boundary")
	}
	first.Set(jetstream.ExpectedStreamHeader, s.names.EventsStream())
	return msgs, nil
}

// AssignChecks decides which message of an atomic batch carries which check: one
// Nats-Expected-Last-Subject-Sequence check per message (nats-server 2.14+ checks
// every message of a batch, not only the first). A check on a subject the batch writes
// goes on the first message written there (the server refuses a check on a subject
// already written earlier in the batch); checks on subjects the batch does not write,
// and filters, take the remaining messages in order. It returns, per message, the
// index of its check in checks (-1: none), and how many checks found no message: the
// caller adds that many messages of their own (commands add command.checked events).
func AssignChecks(subjects []string, checks Checks) (assign []int, missing int) {
	assign = make([]int, len(subjects))
	for i := range assign {
		assign[i] = -1
	}
	var rest []int
	for ci, c := range checks {
		if i := slices.Index(subjects, c.Subject); i >= 0 && assign[i] < 0 {
			assign[i] = ci
			continue
		}
		rest = append(rest, ci)
	}
	for _, ci := range rest {
		i := slices.Index(assign, -1)
		if i < 0 {
			missing++
			continue
		}
		assign[i] = ci
	}
	return assign, missing
}

// placeChecks sets the check headers AssignChecks decided; ErrTooManyChecks when
// checks outnumber the messages.
func placeChecks(msgs []*nats.Msg, checks Checks) error {
	subjects := make([]string, len(msgs))
	for i, m := range msgs {
		subjects[i] = m.Subject
	}
	assign, missing := AssignChecks(subjects, checks)
	if missing > 0 {
		return fmt.Errorf("%w: %d checks, %d messages", ErrTooManyChecks, len(checks), len(msgs))
	}
	for i, ci := range assign {
		if ci < 0 {
			continue
		}
		c := checks[ci]
		msgs[i].Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(c.Seq, 10))
		if msgs[i].Subject != c.Subject {
			msgs[i].Header.Set(expectedLastSubjSeqSubjectHeader, c.Subject)
		}
	}
	return nil
}

// stored describes msgs as appended with the last one at sequence last (an atomic
// batch takes consecutive sequences; every message but the last is MidBatch).
func stored(msgs []*nats.Msg, last uint64) []Raw {
	out := make([]Raw, len(msgs))
	for i, m := range msgs {
		out[i] = Raw{Seq: last - uint64(len(msgs)-1-i), Subject: m.Subject, Data: m.Data, MidBatch: i < len(msgs)-1}
	}
	return out
}

// expectedLastSubjSeqSubjectHeader widens Nats-Expected-Last-Subject-Sequence to a
// subject filter (server 2.11+).
const expectedLastSubjSeqSubjectHeader = "Nats-Expected-Last-Subject-Sequence-Subject"

func mapAppendError(err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			return ErrWrongLastSequence
		case jetstreamext.JSErrCodeBatchPublishDuplicateMsgID:
			return &DuplicateError{}
		case jsErrCodeBatchTooManyInflight:
			return ErrBusy
		}
	}
	return err
}

// BoundarySeq returns the current last sequence of a boundary as the stream has it
// (0 when nothing was appended there). Admission uses it to confirm that a refusal was
// decided on current state.
func (s *Store) BoundarySeq(ctx context.Context, exp Expect) (uint64, error) {
	var subject string
	switch exp.Kind {
	case ExpectSubject:
		subject = exp.Subject
	case ExpectFilter:
		subject = exp.Filter
	case ExpectStream:
		return s.LastSeq(ctx)
	case ExpectChecks:
		return 0, errors.New("events: a boundary of several checks has no one sequence (use Stale)")
	default:
		return 0, errors.New("events: no boundary")
	}
	st, err := s.js.Stream(ctx, s.names.EventsStream())
	if err != nil {
		return 0, err
	}
	return lastSeqOf(ctx, st, subject)
}

// lastSeqOf is the sequence of the last message on subject (a filter too) in st, 0 for none.
func lastSeqOf(ctx context.Context, st jetstream.Stream, subject string) (uint64, error) {
	m, err := st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return m.Sequence, nil
}

// Stale reports whether the boundary moved: whether any of its subjects got an event
// after the sequence the decision saw. Admission confirms refusals with it, so every
// read goes to the stream's leader (leaderLastSeqOf): a direct get, which any replica
// may answer, could come from a follower that has not stored the latest event yet and
// confirm a refusal decided on stale views.
func (s *Store) Stale(ctx context.Context, exp Expect) (bool, error) {
	stream := s.names.EventsStream()
	switch exp.Kind {
	case ExpectChecks:
		for _, c := range exp.Checks {
			cur, err := leaderLastSeqOf(ctx, s.js, stream, c.Subject)
			if err != nil || cur != c.Seq {
				return err == nil, err
			}
		}
		return false, nil
	case ExpectSubject, ExpectFilter:
		subject := exp.Subject
		if exp.Kind == ExpectFilter {
			subject = exp.Filter
		}
		cur, err := leaderLastSeqOf(ctx, s.js, stream, subject)
		return err == nil && cur != exp.Seq, err
	}
	cur, err := s.BoundarySeq(ctx, exp) // the stream's info: answered by its leader
	return err == nil && cur != exp.Seq, err
}

// leaderLastSeqOf is the sequence of the last message on subject (a filter too) in
// stream, 0 for none, read through the stream's message get API
// ($JS.API.STREAM.MSG.GET.<stream>), which only the stream's leader answers.
func leaderLastSeqOf(ctx context.Context, js jetstream.JetStream, stream, subject string) (uint64, error) {
	req, err := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{subject})
	if err != nil {
		return 0, err
	}
	prefix := js.Options().APIPrefix
	if prefix == "" {
		prefix = jetstream.DefaultAPIPrefix
	}
	if !strings.HasSuffix(prefix, ".") {
		prefix += "."
	}
	msg, err := js.Conn().RequestWithContext(ctx, prefix+"STREAM.MSG.GET."+stream, req)
	if err != nil {
		return 0, err
	}
	var resp struct {
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, fmt.Errorf("message get on %s: %w", stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == int(jetstream.JSErrCodeMessageNotFound):
		return 0, nil
	case resp.Error != nil:
		return 0, fmt.Errorf("message get on %s: %s (%d)", stream, resp.Error.Description, resp.Error.ErrCode)
	case resp.Message == nil:
		return 0, fmt.Errorf("message get on %s: an answer without a message", stream)
	}
	return resp.Message.Seq, nil
}

// LastSeq returns the last sequence stored in the events stream.
func (s *Store) LastSeq(ctx context.Context) (uint64, error) {
	st, err := s.js.Stream(ctx, s.names.EventsStream())
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// Range selects stored events for reading. Zero values mean unbounded.
type Range struct {
	Subject string    // subject filter (wildcards allowed); "" = every event
	FromSeq uint64    // first sequence (inclusive)
	ToSeq   uint64    // last sequence (inclusive)
	Since   time.Time // first stored time (inclusive), used when FromSeq is 0
	Until   time.Time // last stored time (inclusive)
}

// Raw is a stored message before decoding.
type Raw struct {
	Seq     uint64
	Subject string
	Stored  time.Time
	Data    []byte
	// MidBatch: the message was stored by an atomic batch that goes on after it (read
	// from its headers by the function MidBatch). A command's events, or a group of
	// commands, are one batch: the views must not be committed between its messages.
	MidBatch bool
}

// MidBatch reports whether a stored message with headers h is one of an atomic
// batch's but not its last, from the headers the server keeps on batch messages.
func MidBatch(h nats.Header) bool {
	if len(h) == 0 {
		return false
	}
	return h.Get(jetstreamext.BatchIDHeader) != "" && h.Get(jetstreamext.BatchCommitHeader) == ""
}

// ReadRaw calls fn for each stored message in r, in stream order, up to what the stream
// held when the read began. fn returning false stops the read. It uses an ephemeral
// consumer that needs no acknowledgements and is removed afterwards.
func (s *Store) ReadRaw(ctx context.Context, r Range, fn func(Raw) bool) error {
	cfg := jetstream.ConsumerConfig{
		AckPolicy:         jetstream.AckNonePolicy,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
	}
	if r.Subject != "" && r.Subject != s.names.EventFilter("") {
		cfg.FilterSubject = r.Subject
	}
	switch {
	case r.FromSeq > 0:
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = r.FromSeq
	case !r.Since.IsZero():
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		since := r.Since
		cfg.OptStartTime = &since
	}
	stream := s.names.EventsStream()
	cons, err := s.js.CreateConsumer(ctx, stream, cfg)
	if err != nil {
		return fmt.Errorf("read %s: %w", stream, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.js.DeleteConsumer(dctx, stream, cons.CachedInfo().Name)
	}()
	pending := cons.CachedInfo().NumPending
	if pending == 0 {
		return nil
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return err
	}
	defer it.Stop()
	for pending > 0 {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return err
		}
		meta, err := m.Metadata()
		if err != nil {
			return err
		}
		pending = meta.NumPending
		if r.ToSeq > 0 && meta.Sequence.Stream > r.ToSeq {
			return nil
		}
		if !r.Until.IsZero() && meta.Timestamp.After(r.Until) {
			return nil
		}
		if !fn(Raw{Seq: meta.Sequence.Stream, Subject: m.Subject(), Stored: meta.Timestamp, Data: m.Data(), MidBatch: MidBatch(m.Headers())}) {
			return nil
		}
	}
	return nil
}

// PublishBatch publishes msgs as one atomic batch (jetstreamext.PublishMsgBatch) within
// ctx's deadline: the library waits for the first message's flow-control
// acknowledgement for the JetStream default (5 s) whatever ctx says, so that wait is
// given what is left of the deadline (a server that takes the batch and never answers
// costs the caller its deadline, not 5 s more: TestPublishIsBoundedInTime).
func PublishBatch(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg) (*jetstreamext.BatchAck, error) {
	var opts []jetstreamext.PublishMsgBatchOpt
	if deadline, ok := ctx.Deadline(); ok {
		wait := time.Until(deadline)
		if wait <= 0 {
			return nil, context.DeadlineExceeded
		}
		opts = append(opts, jetstreamext.BatchFlowControl{AckFirst: true, AckTimeout: wait})
	}
	return jetstreamext.PublishMsgBatch(ctx, js, msgs, opts...)
}
