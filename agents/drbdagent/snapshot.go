package drbdagent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/cairn-io/cairn/agents/volume"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/cairn-io/cairn/storage/backing"
)

// DefaultSuspendBound is the longest an agent keeps a resource's I/O suspended for a
// snapshot when the order to take it does not come (Config.SuspendBound).
const DefaultSuspendBound = 2 * time.Second

// snapshots carries out d's snapshot orders on a resource that is up (see
// docs/agent.md "Snapshots"): suspend I/O and wait for the order to take; take
// (snapshot every backing volume, resume); keep; abort (resume, remove what was
// taken). Snapshots recorded in st that d no longer lists are deleted. Suspension
// never outlasts SuspendBound: a timer resumes I/O and records the snapshot aborted.
func (r *Reconciler) snapshots(ctx context.Context, rd string, d *drbd.Desired, st *State, prov volume.Provider, save func(*State) error) error {
	if len(d.Snapshots) == 0 && len(st.Snapshots) == 0 {
		return nil
	}
	var snapper volume.Snapshotter
	if prov != nil {
		snapper, _ = volume.SnapshotsOf(prov, d.Local.Provider)
	}
	if st.Snapshots == nil {
		st.Snapshots = map[string]*SnapState{}
	}
	minors := sortedMinors(st)
	bound := r.cfg.SuspendBound
	// drop resumes I/O held for a snapshot and removes it from the node and from st.
	drop := func(name, why string) error {
		if ss := st.Snapshots[name]; ss != nil && ss.Phase == drbd.SnapSuspended {
			r.abortSuspended(ctx, rd, minors, ss, why)
		}
		if err := deleteAll(ctx, snapper, rd, diskVolumes(st), name); err != nil {
			return err
		}
		delete(st.Snapshots, name)
		return save(st)
	}
	listed := map[string]bool{}
	for _, o := range d.Snapshots {
		listed[o.Name] = true
		ss := st.Snapshots[o.Name]
		if ss != nil && ss.Seq != o.Seq { // an older snapshot of the same name: gone
			if err := drop(o.Name, "replaced"); err != nil {
				return err
			}
			ss = nil
		}
		switch o.Phase {
		case drbd.SnapSuspend:
			switch {
			case ss == nil && (!d.Active || snapper == nil):
				why := "the resource is not active here"
				if snapper == nil {
					why = fmt.Sprintf("provider %s has no snapshots", d.Local.Provider)
				}
				st.Snapshots[o.Name] = &SnapState{Seq: o.Seq, Phase: drbd.SnapFailed, Error: why}
			case ss == nil:
				ss = &SnapState{Seq: o.Seq, Phase: drbd.SnapSuspended, SuspendedAt: time.Now().UTC()}
				st.Snapshots[o.Name] = ss
				if err := save(st); err != nil { // before suspend-io: a crash after it resumes
					return err
				}
				if err := r.cfg.Kernel.SuspendIO(ctx, rd, minors); err != nil {
					_ = r.cfg.Kernel.ResumeIO(ctx, rd, minors)
					ss.Phase, ss.Error = drbd.SnapFailed, fmt.Sprintf("suspend-io: %v", err)
					break
				}
				metricSteps.WithLabelValues("suspend-io").Inc()
				r.armResume(rd, o.Name, bound)
			case ss.Phase == drbd.SnapSuspended:
				if left := bound - time.Since(ss.SuspendedAt); left > 0 {
					r.armResume(rd, o.Name, left) // after a restart: the bound still holds
				} else {
					r.abortSuspended(ctx, rd, minors, ss, "suspended for the whole bound without the order to take it")
				}
			}
		case drbd.SnapTake:
			switch {
			case ss == nil:
				st.Snapshots[o.Name] = &SnapState{Seq: o.Seq, Phase: drbd.SnapAborted, Error: "I/O was not suspended here when the order to take came"}
			case ss.Phase == drbd.SnapSuspended && time.Since(ss.SuspendedAt) > bound:
				r.abortSuspended(ctx, rd, minors, ss, "the order to take came after the suspension bound")
			case ss.Phase == drbd.SnapSuspended:
				err := takeAll(ctx, snapper, rd, diskVolumes(st), o.Name)
				r.resume(ctx, rd, minors, ss)
				if err != nil {
					ss.Phase, ss.Error = drbd.SnapFailed, err.Error()
					break
				}
				ss.Phase = drbd.SnapTaken
				metricSteps.WithLabelValues("snapshot").Inc()
			}
		case drbd.SnapAbort:
			// Once: resume if suspended, remove what was taken, record it aborted.
			switch {
			case ss == nil:
				st.Snapshots[o.Name] = &SnapState{Seq: o.Seq, Phase: drbd.SnapAborted, Error: "aborted"}
			case ss.Phase == drbd.SnapSuspended:
				r.abortSuspended(ctx, rd, minors, ss, "aborted")
			case ss.Phase == drbd.SnapTaken || ss.Phase == drbd.SnapFailed:
				if err := deleteAll(ctx, snapper, rd, diskVolumes(st), o.Name); err != nil {
					return err
				}
				ss.Phase = drbd.SnapAborted
			}
		}
		if err := save(st); err != nil {
			return err
		}
	}
	for name := range st.Snapshots {
		if !listed[name] {
			if err := drop(name, "deleted"); err != nil {
				return err
			}
		}
	}
	return nil
}

// resume resumes I/O and records how long it was suspended.
func (r *Reconciler) resume(ctx context.Context, rd string, minors []int, ss *SnapState) {
	if err := r.cfg.Kernel.ResumeIO(ctx, rd, minors); err != nil {
		r.cfg.Log.Error().Err(err).Str("resource", rd).Msg("resume-io failed: I/O may still be suspended")
	}
	ss.SuspendedMs = float64(time.Since(ss.SuspendedAt).Microseconds()) / 1000
	metricSteps.WithLabelValues("resume-io").Inc()
}

