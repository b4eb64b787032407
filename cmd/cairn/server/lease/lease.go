// Package lease elects the one `cairn serve` that runs the control plane's side effects
// (the dispatcher, the heartbeat watchdog's commands, the pool reaction, and every
// policy to come) when several serves share a NATS cluster. Admission stays
// active-active; only what acts on the world on the control plane's own initiative
// needs one actor.
//
// The lease is a key in a JetStream key-value bucket whose entries expire TTL after
// their last write (the bucket's MaxAge, enforced by the NATS servers). A serve takes
// the lease by creating the key (kv.Create: it fails while the key exists) and keeps it
// by updating it with the revision it last wrote (kv.Update: compare-and-set). The
// revision at which a serve took the lease is the fencing token it stamps on what it
// publishes. See docs/adr/0001-leader-lease.md for why two leaders cannot act at once.
package lease

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"
)

var (
	metricLeader = promauto.NewGauge(prometheus.GaugeOpts{Name: "cairn_leader",
		Help: "1 while this serve holds the side-effect lease (dispatcher, watchdog, policies)."})
	metricClockStep = promauto.NewGauge(prometheus.GaugeOpts{Name: "cairn_lease_clock_step_seconds",
		Help: "The largest forward step of the lease bucket's stream leader's wall clock against this serve's clock seen between two renewals (over TTL/8; the lease assumes under TTL/2)."})
	metricChanges = promauto.NewCounterVec(prometheus.CounterOpts{Name: "cairn_lease_changes_total",
		Help: "Lease transitions of this serve: acquired, lost (a renewal refused: the entry moved), released; renewal_unanswered counts renewals that got no answer (kept and tried again)."}, []string{"change"})
)

// Key is the lease's key in its bucket.
const Key = "leader"

// DefaultTTL is how long a lease outlives its last renewal on the NATS servers.
const DefaultTTL = 5 * time.Second

// Options configure a Lease.
type Options struct {
	// Bucket is the key-value bucket (created when missing, with MaxAge TTL).
	Bucket string
	// Holder names this serve in the lease (and in logs, metrics and GET /cairn/v1/leader).
	Holder string
	// TTL is the lease's time to live after each renewal (DefaultTTL). Renewals come
	// every TTL/4; the holder acts only until TTL/2 after the start of its last
	// successful renewal (see Leading), which leaves TTL/2 for clock rate differences,
	// pauses between the check and the act, and the servers' own expiry timing.
	TTL      time.Duration
	Replicas int
	Log      zerolog.Logger
	// Now is a monotonic clock (nil: time.Now, whose readings carry a monotonic part).
	Now func() time.Time
	// TakeOverOwn lets this serve take over a lease held under its own Holder name (a
	// previous run of it that crashed) without waiting for the TTL. Only safe where no
	// other process can run under that name on the same event stream: the embedded
	// server, whose store only one serve can open.
	TakeOverOwn bool
	// Eligible, when set, is asked before every campaign and renewal and by Leading:
	// while it returns an error this serve does not campaign, Leading answers false, and
	// a holder releases the lease at its next step (within TTL/4, logged with the reason)
	// so that an eligible serve takes over. It must be cheap (Leading calls it). A serve whose views
	// stopped at an event of a newer cairn (a rolling upgrade) is not eligible: it would
	// act on views that miss what the newer serves appended.
	Eligible func() error
}

// Lease campaigns for and keeps the side-effect lease. The zero value is not usable:
// use New.
type Lease struct {
	js   jetstream.JetStream
	opts Options

	mu       sync.Mutex
	kv       jetstream.KeyValue
	token    uint64    // revision at which this serve took the lease; 0 when not leading
	rev      uint64    // revision of its last write
	validTo  time.Time // it may act until then (local clock)
	lost     chan struct{}
	gained   chan struct{}
	observed Info // the last lease entry read (any holder)
	// lastMono and lastStored are the start (this serve's clock) and the stored time (the
	// bucket's stream leader's wall clock) of the last successful renewal; drift is the
	// largest forward step seen between the two clocks (see checkClock).
	lastMono, lastStored time.Time
	drift                time.Duration
}

