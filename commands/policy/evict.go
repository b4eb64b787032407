package policy

// Auto-evict: a node offline longer than DrbdOptions/AutoEvictAfterTime is evicted
// (node.evict), and the evacuation moves its replicas to other nodes.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/rs/zerolog"
)

// LINSTOR's auto-evict settings (controller properties; AllowEviction on a node too).
const (
	PropAutoEvictAfterTime       = "DrbdOptions/AutoEvictAfterTime"            // minutes
	PropAutoEvictMaxDisconnected = "DrbdOptions/AutoEvictMaxDisconnectedNodes" // percent
	PropAutoEvictMinReplicaCount = "DrbdOptions/AutoEvictMinReplicaCount"
	PropAutoEvictAllowEviction   = "DrbdOptions/AutoEvictAllowEviction"
)

// EvictSettings are the auto-evict policy's settings.
type EvictSettings struct {
	After                  time.Duration `json:"-"`                        // offline this long: evicted (60 min)
	AfterSeconds           float64       `json:"after_seconds"`            // After, for the status
	MaxDisconnectedPercent int           `json:"max_disconnected_percent"` // more offline than this: nobody is (34)
	MinReplicaCount        int           `json:"min_replica_count"`        // copies that must stay online elsewhere (1)
	Allow                  bool          `json:"allow"`                    // AllowEviction at the controller (true)
}