func (r *Reconciler) abortSuspended(ctx context.Context, rd string, minors []int, ss *SnapState, why string) {
	r.resume(ctx, rd, minors, ss)
	ss.Phase, ss.Error = drbd.SnapAborted, why
}

// armResume makes sure a timer resumes rd's I/O for snapshot name after d, unless the
// snapshot left the suspended phase by then.
func (r *Reconciler) armResume(rd, name string, d time.Duration) {
	key := rd + "@" + name
	r.timersMu.Lock()
	defer r.timersMu.Unlock()
	if r.timers[key] != nil {
		return
	}
	r.timers[key] = time.AfterFunc(d, func() {
		r.timersMu.Lock()
		delete(r.timers, key)
		r.timersMu.Unlock()
		r.expire(rd, name)
	})
}

// expire resumes I/O of a snapshot still suspended at its bound, records it aborted
// and publishes the status.
func (r *Reconciler) expire(rd, name string) {
	unlock := r.lockResource(rd)
	defer unlock()
	path := r.cfg.Paths.StateFile(rd)
	st, err := LoadState(path)
	if err != nil || st == nil {
		return
	}
	ss := st.Snapshots[name]
	if ss == nil || ss.Phase != drbd.SnapSuspended {
		return
	}
	ctx := context.Background()
	r.abortSuspended(ctx, rd, sortedMinors(st), ss, "suspended for the whole bound without the order to take it")
	if err := SaveState(path, st); err != nil {
		r.cfg.Log.Error().Err(err).Str("resource", rd).Msg("snapshot abort not recorded")
	}
	r.cfg.Log.Warn().Str("resource", rd).Str("snapshot", name).Float64("suspended_ms", ss.SuspendedMs).Msg("snapshot aborted: I/O resumed at the suspension bound")
	r.mu.Lock()
	if info := r.res[rd]; info != nil {
		info.state = st
	}
	r.mu.Unlock()
	r.pub.now(ctx, rd)
}

func takeAll(ctx context.Context, s volume.Snapshotter, rd string, vols []int, snap string) error {
	if s == nil {
		return fmt.Errorf("no snapshots on this provider")
	}
	for _, v := range vols {
		if err := s.Snapshot(ctx, backing.VolumeName(rd, v), snap); err != nil {
			return err
		}
	}
	return nil
}

// deleteAll removes snapshot snap of the given volumes of rd; nothing without a
// Snapshotter (a provider without snapshots never took one).
func deleteAll(ctx context.Context, s volume.Snapshotter, rd string, vols []int, snap string) error {
	if s == nil {
		return nil
	}
	for _, v := range vols {
		if err := s.DeleteSnapshot(ctx, backing.VolumeName(rd, v), snap); err != nil {
			return err
		}
	}
	return nil
}

// diskVolumes lists the volumes st has backing disks for, sorted.
func diskVolumes(st *State) []int {
	return slices.Sorted(maps.Keys(st.Disks))
}

func sortedMinors(st *State) []int {
	var out []int
	for _, m := range st.Minors {
		out = append(out, m)
	}
	sort.Ints(out)
	return out
}

// snapshotStatuses is the status view of st's snapshots, by name.
func snapshotStatuses(st *State) []drbd.SnapshotStatus {
	if st == nil {
		return nil
	}
	var out []drbd.SnapshotStatus
	for name, ss := range st.Snapshots {
		out = append(out, drbd.SnapshotStatus{Name: name, Seq: ss.Seq, Phase: ss.Phase, Error: ss.Error, SuspendedMs: ss.SuspendedMs})
	}
	slices.SortFunc(out, func(a, b drbd.SnapshotStatus) int {
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	return out
}

// rollback takes rd down (the control plane asked for it deactivated, but a host may
// have it up), makes every backing volume hold snapshot rb.Snapshot again, gives it fresh
// metadata and the rollback's seeds (the same current UUID on every disk: they connect
// without a resync), and records it, so it runs once per rollback.
func (r *Reconciler) rollback(ctx context.Context, rd string, d *drbd.Desired, st *State, prov volume.Provider, save func(*State) error) error {
	rb := d.Local.Rollback
	snapper, err := volume.SnapshotsOf(prov, d.Local.Provider)
	if err != nil {
		return err
	}
	if err := r.cfg.Kernel.Down(ctx, rd); err != nil {
		return fmt.Errorf("rollback: down: %w", err)
	}
	for _, v := range d.Volumes {
		name := backing.VolumeName(rd, v.Number)
		if err := snapper.Rollback(ctx, name, rb.Snapshot, drbd.BackingKiB(v.SizeKiB, st.MaxPeers)); err != nil {
			return err
		}
		if _, err := r.run(ctx, drbdutils.CreateMD(st.Minors[v.Number], st.Disks[v.Number], st.MaxPeers)); err != nil {
			return fmt.Errorf("rollback: create-md volume %d: %w", v.Number, err)
		}
	}
	for _, s := range rb.Seeds {
		if _, err := r.run(ctx, drbdutils.SeedArgv(st.Minors[s.Volume], st.Disks[s.Volume], s)); err != nil {
			return fmt.Errorf("rollback: set-gi volume %d: %w", s.Volume, err)
		}
	}
	st.RolledBack = rb.Seq
	if err := save(st); err != nil {
		return err
	}
	metricSteps.WithLabelValues("rollback").Inc()
	return r.step(rd, "rolled-back")
}
