package policy

// Evacuation: replicas move off nodes in maintenance (node.evacuate, node.evict), a
// replacement first and the old replica once the replacement is UpToDate.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"
)

// Actions of a Move.
const (
	MoveReplace = "replace" // place a replacement (replica.replace)
	MoveRemove  = "remove"  // remove the leaving replica (replica.remove)
	MoveWait    = "wait"    // a replacement is syncing, or the replica is in use
	MoveQueued  = "queued"  // the cluster's limit of replacements syncing at once is reached
	MoveAdd     = "add"     // keep-count: add replicas up to the place count (replica.add)
	MoveDetach  = "detach"  // a failed disk replaced: its replica goes diskless (replica.toggle-disk)
)

// Move is the evacuation's next step for one replica on a leaving node.
type Move struct {
	Resource string `json:"resource"`
	Node     string `json:"node"` // the leaving node
	Action   string `json:"action"`
	Reason   string `json:"reason"`
	// Replacement is the node of the replica replacing this one, once placed.
	Replacement string `json:"replacement,omitempty"`
	// Incarnation is the leaving replica's (its command ids derive from it, so a
	// replica added again later is moved again).
	Incarnation uint64 `json:"incarnation"`
	// Avoid are the nodes a replacement must not go to: at their limit of replacements
	// syncing (--max-syncing-per-node).
	Avoid []string `json:"avoid,omitempty"`
}

// Definition is one definition with a replica on a leaving node, as the evacuation
// reads it: the definition and its replicas' latest reports by node.
type Definition struct {
	RD       projections.ResourceDefinition
	Statuses map[string]drbd.Status
}

// PlanEvacuation decides the next step of every replica on a leaving node (nodes, by
// name, with their maintenance mode) and of every replica another one replaces
// (replica.migrate) in defs. A tiebreaker on a leaving node is replaced at once (it
// moves). Another diskless replica there is removed (replica.remove keeps it as the
// tiebreaker when the definition needs one; it then moves as one), unless it is
// Primary on a live node: it waits, as LINSTOR's evacuation does for a resource in
// use. A diskful replica gets a replacement first; it is removed only once its
// replacement is UpToDate and it is not Primary on a live node, so the definition never
// has fewer UpToDate disks than before. A replica whose disk failed (DiskFailed) on a
// node that stays is replaced too, and then goes diskless (its device stays). At most
// maxSyncing replacements (0: no limit) are syncing at once across the cluster;
// further replacements are queued. A node with perNode replacements syncing (0: no
// limit) is one a new replacement avoids (Avoid). Moves are sorted by node, then
// resource.
func PlanEvacuation(nodes map[string]projections.Node, defs []Definition, maxSyncing, perNode int) []Move {
	onNode := syncingReplacements(defs)
	syncing := 0
	var avoid []string
	for n, c := range onNode {
		syncing += c
		if perNode > 0 && c >= perNode {
			avoid = append(avoid, n)
		}
	}
	sort.Strings(avoid)
	var out []Move
	var wantReplace []int
	for _, d := range defs {
		for _, r := range d.RD.Replicas {
			n := nodes[r.Node]
			var repl *projections.Replica
			for i := range d.RD.Replicas {
				if d.RD.Replicas[i].Replaces == r.Node {
					repl = &d.RD.Replicas[i]
				}
			}
			failed := DiskFailed(d.RD, r, d.Statuses)
			if n.Spec.Maintenance == "" && repl == nil && !failed {
				continue // staying, not migrating, its disk fine
			}
			m := Move{Resource: d.RD.Name, Node: r.Node, Incarnation: r.Incarnation}
			live := n.Status.State == events.StateOnline
			primary := live && d.Statuses[r.Node].Role == "Primary" && d.Statuses[r.Node].Incarnation == r.Incarnation
			switch {
			case r.Tiebreaker:
				m.Action, m.Reason = MoveReplace, "a tiebreaker moves at once"
			case r.Diskless && primary:
				m.Action, m.Reason = MoveWait, "in use: Primary on "+r.Node+" (demote it there to move it)"
			case r.Diskless:
				m.Action, m.Reason = MoveRemove, "diskless: holds no data"
			case repl == nil && failed:
				m.Action, m.Reason = MoveReplace, "its disk failed (its node reports it Failed or Diskless)"
				wantReplace = append(wantReplace, len(out))
			case repl == nil:
				m.Action, m.Reason = MoveReplace, "no replacement yet"
				wantReplace = append(wantReplace, len(out))
			case !projections.ReplicaUpToDate(d.RD, *repl, d.Statuses):
				m.Action, m.Replacement, m.Reason = MoveWait, repl.Node, "replacement on "+repl.Node+" is not UpToDate yet"
			case failed && n.Spec.Maintenance == "":
				// Its node stays: the replica stays too, diskless (an application there
				// keeps its device, Primary or not).
				m.Action, m.Replacement, m.Reason = MoveDetach, repl.Node, "its disk failed; the replacement on "+repl.Node+" is UpToDate"
			case primary:
				m.Action, m.Replacement, m.Reason = MoveWait, repl.Node, "in use: Primary on "+r.Node+" (demote it there to remove it)"
			default:
				m.Action, m.Replacement, m.Reason = MoveRemove, repl.Node, "replacement on "+repl.Node+" is UpToDate"
			}
			out = append(out, m)
		}
	}
	sort.SliceStable(wantReplace, func(i, j int) bool { return lessMove(out[wantReplace[i]], out[wantReplace[j]]) })
	for _, i := range wantReplace {
		if maxSyncing > 0 && syncing >= maxSyncing {
			out[i].Action = MoveQueued
			out[i].Reason = fmt.Sprintf("%d replacement(s) syncing, the limit (--max-syncing-replacements)", syncing)
			continue
		}
		out[i].Avoid = avoid
		syncing++
	}
	sort.SliceStable(out, func(i, j int) bool { return lessMove(out[i], out[j]) })
	return out
}