// Info is what GET /cairn/v1/leader shows.
type Info struct {
	Holder string `json:"holder,omitempty"` // "" when nobody holds the lease
	Token  uint64 `json:"token,omitempty"`  // the holder's fencing token
	// This is true when this serve is the holder (and may act now).
	This bool `json:"this"`
	// Revision is the lease entry's latest revision.
	Revision uint64 `json:"revision,omitempty"`
	TTLMS    int64  `json:"ttl_ms"`
	// ClockStepMS is the largest forward step this serve has seen the bucket's stream
	// leader's wall clock take against its own clock between two renewals (0: none over
	// TTL/8). The lease assumes steps under TTL/2 (docs/adr/0001-leader-lease.md).
	ClockStepMS int64 `json:"clock_step_ms,omitempty"`
}

// New returns a lease on js. It does not campaign until Run.
func New(js jetstream.JetStream, opts Options) *Lease {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	return &Lease{js: js, opts: opts, lost: make(chan struct{}), gained: make(chan struct{})}
}

// value is what the holder writes: its name and its token (the creating revision is
// only known after the create, so a renewal carries it).
func value(holder string, token uint64) []byte { return []byte(fmt.Sprintf("%s %d", holder, token)) }

func parseValue(b []byte) (holder string, token uint64) {
	var h string
	var t uint64
	if _, err := fmt.Sscanf(string(b), "%s %d", &h, &t); err != nil {
		return string(b), 0
	}
	return h, t
}

// ErrTTLMismatch is returned by Prepare (and Run) when the bucket's TTL is not this
// serve's: every serve of a cluster must use the same TTL.
var ErrTTLMismatch = errors.New("lease TTL mismatch")

// Prepare opens the lease bucket, creating it with this serve's TTL when it is missing.
// It refuses (ErrTTLMismatch, naming both values) a bucket whose TTL differs from
// Options.TTL: a serve with a shorter TTL would act while another's lease is still
// valid on the servers, and one that rewrote the bucket's TTL would shorten a running
// holder's lease under it. The bucket is never changed here (SetTTL changes it).
func (l *Lease) Prepare(ctx context.Context) error {
	_, err := l.bucket(ctx)
	return err
}

// Run campaigns for the lease and keeps it until ctx ends; then it releases it (deletes
// the key with the last revision) so that another serve takes over at once. Renewals
// (and campaigns) start every TTL/4, counted from the start of the previous one: a slow
// one does not push the next one later.
func (l *Lease) Run(ctx context.Context) error {
	kv, err := l.bucket(ctx)
	if err != nil {
		return err
	}
	period := l.opts.TTL / 4
	for {
		start := time.Now()
		if err := l.eligible(); err != nil {
			l.stepAside(ctx, kv, err)
		} else {
			l.step(ctx, kv)
		}
		select {
		case <-ctx.Done():
			l.release(kv)
			return nil
		case <-time.After(time.Until(start.Add(period))):
		}
	}
}