// EvictSettingsFrom reads the settings from the controller's properties; a value that
// is not a number keeps the default and says so in the warnings.
func EvictSettingsFrom(props map[string]string) (EvictSettings, []string) {
	s := EvictSettings{After: time.Hour, MaxDisconnectedPercent: 34, MinReplicaCount: 1, Allow: true}
	var warnings []string
	num := func(key string, into *int, unit int) {
		raw, ok := props[key]
		if !ok {
			return
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
		if err != nil || n < 0 {
			warnings = append(warnings, fmt.Sprintf("%s=%q is not a number ≥ 0; the default is used", key, raw))
			return
		}
		*into = int(n * float64(unit))
	}
	secs := int(s.After / time.Second)
	num(PropAutoEvictAfterTime, &secs, 60)
	s.After = time.Duration(secs) * time.Second
	num(PropAutoEvictMaxDisconnected, &s.MaxDisconnectedPercent, 1)
	num(PropAutoEvictMinReplicaCount, &s.MinReplicaCount, 1)
	s.Allow = !strings.EqualFold(props[PropAutoEvictAllowEviction], "false")
	s.AfterSeconds = s.After.Seconds()
	return s, warnings
}

// Actions of an Eviction.
const (
	EvictNow     = "evict"   // node.evict now
	EvictWait    = "wait"    // offline, not long enough yet (Due says when)
	EvictBraked  = "braked"  // too many nodes offline: nobody is evicted
	EvictNever   = "never"   // eviction is not allowed, or would leave too few copies
	EvictAlready = "evicted" // evicted; its replicas are moved by the evacuation
)

// Eviction is the auto-evict policy's verdict on one offline node.
type Eviction struct {
	Node   string    `json:"node"`
	Action string    `json:"action"`
	Reason string    `json:"reason"`
	Due    time.Time `json:"due,omitzero"`
	// StatusSeq is the sequence of the node's state change (command ids derive from it).
	StatusSeq uint64 `json:"-"`
}

// PlanEvictions decides for every offline node: evicted once offline for s.After; never
// when more than s.MaxDisconnectedPercent of the nodes are offline (the brake: a
// network split or a rack power loss is not a reason to re-place everything; evicted
// nodes are not counted), never
// for a node whose DrbdOptions/AutoEvictAllowEviction is false (or the controller's),
// and never while one of its definitions keeps it (blocked, by node: the reason from
// DefinitionBlocksEviction). Online nodes are not listed.
func PlanEvictions(nodes []projections.Node, s EvictSettings, blocked map[string]string, now time.Time) []Eviction {
	offline, counted := 0, 0
	for _, n := range nodes {
		if n.Spec.Maintenance == events.MaintenanceEvicted {
			continue // dealt with: neither offline nor a node the brake counts
		}
		counted++
		if n.Status.State != events.StateOnline {
			offline++
		}
	}
	braked := counted > 0 && offline*100 > s.MaxDisconnectedPercent*counted
	var out []Eviction
	for _, n := range nodes {
		if n.Status.State == events.StateOnline {
			continue
		}
		e := Eviction{Node: n.Spec.Name, StatusSeq: n.Status.Seq, Due: n.Status.Since.Add(s.After)}
		switch {
		case n.Spec.Maintenance == events.MaintenanceEvicted:
			e.Action, e.Reason, e.Due = EvictAlready, "evicted; its replicas move to other nodes", time.Time{}
		case !s.Allow || strings.EqualFold(n.Spec.Properties[PropAutoEvictAllowEviction], "false"):
			e.Action, e.Reason = EvictNever, PropAutoEvictAllowEviction+"=false"
		case braked:
			e.Action, e.Reason = EvictBraked, fmt.Sprintf("%d of %d nodes are offline, more than %s=%d%%: nobody is evicted",
				offline, counted, PropAutoEvictMaxDisconnected, s.MaxDisconnectedPercent)
		case blocked[n.Spec.Name] != "":
			e.Action, e.Reason = EvictNever, blocked[n.Spec.Name]
		case now.Before(e.Due):
			e.Action, e.Reason = EvictWait, fmt.Sprintf("offline since %s; evicted after %s=%s", n.Status.Since.UTC().Format(time.RFC3339), PropAutoEvictAfterTime, s.After)
		default:
			e.Action, e.Reason = EvictNow, fmt.Sprintf("offline since %s, longer than %s=%s", n.Status.Since.UTC().Format(time.RFC3339), PropAutoEvictAfterTime, s.After)
		}
		out = append(out, e)
	}
	return out
}

// DefinitionBlocksEviction says why rd keeps node (offline, holding a replica of rd)
// from being evicted, "" when it does not: DrbdOptions/AutoEvictAllowEviction false, or
// fewer than DrbdOptions/AutoEvictMinReplicaCount diskful replicas on online nodes
// besides it (the node may hold the only good copy). Each is read from the definition's
// properties, then its group's, then the controller's (s, as EvictSettingsFrom read
// them), as LINSTOR does; a value that is no number ≥ 0 is passed over.
func DefinitionBlocksEviction(rd projections.ResourceDefinition, node string, online map[string]bool, rdProps, groupProps map[string]string, s EvictSettings) string {
	allow, need := s.Allow, s.MinReplicaCount
	for _, props := range []map[string]string{groupProps, rdProps} { // the narrower wins
		if v, ok := props[PropAutoEvictAllowEviction]; ok {
			allow = !strings.EqualFold(v, "false")
		}
		if n, ok := count(props, PropAutoEvictMinReplicaCount); ok {
			need = n
		}
	}
	if !allow {
		return fmt.Sprintf("resource %s: %s=false", rd.Name, PropAutoEvictAllowEviction)
	}
	r, ok := rd.Replica(node)
	if !ok || r.Diskless {
		return ""
	}
	copies := 0
	for _, x := range rd.Replicas {
		if x.Node != node && !x.Diskless && online[x.Node] {
			copies++
		}
	}
	if copies < need {
		return fmt.Sprintf("resource %s has %d diskful replica(s) online elsewhere, fewer than %s=%d", rd.Name, copies, PropAutoEvictMinReplicaCount, need)
	}
	return ""
}

// count reads props[key] as a number ≥ 0 (fractions cut); ok is false when it is not
// there or no such number.
func count(props map[string]string, key string) (int, bool) {
	raw, ok := props[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return int(n), true
}

// Evictor runs PlanEvictions every EvacuateEvery while this serve holds the lease and
// sends node.evict as policy:auto-evict (command id from the node and its state
// change, so each outage evicts once).
type Evictor struct {
	Adm *admission.Admission
	DB  *projections.DB
	Log zerolog.Logger
	Now func() time.Time

	sender
	mu       sync.Mutex
	settings EvictSettings
	warnings []string
	last     []Eviction
}

// Sweep runs the auto-evict policy every EvacuateEvery until ctx ends.
func (e *Evictor) Sweep(ctx context.Context) {
	t := time.NewTicker(EvacuateEvery)
	defer t.Stop()
	for {
		if err := e.Once(ctx); err != nil {
			e.Log.Warn().Err(err).Msg("auto-evict: views unreadable")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once plans on the current views and evicts the nodes due.
func (e *Evictor) Once(ctx context.Context) error {
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	nodes, s, warnings, blocked, err := e.read()
	if err != nil {
		return err
	}
	plan := PlanEvictions(nodes, s, blocked, now())
	e.mu.Lock()
	e.settings, e.warnings, e.last = s, warnings, plan
	e.mu.Unlock()
	for _, ev := range plan {
		if ev.Action != EvictNow {
			continue
		}
		body, _ := json.Marshal(map[string]string{"name": ev.Node, "reason": ev.Reason})
		req := admission.Request{Verb: "node.evict", Body: body, Actor: "policy:auto-evict", ForgetRefusals: true,
			CommandID: commandID("evict", events.Token(ev.Node), strconv.FormatUint(ev.StatusSeq, 10))}
		e.submit(ctx, e.Adm, req, ev.Node, ev.Reason, now, e.Log)
	}
	return nil
}

// read returns the nodes, the settings the controller's properties give (and warnings
// for values that are no numbers) and, for every offline node one of its definitions
// keeps from eviction, the reason (DefinitionBlocksEviction).
func (e *Evictor) read() ([]projections.Node, EvictSettings, []string, map[string]string, error) {
	fail := func(err error) ([]projections.Node, EvictSettings, []string, map[string]string, error) {
		return nil, EvictSettings{}, nil, nil, err
	}
	v, err := e.DB.Read()
	if err != nil {
		return fail(err)
	}
	defer v.Close()
	nodes, err := v.Nodes()
	if err != nil {
		return fail(err)
	}
	props, err := v.ControllerProperties()
	if err != nil {
		return fail(err)
	}
	s, warnings := EvictSettingsFrom(props)
	online := map[string]bool{}
	for _, n := range nodes {
		online[n.Spec.Name] = n.Status.State == events.StateOnline
	}
	groups := map[string]map[string]string{}
	blocked := map[string]string{}
	for _, n := range nodes {
		if online[n.Spec.Name] || n.Spec.Maintenance == events.MaintenanceEvicted {
			continue
		}
		names, err := v.NodeResources(n.Spec.Name)
		if err != nil {
			return fail(err)
		}
		for _, name := range names {
			rd, ok, err := v.ResourceDefinition(name)
			if err != nil {
				return fail(err)
			}
			if !ok {
				continue
			}
			gp, seen := groups[rd.ResourceGroup]
			if !seen && rd.ResourceGroup != "" {
				g, _, err := v.ResourceGroup(rd.ResourceGroup)
				if err != nil {
					return fail(err)
				}
				gp, groups[rd.ResourceGroup] = g.Properties, g.Properties
			}
			if why := DefinitionBlocksEviction(rd, n.Spec.Name, online, rd.Properties, gp, s); why != "" {
				blocked[n.Spec.Name] = why
				break
			}
		}
	}
	return nodes, s, warnings, blocked, nil
}

// EvictionStatus is what the auto-evict policy shows (GET /cairn/v1/policies).
type EvictionStatus struct {
	Settings EvictSettings `json:"settings"`
	Warnings []string      `json:"warnings,omitempty"`
	Nodes    []Eviction    `json:"offline_nodes"`
	Recent   []Decision    `json:"recent_decisions"`
}

// Status is the last sweep's verdicts and the recent decisions, newest last.
func (e *Evictor) Status() EvictionStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	return EvictionStatus{Settings: e.settings, Warnings: e.warnings, Nodes: append([]Eviction{}, e.last...), Recent: e.decisions()}
}