// DiskFailed reports whether diskful replica r's own current report (of its current
// disk, carried out) shows a volume Failed or Diskless: DRBD detached the disk after an
// I/O error. It is replaced as a replica on a leaving node is.
func DiskFailed(rd projections.ResourceDefinition, r projections.Replica, statuses map[string]drbd.Status) bool {
	st, ok := statuses[r.Node]
	if r.Diskless || !ok || st.Incarnation != r.Incarnation || st.Phase != drbd.PhaseApplied {
		return false
	}
	for _, v := range st.Volumes {
		if v.DiskState == "Failed" || v.DiskState == "Diskless" {
			return true
		}
	}
	return false
}

// Observe notes a definition a report shows a Failed or Diskless volume of (the status
// folder's hook; a diskless replica's report looks the same: the sweep tells them apart
// and forgets the definition). It does so only while the sweep runs (this serve holds
// the lease), so a serve that does not lead keeps nothing; a sweep that starts looks at
// every report once (noteFailedDisks). It never blocks.
func (e *Evacuator) Observe(st drbd.Status) {
	if !diskGone(st) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sweeping {
		e.failedDisks[st.Resource] = true
	}
}

// diskGone reports whether a report shows a volume Failed or Diskless.
func diskGone(st drbd.Status) bool {
	for _, v := range st.Volumes {
		if v.DiskState == "Failed" || v.DiskState == "Diskless" {
			return true
		}
	}
	return false
}

// noteFailedDisks notes every definition the reports in the views show a failed disk
// of, as Observe would have (the reports folded before this serve led).
func (e *Evacuator) noteFailedDisks() error {
	v, err := e.DB.Read()
	if err != nil {
		return err
	}
	defer v.Close()
	return v.EachResourceStatus(func(st drbd.Status) error {
		if diskGone(st) {
			e.mu.Lock()
			e.failedDisks[st.Resource] = true
			e.mu.Unlock()
		}
		return nil
	})
}

// syncingReplacements counts the replacements of defs that are not UpToDate yet, by the
// node they are on.
func syncingReplacements(defs []Definition) map[string]int {
	out := map[string]int{}
	for _, d := range defs {
		for _, r := range d.RD.Replicas {
			if r.Replaces != "" && !projections.ReplicaUpToDate(d.RD, r, d.Statuses) {
				out[r.Node]++
			}
		}
	}
	return out
}

func lessMove(a, b Move) bool {
	if a.Node != b.Node {
		return a.Node < b.Node
	}
	return a.Resource < b.Resource
}

// MoveRequest is the command a replace or remove Move calls for (ok false for wait and
// queued). Its command id derives from the resource, the node, the leaving replica's
// incarnation and the action, so two serves, or a sweep repeated after a restart or a
// lease move, send each step once.
func MoveRequest(m Move, actor string) (admission.Request, bool) {
	var verb string
	var body []byte
	switch m.Action {
	case MoveReplace:
		verb = "replica.replace"
		cmd := map[string]any{"resource": m.Resource, "node": m.Node}
		if len(m.Avoid) > 0 {
			cmd["avoid"] = m.Avoid
		}
		body, _ = json.Marshal(cmd)
	case MoveRemove:
		verb = "replica.remove"
		body, _ = json.Marshal(map[string]any{"resource": m.Resource, "node": m.Node})
	case MoveDetach:
		verb = "replica.toggle-disk"
		body, _ = json.Marshal(map[string]any{"resource": m.Resource, "node": m.Node, "diskless": true})
	default:
		return admission.Request{}, false
	}
	id := commandID("evacuate", m.Resource, m.Node, fmt.Sprint(m.Incarnation), m.Action)
	return admission.Request{Verb: verb, Body: body, Actor: actor, CommandID: id, ForgetRefusals: true}, true
}

