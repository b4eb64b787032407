// Package agents is the node agent: one per host, it consumes its own node's desired
// state (<prefix>.node.<node>.>, latest value per subject), carries it out, and reports
// what it observes on <prefix>.status.<node>.>. The loop is level-triggered: on start
// and after every reconnect it receives the latest desired state of every subject, so a
// missed message is never a lost change.
package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/cairn-io/cairn/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Version is reported in heartbeats.
var Version = "dev"

// Heartbeat is what an agent publishes on <prefix>.status.<node>.node.<node>.
type Heartbeat struct {
	Node         string    `json:"node"`
	SentAt       time.Time `json:"sent_at"`
	AgentVersion string    `json:"agent_version,omitempty"`
	Desired      int       `json:"desired"`
}

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
	Log               zerolog.Logger
	Reconciler        Reconciler // nil: desired state is only recorded
}

// Agent is a running node agent.
type Agent struct {
	opts Options
	nc   *nats.Conn
	js   jetstream.JetStream

	mu      sync.Mutex
	desired map[string][]byte
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
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return &Agent{opts: opts, nc: nc, js: js, desired: map[string][]byte{}}, nil
}

// Desired returns the desired-state subjects the agent holds, sorted.
func (a *Agent) Desired() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.desired))
	for s := range a.desired {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Run consumes desired state and sends heartbeats until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	log := a.opts.Log.With().Str("node", a.opts.Node).Logger()
	cons, err := a.js.OrderedConsumer(ctx, a.opts.Names.NodesStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{a.opts.Names.NodeFilter(a.opts.Node)},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return fmt.Errorf("agent %s: consume %s: %w", a.opts.Node, a.opts.Names.NodeFilter(a.opts.Node), err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		subject := m.Subject()
		a.mu.Lock()
		if len(m.Data()) == 0 {
			delete(a.desired, subject)
		} else {
			a.desired[subject] = append([]byte(nil), m.Data()...)
		}
		a.mu.Unlock()
		log.Info().Str("subject", subject).Int("bytes", len(m.Data())).Msg("desired state")
		if a.opts.Reconciler != nil {
			if err := a.opts.Reconciler.Reconcile(ctx, subject, m.Data()); err != nil {
				log.Error().Err(err).Str("subject", subject).Msg("reconcile failed")
			}
		}
	})
	if err != nil {
		return fmt.Errorf("agent %s: %w", a.opts.Node, err)
	}
	defer cc.Stop()

	log.Info().Dur("heartbeat_interval", a.opts.HeartbeatInterval).Msg("agent running")
	tick := time.NewTicker(a.opts.HeartbeatInterval)
	defer tick.Stop()
	for {
		a.heartbeat(log)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (a *Agent) heartbeat(log zerolog.Logger) {
	a.mu.Lock()
	hb := Heartbeat{Node: a.opts.Node, SentAt: time.Now().UTC(), AgentVersion: Version, Desired: len(a.desired)}
	a.mu.Unlock()
	body, _ := json.Marshal(hb)
	subject := a.opts.Names.Status(a.opts.Node, "node", a.opts.Node)
	if err := a.nc.Publish(subject, body); err != nil {
		log.Warn().Err(err).Msg("heartbeat not sent")
	}
}
