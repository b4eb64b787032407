package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/commands/nodes"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"
)

var metricTransitions = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "cairn_watchdog_transitions_total", Help: "node.set-state commands sent by the heartbeat watchdog."},
	[]string{"state"})

var metricChecks = promauto.NewCounter(prometheus.CounterOpts{
	Name: "cairn_watchdog_checks_total", Help: "Liveness checks the heartbeat watchdog completed (every timeout/4 while its serve holds the lease)."})

// LivenessChange is one state change the watchdog decided.
type LivenessChange struct {
	Node   string
	State  string
	Reason string
	// StatusSeq is the sequence of the node status the change was decided on; it makes
	// the command id deterministic, so two watchdogs deciding the same change collapse.
	StatusSeq uint64
}

// DecideLiveness is the watchdog's pure rule. A node that is online but has not been
// heard from for timeout goes offline; "heard from" is its last heartbeat, or, before
// any, the later of when the watchdog started and when the node got its current state
// (so a restart of serve gives every node a full timeout). An offline node whose last
// heartbeat is newer than its offline state and within timeout comes back online.
func DecideLiveness(nodes []projections.Node, lastSeen map[string]time.Time, started, now time.Time, timeout time.Duration) []LivenessChange {
	var out []LivenessChange
	for _, n := range nodes {
		seen, heard := lastSeen[n.Spec.Name]
		switch n.Status.State {
		case events.StateOnline:
			ref := seen
			if !heard {
				ref = started
				if n.Status.Since.After(ref) {
					ref = n.Status.Since
				}
			}
			if now.Sub(ref) > timeout {
				reason := fmt.Sprintf("no heartbeat for %s (timeout %s)", now.Sub(ref).Round(time.Second), timeout)
				out = append(out, LivenessChange{Node: n.Spec.Name, State: events.StateOffline, Reason: reason, StatusSeq: n.Status.Seq})
			}
		case events.StateOffline:
			if heard && seen.After(n.Status.Since) && now.Sub(seen) <= timeout {
				out = append(out, LivenessChange{Node: n.Spec.Name, State: events.StateOnline, Reason: "heartbeat received", StatusSeq: n.Status.Seq})
			}
		}
	}
	return out
}

// Watchdog turns missed heartbeats into node.set-state commands and back.
type Watchdog struct {
	// Gate reports whether this serve may send commands now (it holds the side-effect
	// lease); nil: always. Heartbeats are tracked either way, so a serve that takes the
	// lease over knows when each node was last heard from.
	Gate func() bool
	// Recovering wraps the heartbeat handler (serve counts and logs its panics and keeps
	// the subscription); nil: the handler as it is.
	Recovering func(what string, h nats.MsgHandler) nats.MsgHandler

	adm     *admission.Admission
	db      *projections.DB
	names   events.Names
	timeout time.Duration
	log     zerolog.Logger
	now     func() time.Time

	mu       sync.Mutex
	lastSeen map[string]time.Time
	started  time.Time
	wake     chan struct{}
}

// NewWatchdog returns a watchdog that marks nodes offline after timeout without a heartbeat.
func NewWatchdog(adm *admission.Admission, db *projections.DB, names events.Names, timeout time.Duration, log zerolog.Logger) *Watchdog {
	return &Watchdog{adm: adm, db: db, names: names, timeout: timeout, log: log, now: time.Now,
		lastSeen: map[string]time.Time{}, wake: make(chan struct{}, 1)}
}

// LastHeartbeat returns when a node's agent was last heard from by this process.
func (w *Watchdog) LastHeartbeat(node string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.lastSeen[node]
	return t, ok
}

// Run subscribes to heartbeats and checks liveness until ctx ends.
func (w *Watchdog) Run(ctx context.Context, nc *nats.Conn) error {
	w.mu.Lock()
	w.started = w.now()
	w.mu.Unlock()
	wrap := w.Recovering
	if wrap == nil {
		wrap = func(_ string, h nats.MsgHandler) nats.MsgHandler { return h }
	}
	sub, err := nc.Subscribe(w.names.HeartbeatFilter(), wrap("heartbeat", func(m *nats.Msg) {
		node, _, _, ok := w.names.ParseStatus(m.Subject)
		var hb events.Heartbeat
		if err := json.Unmarshal(m.Data, &hb); err != nil || !ok || hb.Node != node {
			w.log.Warn().Str("subject", m.Subject).Msg("ignored a malformed heartbeat")
			return
		}
		w.mu.Lock()
		_, known := w.lastSeen[node]
		w.lastSeen[node] = w.now()
		w.mu.Unlock()
		if !known {
			select { // first heartbeat from this node: check at once (it may be offline)
			case w.wake <- struct{}{}:
			default:
			}
		}
	}))
	if err != nil {
		return fmt.Errorf("watchdog: subscribe %s: %w", w.names.HeartbeatFilter(), err)
	}
	defer sub.Unsubscribe()
	interval := w.timeout / 4
	if interval < 100*time.Millisecond {
		interval = 100 * time.Millisecond
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-w.wake:
		}
		w.check(ctx)
	}
}

func (w *Watchdog) check(ctx context.Context) {
	if w.Gate != nil && !w.Gate() {
		return // another serve holds the lease and sends the commands
	}
	view, err := w.db.Read()
	if err != nil {
		w.log.Error().Err(err).Msg("watchdog: views unreadable")
		return
	}
	all, err := view.Nodes()
	view.Close()
	if err != nil {
		w.log.Error().Err(err).Msg("watchdog: nodes unreadable")
		return
	}
	w.mu.Lock()
	seen := make(map[string]time.Time, len(w.lastSeen))
	for k, v := range w.lastSeen {
		seen[k] = v
	}
	started := w.started
	w.mu.Unlock()
	for _, c := range DecideLiveness(all, seen, started, w.now(), w.timeout) {
		body, _ := json.Marshal(nodes.NodeSetState{Name: c.Node, State: c.State, Reason: c.Reason})
		reply := w.adm.Submit(ctx, admission.Request{
			Verb: "node.set-state", Body: body, Actor: "watchdog",
			CommandID: commandID("watchdog", c.Node, strconv.FormatUint(c.StatusSeq, 10), c.State),
		})
		if !reply.OK {
			w.log.Warn().Str("node", c.Node).Str("code", reply.Error.Code).Msg("watchdog: node.set-state refused")
			continue
		}
		metricTransitions.WithLabelValues(c.State).Inc()
		w.log.Info().Str("node", c.Node).Str("state", c.State).Str("reason", c.Reason).Msg("node liveness changed")
	}
	metricChecks.Inc()
}
