package policy

// Reports of agents that call for commands, recorded by the serve holding the lease:
// storage-pool capacity (sp.capacity-report) and snapshot phases (rd.snapshot-progress).

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/commands/resources"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/rs/zerolog"
)

// CapacityFromReport turns an agent's storage-pool report into the sp.capacity-report
// command that records it, when it is news for the pool's view (resources.CapacityChanged:
// a first report, another total, or free moved by more than 1% of the total). ok is
// false for a report with an error, of a pool the views do not have, or no news. The
// command id derives from node, pool and the report's time, so two serves, or the same
// report folded again after a restart, record it once.
func CapacityFromReport(v *projections.View, rep backing.PoolReport) (admission.Request, bool, error) {
	if rep.Error != "" || rep.At.IsZero() {
		return admission.Request{}, false, nil
	}
	sp, ok, err := v.StoragePool(rep.Node, rep.Name)
	if err != nil || !ok || !resources.CapacityChanged(sp, rep.TotalKiB, rep.FreeKiB) {
		return admission.Request{}, false, err
	}
	body, _ := json.Marshal(events.StoragePoolCapacityReported{Node: rep.Node, Name: rep.Name, TotalKiB: rep.TotalKiB, FreeKiB: rep.FreeKiB, At: rep.At})
	return admission.Request{Verb: "sp.capacity-report", Body: body, Actor: "agent:" + rep.Node,
		CommandID: commandID("sp-capacity", events.Token(rep.Node), rep.Name, strconv.FormatInt(rep.At.UnixNano(), 10))}, true, nil
}

// RecordCapacity returns the status folder's storage-pool hook: while this serve holds
// the lease it records every report that is news (CapacityFromReport). Agents report
// every 30 s, so a serve that takes the lease records the next report of each pool.
func RecordCapacity(ctx context.Context, adm *admission.Admission, db *projections.DB, leading func() (uint64, bool), log zerolog.Logger) func(backing.PoolReport) {
	return func(rep backing.PoolReport) {
		if _, lead := leading(); !lead {
			return
		}
		v, err := db.Read()
		if err != nil {
			log.Warn().Err(err).Msg("capacity report not read")
			return
		}
		req, ok, err := CapacityFromReport(v, rep)
		v.Close()
		if err != nil || !ok {
			return
		}
		r := adm.Submit(ctx, req)
		ev := log.Info()
		if !r.OK {
			ev = log.Warn().Str("error", r.Error.Message)
		}
		ev.Str("node", rep.Node).Str("storage_pool", rep.Name).Uint64("total_kib", rep.TotalKiB).Uint64("free_kib", rep.FreeKiB).
			Bool("recorded", r.OK && len(r.Events) > 0).Msg("storage pool capacity reported")
	}
}

// SnapshotProgressFrom returns the rd.snapshot-progress commands the reports of a
// definition's replicas call for: for every snapshot under way whose nodes' latest
// reports (in the views) settle the next phase (resources.SnapshotNext). The command id
// derives from definition, snapshot, its start and the phase, so two serves, or a
// report folded again, record each phase once.
func SnapshotProgressFrom(v *projections.View, name string) ([]admission.Request, error) {
	rd, ok, err := v.ResourceDefinition(name)
	if err != nil || !ok || len(rd.Snapshots) == 0 {
		return nil, err
	}
	statuses, err := v.ResourceStatus(name)
	if err != nil {
		return nil, err
	}
	var out []admission.Request
	exists := func(name string) bool { _, ok, _ := v.ResourceDefinition(name); return ok }
	for _, c := range resources.ClonesDue(rd, exists) {
		body, _ := json.Marshal(c)
		out = append(out, admission.Request{Verb: "rd.restore", Body: body, Actor: "serve:snapshots", ForgetRefusals: true,
			CommandID: commandID("clone", c.Resource, c.Snapshot, c.Target)})
	}
	// A clone whose snapshot failed at the suspension bound is started again.
	for _, c := range resources.ClonesToRetry(rd, exists, Now()) {
		seq := strconv.FormatUint(c.StartedSeq, 10)
		del, _ := json.Marshal(map[string]string{"resource": c.Resource, "name": c.Snapshot})
		again, _ := json.Marshal(resources.SnapshotClone{Resource: c.Resource, Target: c.Target})
		out = append(out,
			admission.Request{Verb: "rd.snapshot-delete", Body: del, Actor: "serve:snapshots", ForgetRefusals: true,
				CommandID: commandID("clone-retry-delete", c.Resource, c.Snapshot, seq)},
			admission.Request{Verb: "rd.clone", Body: again, Actor: "serve:snapshots", ForgetRefusals: true,
				CommandID: commandID("clone-retry", c.Resource, c.Target, seq)})
	}
	// A clone's snapshot goes once its target's disks were made from it (LINSTOR's clone
	// leaves none behind; every CSI clone would otherwise leak one).
	target := func(name string) (projections.ResourceDefinition, bool, map[string]drbd.Status) {
		t, ok, err := v.ResourceDefinition(name)
		if err != nil || !ok {
			return t, false, nil
		}
		st, _ := v.ResourceStatus(name)
		return t, true, st
	}
	for _, snap := range resources.CloneCleanupDue(rd, target) {
		s, _ := rd.Snapshot(snap)
		body, _ := json.Marshal(map[string]string{"resource": rd.Name, "name": snap})
		out = append(out, admission.Request{Verb: "rd.snapshot-delete", Body: body, Actor: "serve:snapshots", ForgetRefusals: true,
			CommandID: commandID("clone-done", rd.Name, snap, strconv.FormatUint(s.StartedSeq, 10))})
	}
	for _, s := range rd.Snapshots {
		if len(s.Group) > 0 {
			if s.Phase == projections.SnapshotSuspending || s.Phase == projections.SnapshotTaking {
				reqs, err := groupProgress(v, s.Group)
				if err != nil {
					return nil, err
				}
				out = append(out, reqs...)
			}
			continue
		}
		phase, reason, ok := resources.SnapshotNext(s, statuses)
		if !ok {
			continue
		}
		out = append(out, progressRequest(rd.Name, s, phase, reason))
	}
	return out, nil
}