// bucket returns the lease bucket (Prepare's contract), opening it once.
func (l *Lease) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	l.mu.Lock()
	kv := l.kv
	l.mu.Unlock()
	if kv != nil {
		return kv, nil
	}
	for attempt := 1; ; attempt++ {
		kv, err := l.open(ctx)
		if err == nil {
			l.mu.Lock()
			l.kv = kv
			l.mu.Unlock()
			return kv, nil
		}
		if errors.Is(err, ErrTTLMismatch) || ctx.Err() != nil {
			return nil, err
		}
		l.opts.Log.Warn().Err(err).Int("attempt", attempt).Msg("lease bucket not ready; retrying")
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// open opens the bucket, or creates it with this serve's TTL, and checks its TTL.
func (l *Lease) open(ctx context.Context) (jetstream.KeyValue, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kv, err := l.js.KeyValue(cctx, l.opts.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = l.js.CreateKeyValue(cctx, jetstream.KeyValueConfig{Bucket: l.opts.Bucket, History: 1,
			TTL: l.opts.TTL, Replicas: l.opts.Replicas, Description: "cairn side-effect lease"})
		if errors.Is(err, jetstream.ErrBucketExists) { // another serve created it meanwhile
			kv, err = l.js.KeyValue(cctx, l.opts.Bucket)
		}
	}
	if err != nil {
		return nil, err
	}
	st, err := kv.Status(cctx)
	if err != nil {
		return nil, err
	}
	if st.TTL() != l.opts.TTL && l.opts.TakeOverOwn {
		// The embedded server: no other serve can use this bucket, so none holds a
		// lease this change could shorten under it.
		if err := setTTL(cctx, l.js, l.opts.Bucket, l.opts.TTL, l.opts.Replicas, l.opts.Holder); err != nil {
			return nil, fmt.Errorf("lease bucket %s: TTL %s to %s: %w", l.opts.Bucket, st.TTL(), l.opts.TTL, err)
		}
		l.opts.Log.Info().Dur("from_ms", st.TTL()).Dur("to_ms", l.opts.TTL).Msg("lease TTL changed (embedded NATS: one serve)")
		return kv, nil
	}
	if st.TTL() != l.opts.TTL {
		return nil, fmt.Errorf("%w: the lease bucket %s has TTL %s, this serve's --lease-ttl is %s: every serve of a cluster must use the same lease TTL. "+
			"Start this serve with --lease-ttl %s, or change it for all: stop every serve, run `cairn lease set-ttl %s`, start them with --lease-ttl %s",
			ErrTTLMismatch, l.opts.Bucket, st.TTL(), l.opts.TTL, st.TTL(), l.opts.TTL, l.opts.TTL)
	}
	return kv, nil
}

// SetTTL changes the TTL of the lease bucket on js (created when missing). It refuses
// while any serve holds the lease (the key exists): a holder's lease would change under
// it. Stop every serve first.
func SetTTL(ctx context.Context, js jetstream.JetStream, bucket string, ttl time.Duration, replicas int) error {
	return setTTL(ctx, js, bucket, ttl, replicas, "")
}

// setTTL is SetTTL that also changes it while holder (a crashed earlier run of this
// serve, on the embedded server) holds the lease.
func setTTL(ctx context.Context, js jetstream.JetStream, bucket string, ttl time.Duration, replicas int, holder string) error {
	if ttl <= 0 {
		return fmt.Errorf("ttl: must be positive, got %s", ttl)
	}
	kv, err := js.KeyValue(ctx, bucket)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		_, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, History: 1, TTL: ttl, Replicas: max(replicas, 1),
			Description: "cairn side-effect lease"})
		return err
	case err != nil:
		return err
	}
	if e, err := kv.Get(ctx, Key); err == nil {
		if h, _ := parseValue(e.Value()); h != holder || holder == "" {
			return fmt.Errorf("serve %s holds the lease: stop every serve before changing the lease TTL", h)
		}
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return err
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return fmt.Errorf("lease bucket %s: unexpected status %T", bucket, st)
	}
	cfg := bs.Config()
	cfg.TTL = ttl
	_, err = js.UpdateKeyValue(ctx, cfg)
	return err
}

