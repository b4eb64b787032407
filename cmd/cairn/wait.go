package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/storage/zpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

// waitCmd waits for the cluster to reach a state, so that scripts (and the README) can
// go on once it has: `cairn wait resource r1` after replica.add.
func waitCmd() *cobra.Command {
	var natsURL, creds string
	var timeout time.Duration
	c := &cobra.Command{Use: "wait", Short: "Wait until the cluster reaches a state (for scripts): wait resource|pool NAME"}
	c.PersistentFlags().StringVar(&natsURL, "nats", defaultNATS, "NATS server URL")
	c.PersistentFlags().StringVar(&creds, "creds", "", "NATS credentials file")
	c.PersistentFlags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait")
	var goneAfter time.Duration
	c.PersistentFlags().DurationVar(&goneAfter, "node-gone-after", 15*time.Second, "a node the resource left whose agent sends no heartbeat for this long is not waited for (it tears the resource down when it is back)")
	names := func() events.Names { return events.NewNames(prefix) }
	c.AddCommand(&cobra.Command{
		Use:   "resource NAME",
		Short: "Wait until every node of resource NAME carried out its desired state and DRBD settled",
		Long: `Wait until every node of resource NAME carried out the desired state that reflects the
definition's last event (its agent reports it applied at that revision or later), every
disk is UpToDate (Diskless on diskless replicas), every peer sharing a disk is Connected
with no resync under way, and nodes the resource left have torn it down, unless their
agent is gone (no heartbeat for --node-gone-after: it tears the resource down when it is
back). Progress goes to stderr whenever what it waits for changes.

Exit status: 0 settled, 1 not settled within --timeout (the message says what is
missing) or no such resource, 2 no answer from NATS.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			hb := newHeartbeats(goneAfter)
			return watch(cmd, natsURL, creds, timeout, name, names().Event("rd", name), "resource definition "+name, "drbd",
				func(last uint64, lastType string) watcher {
					return &resourceState{name: name, lastSeq: last, desired: map[string]drbd.Desired{}, statuses: map[string]*drbd.Status{},
						deleted: lastType == (*events.ResourceDefinitionDeleted)(nil).EventType(), gone: hb.gone}
				}, hb)
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "pool NAME",
		Short: "Wait until shared pool NAME is imported by the node it is granted to",
		Long: `Wait until shared pool NAME is imported by the node holding its grant: that node's agent
reports imported for the pool's current grant (after its MMP activity check). A refusal
(refused, contested) ends the wait at once with its code; a failed import is retried by the
agent, so the wait goes on.

Exit status: 0 imported, 1 refused, contested, no grant within --timeout or no such pool,
2 no answer from NATS.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			return watch(cmd, natsURL, creds, timeout, name, names().Event("pool", name), "pool "+name, "zpool",
				func(last uint64, _ string) watcher {
					return &poolState{name: name, lastSeq: last, desired: map[string]zpool.Desired{}, statuses: map[string]zpool.Status{}}
				}, nil)
		},
	})
	return c
}

// resourceState is what `cairn wait resource` has read: the definition's last event,
// the latest desired state per node (nil Local: leaving) and the latest status per node.
type resourceState struct {
	// gone reports whether a node's agent is gone (no heartbeat for --node-gone-after):
	// a node the resource left that is gone cannot tear it down and is not waited for.
	// nil: none is.
	gone     func(node string) bool
	name     string
	lastSeq  uint64 // the sequence of the definition's last event
	deleted  bool   // that event deleted it
	desired  map[string]drbd.Desired
	statuses map[string]*drbd.Status
}