// progressRequest records phase of snapshot s of definition rd; the command id derives
// from both, its start and the phase.
func progressRequest(rd string, s projections.RDSnapshot, phase, reason string) admission.Request {
	body, _ := json.Marshal(resources.SnapshotProgress{Resource: rd, Name: s.Name, Phase: phase, Reason: reason})
	return admission.Request{Verb: "rd.snapshot-progress", Body: body, Actor: "serve:snapshots", ForgetRefusals: true,
		CommandID: commandID("snapshot", rd, s.Name, strconv.FormatUint(s.StartedSeq, 10), phase)}
}

// groupProgress returns the progress of every member of a group snapshot that the
// group's reports call for (resources.SnapshotGroupNext): one report advances them all.
func groupProgress(v *projections.View, group []events.RDSnapshotRef) ([]admission.Request, error) {
	members := make([]resources.GroupMember, 0, len(group))
	for _, ref := range group {
		m := resources.GroupMember{Ref: ref}
		rd, ok, err := v.ResourceDefinition(ref.Resource)
		if err != nil {
			return nil, err
		}
		if ok {
			if s, has := rd.Snapshot(ref.Name); has && resources.InGroup(*s, group) {
				m.Snapshot, m.Found = *s, true
				if m.Statuses, err = v.ResourceStatus(ref.Resource); err != nil {
					return nil, err
				}
			}
		}
		members = append(members, m)
	}
	phase, reason, ok := resources.SnapshotGroupNext(members)
	if !ok {
		return nil, nil
	}
	var out []admission.Request
	for _, m := range members {
		p := m.Snapshot.Phase
		if m.Found && (phase == "take" && p == projections.SnapshotSuspending || phase == "taken" && p == projections.SnapshotTaking ||
			phase == "failed" && (p == projections.SnapshotSuspending || p == projections.SnapshotTaking)) {
			out = append(out, progressRequest(m.Ref.Resource, m.Snapshot, phase, reason))
		}
	}
	return out, nil
}

// Now is the policies' clock (tests set it).
var Now = time.Now

// SnapshotAdvancer records the next phase of snapshots from their nodes' reports
// while this serve holds the lease: at once for every report folded (hook), and by a
// sweep over the snapshots under way every SweepEvery (sweep), which catches what a
// report folded while the lease was elsewhere, or a refused attempt, left behind.
type SnapshotAdvancer struct {
	Adm     *admission.Admission
	DB      *projections.DB
	Leading func() (uint64, bool) // the side-effect lease's Leading
	Log     zerolog.Logger
}

// SnapshotSweepEvery is how often the lease holder looks at the snapshots under way.
var SnapshotSweepEvery = time.Second

// Hook returns the status folder's DRBD hook: it advances the snapshots of every
// reported resource while this serve leads.
func (a SnapshotAdvancer) Hook(ctx context.Context) func(drbd.Status) {
	return func(st drbd.Status) {
		if len(st.Snapshots) == 0 {
			return
		}
		if _, lead := a.Leading(); lead {
			a.advance(ctx, st.Resource)
		}
	}
}

// Sweep advances every definition with a snapshot under way, every SnapshotSweepEvery,
// until ctx ends (run while holding the lease).
func (a SnapshotAdvancer) Sweep(ctx context.Context) {
	t := time.NewTicker(SnapshotSweepEvery)
	defer t.Stop()
	for {
		v, err := a.DB.Read()
		if err == nil {
			var rds []string
			rds, err = v.DefinitionsWithSnapshotsUnderWay()
			v.Close()
			for _, rd := range rds {
				a.advance(ctx, rd)
			}
		}
		if err != nil {
			a.Log.Warn().Err(err).Msg("snapshots under way unreadable")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (a SnapshotAdvancer) advance(ctx context.Context, rd string) {
	v, err := a.DB.Read()
	if err != nil {
		a.Log.Warn().Err(err).Msg("snapshot reports not read")
		return
	}
	reqs, err := SnapshotProgressFrom(v, rd)
	v.Close()
	if err != nil {
		a.Log.Warn().Err(err).Str("resource", rd).Msg("snapshot reports not read")
		return
	}
	for _, req := range reqs {
		r := a.Adm.Submit(ctx, req)
		ev := a.Log.Info()
		if !r.OK {
			ev = a.Log.Debug().Str("error", r.Error.Message) // a phase another report already recorded
		}
		ev.Str("resource", rd).RawJSON("progress", req.Body).Bool("recorded", r.OK && len(r.Events) > 0).Msg("snapshot progress")
	}
}
