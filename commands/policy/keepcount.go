package policy

// Keeping the replica count: a definition with fewer diskful replicas than its group's
// place count gets new ones (replica.add, autoplaced by the group's rules).

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// Short is a definition with fewer diskful replicas than its group's place count.
type Short struct {
	Resource   string `json:"resource"`
	Diskful    int    `json:"diskful"`
	PlaceCount int    `json:"place_count"`
	Action     string `json:"action"` // MoveAdd (add replicas now) or MoveQueued
	Reason     string `json:"reason"`
	// Seq is the definition's last event: the command id derives from it, so a sweep
	// repeated on the same state sends the same command.
	Seq uint64 `json:"-"`
}

// PlanReplicaCount lists the definitions of defs that have fewer diskful replicas than
// placeCount (by group; a group without one, a definition without a group, and one
// without any disk yet, which its creator is still placing, are never short). A definition with a replica on a leaving node is left to the evacuation (its
// replacement is counted there). Each short definition gets one replica per sweep (so
// one the group's rules can place is not held back by one they cannot: autoplace places
// all it is asked for or none). budget is how many more replicas may start syncing (the
// evacuation's limit less what syncs already; < 0: no limit): definitions past it are
// queued, by name.
func PlanReplicaCount(defs []projections.ResourceDefinition, placeCount map[string]int, leaving map[string]projections.Node, budget int) []Short {
	var out []Short
	for _, rd := range defs {
		want := placeCount[rd.ResourceGroup]
		if want == 0 || rd.ResourceGroup == "" || len(rd.Volumes) == 0 {
			continue
		}
		diskful, onLeaving := 0, false
		for _, r := range rd.Replicas {
			if _, ok := leaving[r.Node]; ok {
				onLeaving = true
			}
			if !r.Diskless {
				diskful++
			}
		}
		if onLeaving || diskful == 0 || diskful >= want {
			continue // diskful == 0: not placed yet, which is its creator's to do
		}
		s := Short{Resource: rd.Name, Diskful: diskful, PlaceCount: want, Seq: rd.Seq, Action: MoveAdd,
			Reason: fmt.Sprintf("%d diskful replica(s), place count %d", diskful, want)}
		if budget == 0 {
			s.Action, s.Reason = MoveQueued, s.Reason+"; waiting for syncs to finish (--max-syncing-replacements)"
		} else if budget > 0 {
			budget--
		}
		out = append(out, s)
	}
	return out
}

// ShortRequest is the replica.add that brings s one diskful replica closer to its place
// count (ok false when it is queued).
func ShortRequest(s Short) (admission.Request, bool) {
	if s.Action != MoveAdd {
		return admission.Request{}, false
	}
	body := fmt.Appendf(nil, `{"resource":%q,"place_count":%d}`, s.Resource, s.Diskful+1)
	return admission.Request{Verb: "replica.add", Body: body, Actor: "policy:keep-count", ForgetRefusals: true,
		CommandID: commandID("keep-count", s.Resource, strconv.FormatUint(s.Seq, 10))}, true
}