// step renews the lease when held, else tries to take it.
func (l *Lease) step(ctx context.Context, kv jetstream.KeyValue) {
	start := l.opts.Now()
	cctx, cancel := context.WithTimeout(ctx, l.opts.TTL/2)
	defer cancel()
	l.mu.Lock()
	token, rev := l.token, l.rev
	l.mu.Unlock()
	if token != 0 {
		nrev, err := kv.Update(cctx, Key, value(l.opts.Holder, token), rev)
		if err != nil {
			if ctx.Err() != nil {
				return // stopping: Run releases the lease (deletes it) right after
			}
			adopted, ok := l.renewalFailed(cctx, kv, token, err)
			if !ok {
				return
			}
			// Our own renewal, stored late: renew from it at once (the validity still
			// counts from this step's start).
			if nrev, err = kv.Update(cctx, Key, value(l.opts.Holder, token), adopted); err != nil {
				return // the next step decides again
			}
		}
		l.mu.Lock()
		if l.token == token {
			lapsed := !l.opts.Now().Before(l.validTo)
			l.rev, l.validTo = nrev, start.Add(l.opts.TTL/2)
			if lapsed && l.opts.Now().Before(l.validTo) { // acting again: parts start anew
				close(l.gained)
				l.gained = make(chan struct{})
			}
		}
		l.mu.Unlock()
		l.observe(Info{Holder: l.opts.Holder, Token: token, Revision: nrev})
		if e, err := kv.Get(cctx, Key); err == nil && e.Revision() == nrev {
			l.checkClock(start, e.Created())
		}
		return
	}
	nrev, err := kv.Create(cctx, Key, value(l.opts.Holder, 0))
	if err != nil {
		e, gerr := kv.Get(cctx, Key)
		switch {
		case gerr == nil:
			h, t := parseValue(e.Value())
			if t == 0 {
				t = e.Revision()
			}
			l.observe(Info{Holder: h, Token: t, Revision: e.Revision()})
			if !l.opts.TakeOverOwn || h != l.opts.Holder {
				return
			}
			// Our own earlier run's lease: take it over by compare-and-set.
			if nrev, err = kv.Update(cctx, Key, value(l.opts.Holder, 0), e.Revision()); err != nil {
				return
			}
		case errors.Is(gerr, jetstream.ErrKeyNotFound):
			l.observe(Info{})
			return
		default:
			return
		}
	}
	// Taken: the create's revision is the fencing token; write it into the entry at once
	// so that others can read it (this first renewal also proves the CAS path works).
	urev, err := kv.Update(cctx, Key, value(l.opts.Holder, nrev), nrev)
	if err != nil {
		l.opts.Log.Warn().Err(err).Msg("lease taken but its first renewal failed; campaigning again")
		return
	}
	l.mu.Lock()
	l.token, l.rev, l.validTo = nrev, urev, start.Add(l.opts.TTL/2)
	close(l.gained)
	l.gained = make(chan struct{})
	l.mu.Unlock()
	metricLeader.Set(1)
	metricChanges.WithLabelValues("acquired").Inc()
	l.observe(Info{Holder: l.opts.Holder, Token: nrev, Revision: urev})
	if e, err := kv.Get(cctx, Key); err == nil && e.Revision() == urev {
		l.checkClock(start, e.Created()) // the baseline: a step before the first renewal counts
	}
	l.opts.Log.Info().Str("holder", l.opts.Holder).Uint64("token", nrev).Dur("ttl_ms", l.opts.TTL).Msg("lease acquired: this serve runs the side effects")
}

// renewalFailed decides what a failed renewal means. A compare-and-set refused because
// the entry moved loses the lease, unless the entry is this serve's own (name and token):
// a renewal that timed out here but was stored after all (a nats-server paused while it
// held the request), whose revision is adopted. Any other failure (a timeout, no
// responders: the bucket's stream leader paused or being elected) keeps the token and
// is tried again at the next renewal; meanwhile Leading is false once the last
// successful renewal is too old, and nobody else can have taken the lease while the
// entry still holds this serve's revision.
// It returns the adopted revision and true when the entry was this serve's own.
func (l *Lease) renewalFailed(ctx context.Context, kv jetstream.KeyValue, token uint64, err error) (uint64, bool) {
	if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		metricChanges.WithLabelValues("renewal_unanswered").Inc()
		l.opts.Log.Warn().Err(err).Uint64("token", token).Msg("lease renewal unanswered: trying again (not acting until one succeeds)")
		return 0, false
	}
	if e, gerr := kv.Get(ctx, Key); gerr == nil {
		if h, t := parseValue(e.Value()); h == l.opts.Holder && t == token {
			l.mu.Lock()
			if l.token == token {
				l.rev = e.Revision()
			}
			l.mu.Unlock()
			l.opts.Log.Info().Uint64("token", token).Uint64("revision", e.Revision()).Msg("lease: a renewal stored late was this serve's own; renewing from it")
			return e.Revision(), true
		}
	}
	l.lose(fmt.Sprintf("renewal failed: %v", err))
	return 0, false
}

