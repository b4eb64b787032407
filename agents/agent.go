// Package agents is the node agent: one per host, it consumes its own node's desired
// state (<prefix>.node.<node>.>, latest value per subject), carries it out, and reports
// what it observes on <prefix>.status.<node>.>. The loop is level-triggered: on start
// it receives the latest desired state of every subject, and after every reconnect it
// reconciles every subject it holds again, so a missed message is never a lost change.
// Subjects are reconciled by a bounded pool of workers (Options.Workers), one call per
// subject at a time, the latest message winning over older ones still queued.
package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cairn-io/cairn/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Version is reported in heartbeats.
var Version = "dev"

// Reconciler carries out one desired-state subject. Later kinds (drbd, zpool) plug in
// here. Reconcile must be idempotent: it may see the same desired state again.
type Reconciler interface {
	Reconcile(ctx context.Context, subject string, desired []byte) error
}

// Options configure an agent.
type Options struct {
	Node              string
	Names             events.Names
	HeartbeatInterval time.Duration // (5 s)
	// AllowExtFiles are the path prefixes the node's reconciler writes external files
	// under, announced in every heartbeat.
	AllowExtFiles []string
	Log           zerolog.Logger
	Reconciler    Reconciler // nil: desired state is only recorded
	// Workers bounds how many subjects are reconciled at once (8).
	Workers int
	// RevisionDir keeps the highest desired-state revision seen per subject, with its
	// body, across restarts and removals ("" = in memory only; see revisions).
	RevisionDir string
}

// Agent is a running node agent.
type Agent struct {
	opts Options
	nc   *nats.Conn
	js   jetstream.JetStream

	work *workers
	revs *revisions
}

// New returns an agent on an open connection. Open it with the node's inbox prefix,
// nats.CustomInboxPrefix(opts.Names.NodeInbox(opts.Node)): a per-node NATS user
// (cairn serve --auth) may receive replies on that prefix only.
func New(nc *nats.Conn, opts Options) (*Agent, error) {
	if opts.Node == "" {
		return nil, errors.New("agent: --node is required")
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 5 * time.Second
	}
	if opts.Workers <= 0 {
		opts.Workers = 8
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	rec := opts.Reconciler
	if rec == nil {
		rec = noReconciler{}
	}
	revs, err := openRevisions(opts.RevisionDir)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a := &Agent{opts: opts, nc: nc, js: js, revs: revs, work: newWorkers(opts.Workers, rec, opts.Log.With().Str("node", opts.Node).Logger())}
	// After a reconnect the ordered consumer resumes where it stopped; reconcile every
	// subject again so that whatever happened on the host meanwhile is corrected.
	prev := nc.Opts.ReconnectedCB
	nc.SetReconnectHandler(func(c *nats.Conn) {
		if prev != nil {
			prev(c)
		}
		opts.Log.Info().Str("node", opts.Node).Msg("reconnected: reconciling every resource again")
		a.work.all()
	})
	return a, nil
}

type noReconciler struct{}

func (noReconciler) Reconcile(context.Context, string, []byte) error { return nil }

// Desired returns the desired-state subjects the agent holds, sorted.
func (a *Agent) Desired() []string {
	out := a.work.subjects()
	sort.Strings(out)
	return out
}

// Run consumes desired state and sends heartbeats until ctx ends. It attaches first
// (see attach) and pulls from the node's own consumer; when that consumer goes away (a
// serve or the NATS cluster lost it, another attach replaced it) it attaches again,
// which delivers the latest desired state of every subject again (level-triggered).
func (a *Agent) Run(ctx context.Context) error {
	log := a.opts.Log.With().Str("node", a.opts.Node).Logger()
	a.work.run(ctx)
	lost := make(chan struct{}, 1)
	consume := func() (jetstream.ConsumeContext, error) {
		cons, err := a.attach(ctx, log)
		if err != nil {
			return nil, err
		}
		return cons.Consume(func(m jetstream.Msg) {
			h := m.Headers()
			a.receive(log, m.Subject(), h.Get(events.EpochHeader), h.Get(events.LeaseHeader), h.Get(events.RevisionHeader), m.Data())
		}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrNoHeartbeat) {
				log.Warn().Err(err).Msg("desired-state consumer lost: attaching again")
				select {
				case lost <- struct{}{}:
				default:
				}
			}
		}))
	}
	cc, err := consume()
	if err != nil {
		return fmt.Errorf("agent %s: consume %s: %w", a.opts.Node, a.opts.Names.NodeFilter(a.opts.Node), err)
	}
	defer func() { cc.Stop() }()

	log.Info().Dur("heartbeat_interval_ms", a.opts.HeartbeatInterval).Msg("agent running")
	tick := time.NewTicker(a.opts.HeartbeatInterval)
	defer tick.Stop()
	for {
		a.heartbeat(log)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-lost:
			cc.Stop()
			if cc, err = consume(); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("agent %s: attach again: %w", a.opts.Node, err)
			}
		}
	}
}