// commandID joins parts into a command id, or, when that would be no valid one (longer
// than 100 characters: LINSTOR's names are up to 48 each), parts[0] and a hash of them
// all: deterministic either way, so two serves send the same id for the same decision.
func commandID(parts ...string) string {
	id := strings.Join(parts, "-")
	if admission.ValidCommandID(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return parts[0] + "-" + hex.EncodeToString(sum[:16])
}

var (
	metricMoves = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_policy_evacuation_commands_total", Help: "Commands the policies sent (evacuation, keep-count, auto-diskful, auto-evict), by verb and outcome (ok or the error code)."},
		[]string{"verb", "outcome"})
	metricSyncing = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "cairn_policy_evacuation_replacements", Help: "Replicas on nodes in maintenance still to move (last sweep)."})
	metricShort = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "cairn_policy_definitions_short", Help: "Definitions with fewer disks than their group's place count (last keep-count sweep)."})
)

// Evacuator runs PlanEvacuation every EvacuateEvery while this serve holds the lease
// and sends the commands it calls for as policy:evacuate. A refused command is retried
// after a backoff (doubling from 2 s to 5 min) and reported, never in a loop.
type Evacuator struct {
	Adm *admission.Admission
	DB  *projections.DB
	Log zerolog.Logger
	// MaxSyncing bounds the replacements syncing at once across the cluster (0:
	// DefaultMaxSyncing).
	MaxSyncing int
	// MaxSyncingPerNode bounds the replacements syncing at once to one node (0: none).
	MaxSyncingPerNode int
	// KeepCountEvery is how often every definition is checked against its group's
	// place count (DefaultKeepCountEvery); at once too when the online nodes change.
	// Negative: never (the keep-count policy is off).
	KeepCountEvery time.Duration
	Now            func() time.Time

	sender
	mu      sync.Mutex
	last    []Move
	at      time.Time
	short   []Short
	shortAt time.Time
	online  string          // the online storage nodes at the last keep-count sweep
	topped  map[string]bool // definitions given replicas by keep-count, until UpToDate
	syncing int             // replacements syncing at the last sweep
	wake    chan struct{}
	// failedDisks are definitions a report showed a Failed or Diskless volume of (a
	// diskless replica's too: the sweep tells them apart), until a sweep finds none;
	// kept only while sweeping.
	failedDisks map[string]bool
	sweeping    bool
	// auto-diskful: when each diskless Primary was first seen, the definitions given a
	// disk (cleanup may follow), the last plan.
	primarySince map[string]time.Time
	toggled      map[string]bool
	diskful      []DiskfulStep
}

// DefaultKeepCountEvery is the default of Evacuator.KeepCountEvery.
const DefaultKeepCountEvery = 30 * time.Second

// EvacuateEvery is how often the lease holder looks at the nodes in maintenance; a
// replica's status report wakes it sooner (Wake), at most every EvacuateAtMost.
var EvacuateEvery, EvacuateAtMost = time.Second, 100 * time.Millisecond

// Wake asks for a sweep soon: a replica's status changed (a replacement may be UpToDate
// now). Without moves under way at the last sweep it does nothing (the ticker finds new
// ones). It never blocks.
func (e *Evacuator) Wake() {
	e.mu.Lock()
	if len(e.last) == 0 {
		e.mu.Unlock()
		return
	}
	if e.wake == nil {
		e.wake = make(chan struct{}, 1)
	}
	w := e.wake
	e.mu.Unlock()
	select {
	case w <- struct{}{}:
	default:
	}
}

// Sweep runs the evacuation every EvacuateEvery, and after a Wake (at most every
// EvacuateAtMost), until ctx ends (run while holding the lease).
func (e *Evacuator) Sweep(ctx context.Context) {
	t := time.NewTicker(EvacuateEvery)
	defer t.Stop()
	e.mu.Lock()
	if e.wake == nil {
		e.wake = make(chan struct{}, 1)
	}
	wake := e.wake
	e.sweeping, e.failedDisks = true, map[string]bool{}
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.sweeping, e.failedDisks = false, nil
		e.mu.Unlock()
	}()
	if err := e.noteFailedDisks(); err != nil {
		e.Log.Warn().Err(err).Msg("evacuation: reports unreadable")
	}
	for {
		if err := e.Once(ctx); err != nil {
			e.Log.Warn().Err(err).Msg("evacuation: views unreadable")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
			select { // a burst of reports makes one sweep
			case <-ctx.Done():
				return
			case <-time.After(EvacuateAtMost):
			}
		}
	}
}