// settled decides whether the resource has settled (see waitCmd), and if not, what it
// still waits for. Pure but for gone.
func (s resourceState) settled() (bool, string) {
	nodes := make([]string, 0, len(s.desired))
	for n := range s.desired {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	holders := 0
	for _, n := range nodes {
		d := s.desired[n]
		if d.Local == nil {
			if ok, why := drbd.Converged(d, s.statuses[n]); !ok && (s.gone == nil || !s.gone(n)) {
				return false, why
			}
			continue
		}
		holders++
		if d.Revision < s.lastSeq {
			return false, fmt.Sprintf("%s: desired state at revision %d, the definition's last event is %d (dispatching)", n, d.Revision, s.lastSeq)
		}
		for _, r := range d.Replicas {
			if _, ok := s.desired[r.Node]; !ok {
				return false, fmt.Sprintf("%s: no desired state yet (dispatching)", r.Node)
			}
		}
		if ok, why := drbd.Converged(d, s.statuses[n]); !ok {
			return false, why
		}
	}
	if holders == 0 && !s.deleted {
		return false, fmt.Sprintf("%s has no replica yet", s.name)
	}
	return true, ""
}

// watcher is what `cairn wait` folds messages into and asks whether it is done.
type watcher interface {
	fold(names events.Names, subject string, data []byte) error
	// settled reports done, or what is still awaited; a why that starts with
	// fatalPrefix ends the wait at once with exit status 1 (a refusal no waiting undoes).
	settled() (done bool, why string)
}

// watch waits until w settles: it reads the last event on lastSubject (absent: exit 1
// naming what), then the latest desired state and status of object name of kind on
// every node, and every new one, asking w after each once every subject that existed at the start was
// read (so that one not delivered yet is not mistaken for one that does not exist).
func watch(cmd *cobra.Command, natsURL, creds string, timeout time.Duration, name, lastSubject, what, kind string,
	newWatcher func(lastSeq uint64, lastType string) watcher, hb *heartbeats) error {
	nc, err := connect(natsURL, creds, "cairn-wait")
	if err != nil {
		return exitWith(2, "%v", err)
	}
	defer nc.Close()
	if hb != nil {
		sub, err := nc.Subscribe(events.NewNames(prefix).HeartbeatFilter(), func(m *nats.Msg) {
			if node, _, _, ok := events.NewNames(prefix).ParseStatus(m.Subject); ok {
				hb.heard(node)
			}
		})
		if err != nil {
			return exitWith(2, "subscribe to heartbeats: %v", err)
		}
		defer sub.Unsubscribe()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	names := events.NewNames(prefix)
	filters := map[string]string{names.NodesStream(): names.Node("*", kind, name), names.StatusStream(): names.Status("*", kind, name)}
	evs, err := js.Stream(ctx, names.EventsStream())
	if err != nil {
		return exitWith(2, "stream %s: %v", names.EventsStream(), err)
	}
	last, err := evs.GetLastMsgForSubject(ctx, lastSubject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return exitWith(1, "no %s", what)
	}
	if err != nil {
		return exitWith(2, "read %s: %v", lastSubject, err)
	}
	var env events.Envelope
	if err := json.Unmarshal(last.Data, &env); err != nil {
		return fmt.Errorf("event %d: %w", last.Sequence, err)
	}
	w := newWatcher(last.Sequence, env.Type)
	pending := map[string]bool{}
	for stream, filter := range filters {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return exitWith(2, "stream %s: %v", stream, err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return exitWith(2, "stream %s: %v", stream, err)
		}
		for subj := range info.State.Subjects {
			pending[subj] = true
		}
	}
	msgs := make(chan jetstream.Msg, 64)
	for stream, filter := range filters {
		cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter},
			DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy})
		if err != nil {
			return exitWith(2, "consume %s: %v", filter, err)
		}
		cc, err := cons.Consume(func(m jetstream.Msg) { msgs <- m })
		if err != nil {
			return exitWith(2, "consume %s: %v", filter, err)
		}
		defer cc.Stop()
	}
	started, said := time.Now(), ""
	tick := time.NewTicker(time.Second) // heartbeats age: look again
	defer tick.Stop()
	for {
		if len(pending) == 0 {
			ok, why := w.settled()
			if ok {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: settled (event %d) after %s\n", name, last.Sequence, time.Since(started).Round(100*time.Millisecond))
				return nil
			}
			if fatal, isFatal := strings.CutPrefix(why, fatalPrefix); isFatal {
				return exitWith(1, "%s: %s", name, fatal)
			}
			if why != said {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: waiting: %s\n", name, why)
				said = why
			}
		}
		select {
		case <-ctx.Done():
			if said == "" {
				said = fmt.Sprintf("%d subjects not read", len(pending))
			}
			return exitWith(1, "%s: not settled after %s: %s", name, timeout, said)
		case <-tick.C:
		case m := <-msgs:
			delete(pending, m.Subject())
			if err := w.fold(names, m.Subject(), m.Data()); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: skipped %s: %v\n", name, m.Subject(), err)
			}
		}
	}
}

// fatalPrefix marks a settled reason that ends the wait at once (see watcher).
const fatalPrefix = "fatal: "

// fold records one desired-state or status message of the resource.
func (s *resourceState) fold(names events.Names, subject string, data []byte) error {
	return foldMessage(names, subject, data,
		func(node string, d *drbd.Desired) {
			if d == nil { // empty: the resource leaves the node
				d = &drbd.Desired{Resource: s.name, Node: node}
			}
			s.desired[node] = *d
		},
		func(node string, st *drbd.Status) error {
			switch {
			case st == nil:
				delete(s.statuses, node)
			case st.Node != node:
				return fmt.Errorf("status names node %s", st.Node)
			default:
				s.statuses[node] = st
			}
			return nil
		})
}