// attach asks the control plane for this node's desired-state consumer
// (<prefix>.agent.<node>.attach, answered by any serve: events.AttachAgentConsumer),
// retrying until it answers or ctx ends. With no serve listening at all (a serve older
// than attach, or tests without one) it creates the consumer itself, which works where
// its NATS user may (not with serve --auth).
func (a *Agent) attach(ctx context.Context, log zerolog.Logger) (jetstream.Consumer, error) {
	stream := a.opts.Names.NodesStream()
	for attempt := 1; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		msg, err := a.nc.RequestWithContext(rctx, a.opts.Names.AgentAttach(a.opts.Node), nil)
		cancel()
		var name string
		switch {
		case err == nil:
			var r struct {
				Consumer string `json:"consumer"`
				Error    string `json:"error"`
				Warning  string `json:"warning"`
			}
			if jerr := json.Unmarshal(msg.Data, &r); jerr != nil || r.Consumer == "" {
				err = fmt.Errorf("attach refused: %s (%v)", r.Error, jerr)
			}
			if r.Warning != "" {
				log.Warn().Msg(r.Warning)
			}
			name = r.Consumer
		case errors.Is(err, nats.ErrNoResponders):
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			name, err = events.AttachAgentConsumer(cctx, a.js, a.opts.Names, a.opts.Node, 0)
			ccancel()
		}
		if err == nil {
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			cons, cerr := a.js.Consumer(cctx, stream, name)
			ccancel()
			if cerr == nil {
				log.Info().Str("consumer", name).Msg("attached to the desired-state consumer")
				return cons, nil
			}
			err = cerr
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if le := a.nc.LastError(); le != nil && strings.Contains(le.Error(), "Permissions Violation") {
			return nil, fmt.Errorf("%w (the NATS user may not attach node %s: is this the node's own credentials file?)", le, a.opts.Node)
		}
		if strings.Contains(err.Error(), "Permissions Violation") || attempt >= 60 {
			return nil, err
		}
		wait := min(time.Duration(attempt)*200*time.Millisecond, 5*time.Second)
		log.Warn().Err(err).Int("attempt", attempt).Dur("retry_in_ms", wait).Msg("cannot attach yet")
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// receive hands a desired-state message to the workers unless its revision is older
// than one already seen for the subject (events.RevisionHeader): such a message (a
// serve whose views lag published it after a newer one) is dropped and counted; when
// the agent holds nothing for the subject yet (a restart, and the stream's latest
// message is the older one) the body of the newest revision seen is used instead. A
// message whose lease token (events.LeaseHeader) is older than the newest one seen on
// any of the node's subjects (a deposed leader's late publish) is dropped the same way
// whatever its revision, and counted apart.
func (a *Agent) receive(log zerolog.Logger, subject, epoch, leaseHeader, header string, data []byte) {
	rev, err := parseRevision(header)
	if err == nil {
		var token uint64
		if token, err = parseRevision(leaseHeader); err == nil {
			a.receiveChecked(log, subject, epoch, token, rev, data)
			return
		}
	}
	metricStale.Inc()
	log.Error().Err(err).Str("subject", subject).Msg("desired state with a malformed revision or lease token: dropped")
}

func (a *Agent) receiveChecked(log zerolog.Logger, subject, epoch string, token, rev uint64, data []byte) {
	v, m, err := a.revs.admit(subject, epoch, token, rev, data, a.work.holds(subject))
	switch {
	case err != nil:
		// Not recorded, so not acted on: the next message (or a restart) tries again.
		log.Error().Err(err).Str("subject", subject).Msg("desired state not recorded: not carried out")
	case v == fenced:
		metricFenced.Inc()
		log.Warn().Str("subject", subject).Uint64("lease_token", token).Uint64("revision", rev).Msg("desired state from a deposed leader (an older lease token than one already seen): dropped")
	case v == stale:
		metricStale.Inc()
		log.Warn().Str("subject", subject).Uint64("revision", rev).Uint64("seen", m.rev).Msg("desired state older than one already carried out: dropped")
	case v == restore:
		metricStale.Inc()
		log.Warn().Str("subject", subject).Uint64("revision", rev).Uint64("seen", m.rev).Msg("the stream's latest desired state is older than one already carried out: using that one")
		a.work.put(subject, m.body)
	default:
		log.Debug().Str("subject", subject).Uint64("revision", rev).Int("bytes", len(data)).Msg("desired state")
		a.work.put(subject, append([]byte{}, data...))
	}
}

func (a *Agent) heartbeat(log zerolog.Logger) {
	hb := events.Heartbeat{Node: a.opts.Node, SentAt: time.Now().UTC(), AgentVersion: Version, Desired: len(a.work.subjects()),
		AllowExtFiles: a.opts.AllowExtFiles}
	body, _ := json.Marshal(hb)
	subject := a.opts.Names.Status(a.opts.Node, "node", a.opts.Node)
	if err := a.nc.Publish(subject, body); err != nil {
		log.Warn().Err(err).Msg("heartbeat not sent")
	}
}