// checkClock compares how far the bucket's stream leader's wall clock moved between two
// renewals (the stored times of their writes) with how far this serve's clock moved
// between their starts. A forward step of the server's clock makes the entry written
// before it expire that much early, which the lease's margin (TTL/2) covers only for
// steps under TTL/2: a difference of more than TTL/8 is reported (a warning, the metric
// cairn_lease_clock_step_seconds, GET /cairn/v1/leader's clock_step_ms), and one of
// TTL/2 or more at error, as the assumption broken.
func (l *Lease) checkClock(mono, stored time.Time) {
	l.mu.Lock()
	prevMono, prevStored := l.lastMono, l.lastStored
	l.lastMono, l.lastStored = mono, stored
	l.mu.Unlock()
	if prevMono.IsZero() || prevStored.IsZero() {
		return
	}
	step := stored.Sub(prevStored) - mono.Sub(prevMono)
	if step <= l.opts.TTL/8 {
		return
	}
	l.mu.Lock()
	if step > l.drift {
		l.drift = step
		metricClockStep.Set(step.Seconds())
	}
	l.mu.Unlock()
	ev := l.opts.Log.Warn()
	if step >= l.opts.TTL/2 {
		ev = l.opts.Log.Error()
	}
	ev.Dur("step_ms", step).Dur("ttl_ms", l.opts.TTL).
		Msg("the lease bucket's stream leader's clock stepped forward against this serve's: an entry written before the step expires that much early (the lease assumes steps under TTL/2)")
}

func (l *Lease) observe(i Info) {
	l.mu.Lock()
	l.observed = i
	l.mu.Unlock()
}

// lose gives up leadership (a renewal failed, or Leading found it expired).
func (l *Lease) lose(why string) {
	l.mu.Lock()
	if l.token == 0 {
		l.mu.Unlock()
		return
	}
	token := l.token
	l.token, l.rev, l.validTo = 0, 0, time.Time{}
	// Clock steps are measured between renewals of one holding: a step while another
	// serve held the lease did not shorten this one's (and is the other's to see).
	l.lastMono, l.lastStored = time.Time{}, time.Time{}
	close(l.lost)
	l.lost = make(chan struct{})
	l.mu.Unlock()
	metricLeader.Set(0)
	metricChanges.WithLabelValues("lost").Inc()
	l.opts.Log.Warn().Str("holder", l.opts.Holder).Uint64("token", token).Str("why", why).Msg("lease lost: side effects stop")
}

func (l *Lease) eligible() error {
	if l.opts.Eligible == nil {
		return nil
	}
	return l.opts.Eligible()
}

// stepAside is a step of a serve that may not lead (Options.Eligible): it releases the
// lease if it holds it, does not campaign, and reads who holds it (for Info).
func (l *Lease) stepAside(ctx context.Context, kv jetstream.KeyValue, why error) {
	l.mu.Lock()
	holding := l.token != 0
	l.mu.Unlock()
	if holding {
		l.opts.Log.Warn().Err(why).Msg("this serve may not lead: releasing the lease")
		l.release(kv)
	}
	cctx, cancel := context.WithTimeout(ctx, l.opts.TTL/2)
	defer cancel()
	e, err := kv.Get(cctx, Key)
	switch {
	case err == nil:
		h, t := parseValue(e.Value())
		l.observe(Info{Holder: h, Token: t, Revision: e.Revision()})
	case errors.Is(err, jetstream.ErrKeyNotFound):
		l.observe(Info{})
	}
}

// release deletes the key if this serve still holds it, so another takes over at once.
func (l *Lease) release(kv jetstream.KeyValue) {
	l.mu.Lock()
	token, rev := l.token, l.rev
	l.token, l.rev, l.validTo = 0, 0, time.Time{}
	if token != 0 {
		close(l.lost)
		l.lost = make(chan struct{})
	}
	l.mu.Unlock()
	if token == 0 {
		return
	}
	metricLeader.Set(0)
	metricChanges.WithLabelValues("released").Inc()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := kv.Delete(ctx, Key, jetstream.LastRevision(rev))
	if err != nil {
		// A renewal cut short by the stop may have landed after all: if the entry is
		// still ours (our name and token), delete it at its current revision.
		if e, gerr := kv.Get(ctx, Key); gerr == nil {
			if h, t := parseValue(e.Value()); h == l.opts.Holder && t == token {
				err = kv.Delete(ctx, Key, jetstream.LastRevision(e.Revision()))
			}
		}
	}
	if err != nil {
		l.opts.Log.Warn().Err(err).Msg("lease not released; it expires after its TTL")
		return
	}
	l.opts.Log.Info().Uint64("token", token).Msg("lease released")
}