// Once plans the evacuation on the current views and sends what it calls for.
func (e *Evacuator) Once(ctx context.Context) error {
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	nodes, leaving, defs, err := e.read()
	if err != nil {
		return err
	}
	moves := PlanEvacuation(nodes, defs, e.maxSyncing(), e.MaxSyncingPerNode)
	metricSyncing.Set(float64(len(moves)))
	syncing := 0
	for _, c := range syncingReplacements(defs) {
		syncing += c
	}
	e.mu.Lock()
	e.last, e.at, e.syncing = moves, now(), syncing
	if e.topped == nil {
		e.topped, e.toggled = map[string]bool{}, map[string]bool{}
	}
	e.mu.Unlock()
	for _, m := range moves {
		req, ok := MoveRequest(m, "policy:evacuate")
		if !ok {
			continue
		}
		e.submit(ctx, req, m.Resource+" on "+m.Node, m.Reason)
	}
	return e.keepCount(ctx, leaving)
}

// submit sends one of the policy's commands (sender.submit).
func (e *Evacuator) submit(ctx context.Context, req admission.Request, subject, reason string) bool {
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	return e.sender.submit(ctx, e.Adm, req, subject, reason, now, e.Log)
}

// read returns every node, the nodes in maintenance, and the definitions with a replica
// on one of those or a replica that replaces another (DefinitionsReplacing).
func (e *Evacuator) read() (map[string]projections.Node, map[string]projections.Node, []Definition, error) {
	v, err := e.DB.Read()
	if err != nil {
		return nil, nil, nil, err
	}
	defer v.Close()
	all, err := v.Nodes()
	if err != nil {
		return nil, nil, nil, err
	}
	nodes, leaving := map[string]projections.Node{}, map[string]projections.Node{}
	var names []string
	for _, n := range all {
		nodes[n.Spec.Name] = n
		if n.Spec.Maintenance == "" {
			continue
		}
		leaving[n.Spec.Name] = n
		on, err := v.NodeResources(n.Spec.Name)
		if err != nil {
			return nil, nil, nil, err
		}
		names = append(names, on...)
	}
	replacing, err := v.DefinitionsReplacing()
	if err != nil {
		return nil, nil, nil, err
	}
	e.mu.Lock()
	suspects := slices.Collect(maps.Keys(e.failedDisks))
	e.mu.Unlock()
	seen := map[string]bool{}
	var defs []Definition
	for _, name := range append(append(names, replacing...), suspects...) {
		if seen[name] {
			continue
		}
		seen[name] = true
		rd, ok, err := v.ResourceDefinition(name)
		if err != nil {
			return nil, nil, nil, err
		}
		if !ok {
			continue
		}
		st, err := v.ResourceStatus(name)
		if err != nil {
			return nil, nil, nil, err
		}
		defs = append(defs, Definition{RD: rd, Statuses: st})
	}
	// A suspect stays one while a replica of it has a failed disk or a replacement.
	e.mu.Lock()
	for _, name := range suspects {
		still := false
		for _, d := range defs {
			if d.RD.Name != name {
				continue
			}
			for _, r := range d.RD.Replicas {
				still = still || r.Replaces != "" || DiskFailed(d.RD, r, d.Statuses)
			}
		}
		if !still {
			delete(e.failedDisks, name)
		}
	}
	e.mu.Unlock()
	return nodes, leaving, defs, nil
}

// EvacuationStatus is what the evacuation policy shows (GET /cairn/v1/policies).
type EvacuationStatus struct {
	MaxSyncing int       `json:"max_syncing_replacements"`
	At         time.Time `json:"at,omitzero"`
	Moves      []Move    `json:"moves"`
	// Short are the definitions below their place count at the last keep-count sweep.
	Short []Short `json:"short"`
	// AutoDiskful are the diskless Primaries counting down to a disk, and the disks
	// given or removed, at that sweep.
	AutoDiskful []DiskfulStep `json:"auto_diskful"`
	ShortAt     time.Time     `json:"short_at,omitzero"`
	Recent      []Decision    `json:"recent_decisions"`
}

// Status is the last sweep's plan and the recent decisions, newest last.
func (e *Evacuator) Status() EvacuationStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	return EvacuationStatus{MaxSyncing: e.maxSyncing(), At: e.at, Moves: append([]Move{}, e.last...),
		Short: append([]Short{}, e.short...), ShortAt: e.shortAt, AutoDiskful: append([]DiskfulStep{}, e.diskful...),
		Recent: e.decisions()}
}

// DefaultMaxSyncing is the default of Evacuator.MaxSyncing.
const DefaultMaxSyncing = 8

func (e *Evacuator) maxSyncing() int {
	if e.MaxSyncing <= 0 {
		return DefaultMaxSyncing
	}
	return e.MaxSyncing
}
