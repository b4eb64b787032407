package drbdagent

import (
	"context"
	"errors"
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
// snapshot (Config.SuspendBound).
const DefaultSuspendBound = 2 * time.Second

// resumeTimeout bounds one resume-io (it runs under no caller's context: a shutdown
// must not cancel it); resumeRetry is the wait before a failed resume is tried again.
const (
	resumeTimeout = 30 * time.Second
	resumeRetry   = time.Second
)

// snapshots carries out d's snapshot orders on a resource that is up (see
// docs/agent.md "Snapshots"), on a disk or a diskless replica alike:
//   - suspend: suspend I/O and wait;
//   - take: snapshot every backing volume (a diskless replica has none) under a
//     deadline of the suspension bound, and keep I/O suspended;
//   - keep (every node took its copy): resume I/O;
//   - abort: resume I/O if suspended, remove what was taken.
//
// Snapshots recorded in st that d no longer lists are deleted. Suspension never
// outlasts SuspendBound: a timer resumes I/O and records the snapshot aborted (a copy
// taken before is not one moment with the others any more: the serve fails it). A
// resume that fails leaves the snapshot held and is retried (the error is returned, and
// the timer tries again); nothing leaves a held snapshot until resume-io succeeded.
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
	if d.Local.Diskless {
		minors = sortedMinors(&State{Minors: localMinors(d)})
	}
	bound := r.cfg.SuspendBound
	// drop resumes I/O held for a snapshot and removes it from the node and from st.
	drop := func(name, why string) error {
		if ss := st.Snapshots[name]; ss != nil && ss.held() {
			if err := r.release(ctx, rd, minors, ss, drbd.SnapAborted, why); err != nil {
				return errors.Join(err, save(st))
			}
		}
		if err := deleteAll(ctx, snapper, rd, diskVolumes(st), name); err != nil {
			return err
		}
		delete(st.Snapshots, name)
		return save(st)
	}
	var errs []error
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
		if ss != nil && ss.held() {
			ss.Held = true // a state file from before Held
			if left := bound - time.Since(ss.SuspendedAt); left > 0 && o.Phase != drbd.SnapKeep && o.Phase != drbd.SnapAbort {
				r.armResume(rd, o.Name, left) // after a restart: the bound still holds
			} else if left <= 0 && o.Phase != drbd.SnapKeep {
				why := "suspended for the whole bound without the order to take it"
				if ss.Phase == drbd.SnapTaken {
					why = "I/O resumed at the suspension bound before every node had taken its copy"
				}
				if err := r.release(ctx, rd, minors, ss, drbd.SnapAborted, why); err != nil {
					errs = append(errs, err)
				}
			}
		}
		switch o.Phase {
		case drbd.SnapSuspend:
			switch {
			case ss == nil && (!d.Active || snapper == nil && !d.Local.Diskless):
				why := "the resource is not active here"
				if d.Active {
					why = fmt.Sprintf("provider %s has no snapshots", d.Local.Provider)
				}
				st.Snapshots[o.Name] = &SnapState{Seq: o.Seq, Phase: drbd.SnapFailed, Error: why}
			case ss == nil:
				if r.cfg.BeforeSuspend != nil {
					r.cfg.BeforeSuspend(ctx, rd)
				}
				ss = &SnapState{Seq: o.Seq, Phase: drbd.SnapSuspended, Held: true, Minors: minors, SuspendedAt: time.Now().UTC()}
				st.Snapshots[o.Name] = ss
				if err := save(st); err != nil { // before suspend-io: a crash after it resumes
					return err
				}
				r.armResume(rd, o.Name, bound)
				if err := r.cfg.Kernel.SuspendIO(ctx, rd, minors); err != nil {
					if rerr := r.release(ctx, rd, minors, ss, drbd.SnapFailed, fmt.Sprintf("suspend-io: %v", err)); rerr != nil {
						errs = append(errs, rerr)
					}
					break
				}
				metricSteps.WithLabelValues("suspend-io").Inc()
			}
		case drbd.SnapTake:
			switch {
			case ss == nil:
				st.Snapshots[o.Name] = &SnapState{Seq: o.Seq, Phase: drbd.SnapAborted, Error: "I/O was not suspended here when the order to take came"}
			case ss.Phase == drbd.SnapSuspended && ss.Held:
				ss.Copies = !d.Local.Diskless
				if err := save(st); err != nil {
					return err
				}
				if err := r.take(ctx, rd, d, st, ss, snapper, o.Name); err != nil {
					if rerr := r.release(ctx, rd, minors, ss, drbd.SnapFailed, err.Error()); rerr != nil {
						errs = append(errs, rerr)
					}
					break
				}
				ss.Phase = drbd.SnapTaken // I/O stays suspended until every node has its copy
				metricSteps.WithLabelValues("snapshot").Inc()
			}
		case drbd.SnapKeep:
			if ss != nil && ss.Held {
				phase, why := ss.Phase, ss.Error
				if phase == drbd.SnapSuspended { // kept without this node's take: no copy here
					phase, why = drbd.SnapAborted, "the snapshot was kept before this node took its copy"
				}
				if err := r.release(ctx, rd, minors, ss, phase, why); err != nil {
					errs = append(errs, err)
				}
			}
		case drbd.SnapAbort:
			// Once: resume if suspended, remove what was taken, record it aborted.
			switch {
			case ss == nil:
				st.Snapshots[o.Name] = &SnapState{Seq: o.Seq, Phase: drbd.SnapAborted, Error: "aborted"}
			case ss.Held:
				if err := r.release(ctx, rd, minors, ss, drbd.SnapAborted, "aborted"); err != nil {
					errs = append(errs, err)
				}
			}
			if ss != nil && !ss.Held && (ss.Copies || ss.Phase == drbd.SnapTaken || ss.Phase == drbd.SnapFailed) {
				if err := deleteAll(ctx, snapper, rd, diskVolumes(st), o.Name); err != nil {
					return err
				}
				ss.Phase, ss.Copies = drbd.SnapAborted, false
			}
		}
		if err := save(st); err != nil {
			return err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
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

// take snapshots every backing volume of rd under a deadline: the suspension bound
// counted from ss.SuspendedAt (a copy that cannot finish in time, e.g. a full copy
// where the file system has no reflinks, is cut short and fails the snapshot rather
// than keep I/O suspended). A diskless replica has nothing to take.
func (r *Reconciler) take(ctx context.Context, rd string, d *drbd.Desired, st *State, ss *SnapState, snapper volume.Snapshotter, name string) error {
	tctx, cancel := context.WithDeadline(ctx, ss.SuspendedAt.Add(r.cfg.SuspendBound))
	defer cancel()
	if r.cfg.BeforeTake != nil {
		r.cfg.BeforeTake(tctx, rd)
	}
	if d.Local.Diskless {
		return tctx.Err()
	}
	err := takeAll(tctx, snapper, rd, diskVolumes(st), name)
	if err != nil && tctx.Err() != nil {
		return fmt.Errorf("the copy did not finish within the suspension bound (%s): %w", r.cfg.SuspendBound, err)
	}
	return err
}

// release resumes I/O held for snapshot ss and, only once resume-io succeeded, records
// the snapshot's phase (and why, for aborted or failed) and how long I/O was suspended.
// resume-io runs under a context no shutdown cancels (bounded by resumeTimeout); when it
// fails, ss stays held with the error and a timer tries again after resumeRetry.
func (r *Reconciler) release(ctx context.Context, rd string, minors []int, ss *SnapState, phase, why string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resumeTimeout)
	defer cancel()
	if len(ss.Minors) > 0 {
		minors = ss.Minors
	}
	if err := r.cfg.Kernel.ResumeIO(rctx, rd, minors); err != nil {
		metricResumeFailures.Inc()
		ss.Error = fmt.Sprintf("resume-io failed (retried): %v", err)
		r.cfg.Log.Error().Err(err).Str("resource", rd).Msg("resume-io failed: I/O is still suspended; retrying")
		r.retryResume(rd)
		return fmt.Errorf("resume-io of %s: %w", rd, err)
	}
	ss.Held = false
	ss.SuspendedMs = float64(time.Since(ss.SuspendedAt).Microseconds()) / 1000
	ss.Phase, ss.Error = phase, why
	if phase == drbd.SnapTaken {
		ss.Error = ""
	}
	metricSteps.WithLabelValues("resume-io").Inc()
	return nil
}

// armResume makes sure a timer resumes rd's I/O for snapshot name after d, unless the
// snapshot is no longer held by then.
func (r *Reconciler) armResume(rd, name string, d time.Duration) { r.arm(rd, name, name, d) }

// retryResume arms a timer that releases every held snapshot of rd past its bound
// after resumeRetry.
func (r *Reconciler) retryResume(rd string) { r.arm(rd, "#retry", "", resumeRetry) } // "#": no snapshot name

// arm makes sure one timer (rd, key) runs expire(rd, name) after d.
func (r *Reconciler) arm(rd, key, name string, d time.Duration) {
	k := rd + "@" + key
	r.timersMu.Lock()
	defer r.timersMu.Unlock()
	if r.timers[k] != nil {
		return
	}
	r.timers[k] = time.AfterFunc(d, func() {
		r.timersMu.Lock()
		delete(r.timers, k)
		r.timersMu.Unlock()
		r.expire(rd, name)
	})
}

// expire resumes I/O of snapshot name of rd (every snapshot of rd when name is "") still
// held at its bound, records it aborted and publishes the status.
func (r *Reconciler) expire(rd, name string) {
	unlock := r.lockResource(rd)
	defer unlock()
	path := r.cfg.Paths.StateFile(rd)
	st, err := LoadState(path)
	if err != nil || st == nil {
		return
	}
	changed := false
	for n, ss := range st.Snapshots {
		if name != "" && n != name || !ss.held() {
			continue
		}
		if left := r.cfg.SuspendBound - time.Since(ss.SuspendedAt); left > 0 {
			r.armResume(rd, n, left)
			continue
		}
		why := "suspended for the whole bound without the order to take it"
		if ss.Phase == drbd.SnapTaken {
			why = "I/O resumed at the suspension bound before every node had taken its copy"
		}
		ss.Held = true
		if err := r.release(context.Background(), rd, r.minorsOf(rd, st), ss, drbd.SnapAborted, why); err != nil {
			changed = true // the error is recorded; the retry timer is armed
			continue
		}
		changed = true
		r.cfg.Log.Warn().Str("resource", rd).Str("snapshot", n).Float64("suspended_ms", ss.SuspendedMs).Msg("snapshot aborted: I/O resumed at the suspension bound")
	}
	if !changed {
		return
	}
	if err := SaveState(path, st); err != nil {
		r.cfg.Log.Error().Err(err).Str("resource", rd).Msg("snapshot abort not recorded")
	}
	r.mu.Lock()
	if info := r.res[rd]; info != nil {
		info.state = st
	}
	r.mu.Unlock()
	r.pub.now(context.Background(), rd)
}

// minorsOf returns rd's local minors: the state file's (a disk), else those of the
// last desired state (a diskless replica).
func (r *Reconciler) minorsOf(rd string, st *State) []int {
	if m := sortedMinors(st); len(m) > 0 {
		return m
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := r.res[rd]; i != nil && i.desired != nil {
		return sortedMinors(&State{Minors: localMinors(i.desired)})
	}
	return nil
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
		out = append(out, drbd.SnapshotStatus{Name: name, Seq: ss.Seq, Phase: ss.Phase, Error: ss.Error, SuspendedMs: ss.SuspendedMs, Held: ss.held()})
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