// foldMessage decodes one message of a watched subject and hands it on: a desired state
// on <prefix>.node.<node>.… to desired, a status on <prefix>.status.<node>.… to status,
// each nil when the message is empty (the node holds nothing, or its report is gone).
func foldMessage[D, S any](names events.Names, subject string, data []byte, desired func(node string, d *D), status func(node string, s *S) error) error {
	if node, _, _, ok := names.ParseNode(subject); ok {
		d, err := decodeOrNil[D](data)
		if err == nil {
			desired(node, d)
		}
		return err
	}
	node, _, _, ok := names.ParseStatus(subject)
	if !ok {
		return fmt.Errorf("not a desired-state or status subject")
	}
	st, err := decodeOrNil[S](data)
	if err != nil {
		return err
	}
	return status(node, st)
}

// decodeOrNil decodes a JSON message; nil for an empty one.
func decodeOrNil[T any](data []byte) (*T, error) {
	if len(data) == 0 {
		return nil, nil
	}
	v := new(T)
	return v, json.Unmarshal(data, v)
}

// poolState is what `cairn wait pool` has read: the pool's last event, the desired state
// per node (the grant holder's is the one not empty) and the latest status per node.
type poolState struct {
	name     string
	lastSeq  uint64
	desired  map[string]zpool.Desired
	statuses map[string]zpool.Status
}

// settled: the grant holder reports imported for the current grant. Pure. A failure
// the holder reports for no grant (it cannot observe its pools) is said at once.
func (p *poolState) settled() (bool, string) {
	var owner *zpool.Desired
	for _, d := range p.desired {
		if d.Node != "" {
			d := d
			owner = &d
		}
	}
	if owner == nil {
		return false, fmt.Sprintf("pool %s is granted to no node (pool.import grants it)", p.name)
	}
	if owner.Revision < p.lastSeq {
		return false, fmt.Sprintf("%s: desired state at revision %d, the pool's last event is %d (dispatching)", owner.Node, owner.Revision, p.lastSeq)
	}
	st, ok := p.statuses[owner.Node]
	switch {
	case !ok:
		return false, fmt.Sprintf("%s: no report yet", owner.Node)
	case st.Phase == zpool.PhaseFailed && st.GrantSeq == 0:
		// A failure of no grant is the node's (it cannot even read which pools are
		// imported): every grant waits on it, so it is said at once.
		return false, fmt.Sprintf("%s: failed [%s]: %s (the agent retries)", owner.Node, st.Code, st.Error)
	case st.GrantSeq != owner.GrantSeq:
		return false, fmt.Sprintf("%s: reports grant %d, the pool's grant is %d", owner.Node, st.GrantSeq, owner.GrantSeq)
	case st.Phase == zpool.PhaseImported:
		return true, ""
	case st.Phase == zpool.PhaseRefused || st.Phase == zpool.PhaseContested:
		return false, fmt.Sprintf("%s%s: %s [%s]: %s", fatalPrefix, owner.Node, st.Phase, st.Code, st.Error)
	case st.Phase == zpool.PhaseFailed:
		return false, fmt.Sprintf("%s: failed [%s]: %s (the agent retries)", owner.Node, st.Code, st.Error)
	}
	return false, fmt.Sprintf("%s: %s", owner.Node, st.Phase)
}

// fold records one desired-state or status message of the pool.
func (p *poolState) fold(names events.Names, subject string, data []byte) error {
	return foldMessage(names, subject, data,
		func(node string, d *zpool.Desired) {
			if d == nil { // empty: the node holds no grant
				d = &zpool.Desired{}
			}
			p.desired[node] = *d
		},
		func(node string, st *zpool.Status) error {
			if st == nil {
				delete(p.statuses, node)
			} else {
				p.statuses[node] = *st
			}
			return nil
		})
}

// heartbeats is when each node's agent was last heard from since the wait started.
type heartbeats struct {
	mu    sync.Mutex
	start time.Time
	after time.Duration
	last  map[string]time.Time
}

func newHeartbeats(after time.Duration) *heartbeats {
	return &heartbeats{start: time.Now(), after: after, last: map[string]time.Time{}}
}

func (h *heartbeats) heard(node string) {
	h.mu.Lock()
	h.last[node] = time.Now()
	h.mu.Unlock()
}

// gone reports whether node sent no heartbeat for h.after (counted from the start of
// the wait for a node not heard from at all).
func (h *heartbeats) gone(node string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	last, ok := h.last[node]
	if !ok {
		last = h.start
	}
	return time.Since(last) > h.after
}