// Leading returns this serve's fencing token and true while it holds the lease and its
// last renewal is recent enough to act on (see Options.TTL). Every side effect checks it
// right before acting. Past that, it answers false but keeps the lease: a renewal that
// was slow but succeeded (compare-and-set on the revision it last wrote, so nobody took
// the lease meanwhile) makes it valid again; a renewal that fails loses it. While
// Options.Eligible returns an error it answers false.
func (l *Lease) Leading() (uint64, bool) {
	l.mu.Lock()
	token, valid := l.token, l.validTo
	l.mu.Unlock()
	if token == 0 || !l.opts.Now().Before(valid) || l.eligible() != nil {
		return 0, false
	}
	return token, true
}

// TTL is the lease's time to live.
func (l *Lease) TTL() time.Duration { return l.opts.TTL }

// Settle waits until this serve holds the lease or another holder is seen, at most
// timeout: a single serve then starts with its side effects running.
func (l *Lease) Settle(ctx context.Context, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, ok := l.Leading(); ok {
			return
		}
		l.mu.Lock()
		other := l.observed.Holder != "" && l.observed.Holder != l.opts.Holder
		l.mu.Unlock()
		if other {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Gained returns a channel closed the next time this serve takes the lease; Lost one
// closed the next time it loses or releases it.
func (l *Lease) Gained() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gained
}

// Lost: see Gained.
func (l *Lease) Lost() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Info returns who holds the lease as last seen, and whether it is this serve.
func (l *Lease) Info() Info {
	token, leading := l.Leading()
	l.mu.Lock()
	defer l.mu.Unlock()
	i := l.observed
	i.TTLMS = l.opts.TTL.Milliseconds()
	i.ClockStepMS = l.drift.Milliseconds()
	if leading {
		i.Holder, i.Token, i.This = l.opts.Holder, token, true
	}
	return i
}

func (l *Lease) runRecovering(name string, ctx context.Context, part func(context.Context)) {
	defer func() {
		if p := recover(); p != nil {
			l.opts.Log.Error().Str("part", name).Str("panic", fmt.Sprint(p)).Str("stack", string(debug.Stack())).
				Msg("a part run under the lease panicked; running it again in 1s")
		}
	}()
	part(ctx)
}

// While runs part whenever this serve holds the lease, with a context that ends when
// the lease is lost (or ctx ends), and starts it again at the next acquisition. It
// returns when ctx ends.
func (l *Lease) While(ctx context.Context, name string, part func(ctx context.Context)) {
	for {
		gained := l.Gained()
		if _, ok := l.Leading(); !ok {
			select {
			case <-ctx.Done():
				return
			case <-gained:
			}
		}
		lost := l.Lost()
		if _, ok := l.Leading(); !ok {
			continue
		}
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			// A part that returns or panics while the lease is held runs again a
			// second later: a bug must not leave a side effect silently stopped.
			for pctx.Err() == nil {
				l.runRecovering(name, pctx, part)
				select {
				case <-pctx.Done():
				case <-time.After(time.Second):
				}
			}
		}()
		l.opts.Log.Debug().Str("part", name).Msg("started under the lease")
		// Leading also expires the lease by the clock: check it while waiting.
		tick := time.NewTicker(l.opts.TTL / 8)
	wait:
		for {
			select {
			case <-ctx.Done():
				break wait
			case <-lost:
				break wait
			case <-tick.C:
				if _, ok := l.Leading(); !ok {
					break wait
				}
			}
		}
		tick.Stop()
		cancel()
		<-done
		l.opts.Log.Debug().Str("part", name).Msg("stopped: the lease is gone")
		if ctx.Err() != nil {
			return
		}
	}
}