// keepCount runs PlanReplicaCount and PlanAutoDiskful over every definition every
// KeepCountEvery (auto-diskful's countdown is in this serve's memory: a lease move starts
// it again), and at
// once when the online storage nodes changed (a node that joins or returns takes the
// definitions still short: LINSTOR #255), sending replica.add as policy:keep-count.
// Its budget is the evacuation's limit less the replacements syncing and the
// definitions it topped up that are not all UpToDate yet.
func (e *Evacuator) keepCount(ctx context.Context, leaving map[string]projections.Node) error {
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	every := e.KeepCountEvery
	if every < 0 {
		return nil // off
	}
	if every == 0 {
		every = DefaultKeepCountEvery
	}
	v, err := e.DB.Read()
	if err != nil {
		return err
	}
	defer v.Close()
	nodes, err := v.Nodes()
	if err != nil {
		return err
	}
	var online []string
	for _, n := range nodes {
		if n.Status.State == events.StateOnline && n.Spec.Role == events.RoleStorage && n.Spec.Maintenance == "" {
			online = append(online, n.Spec.Name)
		}
	}
	onlineKey := strings.Join(online, ",")
	e.mu.Lock()
	due := now().Sub(e.shortAt) >= every || onlineKey != e.online
	retry := onlineKey != e.online // new room: retry what was refused at once
	topped := slices.Collect(maps.Keys(e.topped))
	e.mu.Unlock()
	if retry {
		e.retryNow("keep-count-")
	}
	if !due {
		return nil
	}
	pending := 0
	for _, name := range topped {
		rd, ok, err := v.ResourceDefinition(name)
		if err != nil {
			return err
		}
		st, err := v.ResourceStatus(name)
		if err != nil {
			return err
		}
		done := !ok
		if ok {
			done = true
			for _, r := range rd.Replicas {
				done = done && (r.Diskless || projections.ReplicaUpToDate(rd, r, st))
			}
		}
		e.mu.Lock()
		if done {
			delete(e.topped, name)
		} else {
			pending++
		}
		e.mu.Unlock()
	}
	placeCount := map[string]int{}
	groupProps := map[string]map[string]string{}
	if err := v.EachResourceGroup(func(g projections.ResourceGroup) (bool, error) {
		placeCount[g.Name], groupProps[g.Name] = g.PlaceCount, g.Properties
		return true, nil
	}); err != nil {
		return err
	}
	controllerProps, err := v.ControllerProperties()
	if err != nil {
		return err
	}
	e.mu.Lock()
	toggled := maps.Clone(e.toggled)
	e.mu.Unlock()
	var diskfulDefs []DiskfulDefinition
	var defs []projections.ResourceDefinition
	if err := v.EachResourceDefinition(func(rd projections.ResourceDefinition) (bool, error) {
		if after, cleanup := AutoDiskfulSettings(rd.Properties, groupProps[rd.ResourceGroup], controllerProps); after > 0 {
			candidate := toggled[rd.Name]
			for _, r := range rd.Replicas {
				candidate = candidate || r.Diskless && !r.Tiebreaker
			}
			if candidate {
				st, err := v.ResourceStatus(rd.Name)
				if err != nil {
					return false, err
				}
				diskfulDefs = append(diskfulDefs, DiskfulDefinition{RD: rd, Statuses: st, After: after, Cleanup: cleanup,
					PlaceCount: placeCount[rd.ResourceGroup], Toggled: toggled[rd.Name]})
			}
		}
		if placeCount[rd.ResourceGroup] > 0 {
			diskful := 0
			for _, r := range rd.Replicas {
				if !r.Diskless {
					diskful++
				}
			}
			if diskful < placeCount[rd.ResourceGroup] {
				defs = append(defs, rd)
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	e.mu.Lock()
	budget := e.maxSyncing() - e.syncing - pending
	e.mu.Unlock()
	shorts := PlanReplicaCount(defs, placeCount, leaving, max(budget, 0))
	metricShort.Set(float64(len(defs)))
	e.mu.Lock()
	e.short, e.shortAt, e.online = shorts, now(), onlineKey
	e.mu.Unlock()
	for _, s := range shorts {
		req, ok := ShortRequest(s)
		if !ok {
			continue
		}
		if e.submit(ctx, req, s.Resource, s.Reason) {
			e.mu.Lock()
			e.topped[s.Resource] = true
			e.mu.Unlock()
		}
	}
	e.mu.Lock()
	steps, since := PlanAutoDiskful(diskfulDefs, e.primarySince, now())
	e.diskful, e.primarySince = steps, since
	e.mu.Unlock()
	for _, s := range steps {
		req, ok := DiskfulRequest(s)
		if !ok {
			continue
		}
		if e.submit(ctx, req, s.Resource+" on "+s.Node, s.Reason) {
			e.mu.Lock()
			e.toggled[s.Resource] = s.Action == DiskfulToggle
			e.mu.Unlock()
		}
	}
	return nil
}
