package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/commands/remotes"
	"github.com/cairn-io/cairn/commands/resources"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backup"
)

// A backup schedule's runs (docs/backups.md "Schedules"): the lease holder looks at every
// enablement every ScheduleCheckEvery; a definition whose schedule is due gets a snapshot
// (<schedule>-<time>) and, once it is taken, backup.create of it (full when the full cron
// is due, else incremental), recorded with the schedule's name and how many due times it
// missed; then retention deletes the schedule's older snapshots (keep_local) and older
// full backups with their incrementals (keep_remote).

// RunDue is what DecideRun says about one definition's schedule on one remote.
type RunDue struct {
	Due  bool
	Full bool
	// At is the due time of the run (the first one not run); Missed how many due times
	// after it passed too (one run covers them all).
	At     time.Time
	Missed int
	// Why says what the run is, or why none is due.
	Why string
}

// DecideRun decides whether a run of schedule s is due for a definition at now, from its
// earlier runs of that schedule on that remote (runs) and when the schedule was enabled
// for it. Pure. The full cron is counted from the last full run (or the enablement),
// the incremental one from the last run; a run under way postpones the next one; a
// failed run is tried again while on_failure is retry and fewer than max_retries
// failed in a row.
func DecideRun(s projections.Schedule, enabledAt time.Time, runs []projections.RDBackup, now time.Time) (RunDue, error) {
	full, err := remotes.ParseCron(s.FullCron)
	if err != nil {
		return RunDue{}, fmt.Errorf("schedule %s: full_cron: %w", s.Name, err)
	}
	runs = slices.Clone(runs)
	sort.Slice(runs, func(i, j int) bool { return runs[i].StartedSeq < runs[j].StartedSeq })
	var lastFull, lastAny *projections.RDBackup
	failedInRow := 0
	for i := range runs {
		r := &runs[i]
		if r.Phase == projections.BackupUploading {
			return RunDue{Why: "run " + r.ID + " is under way"}, nil
		}
		lastAny = r
		if r.Phase == projections.BackupFailed {
			failedInRow++
			continue
		}
		failedInRow = 0
		if r.Base == "" && r.Phase != projections.BackupDeleted {
			lastFull = r
		}
	}
	if lastAny != nil && lastAny.Phase == projections.BackupFailed && s.OnFailure == "retry" && failedInRow <= s.MaxRetries {
		return RunDue{Due: true, Full: lastAny.Base == "", At: now, Why: fmt.Sprintf("retry %d of %d after %s failed", failedInRow, s.MaxRetries, lastAny.ID)}, nil
	}
	from := enabledAt
	if lastFull != nil {
		from = lastFull.StartedAt
	}
	if at := full.Next(from); !at.After(now) {
		return RunDue{Due: true, Full: true, At: at, Missed: missed(full, at, now), Why: "full backup due at " + at.Format(time.RFC3339)}, nil
	}
	if s.IncCron == "" || lastFull == nil {
		return RunDue{Why: "next full backup at " + full.Next(from).Format(time.RFC3339)}, nil
	}
	inc, err := remotes.ParseCron(s.IncCron)
	if err != nil {
		return RunDue{}, fmt.Errorf("schedule %s: inc_cron: %w", s.Name, err)
	}
	if at := inc.Next(lastAny.StartedAt); !at.After(now) {
		return RunDue{Due: true, At: at, Missed: missed(inc, at, now), Why: "incremental backup due at " + at.Format(time.RFC3339)}, nil
	}
	return RunDue{Why: "next incremental backup at " + inc.Next(lastAny.StartedAt).Format(time.RFC3339)}, nil
}

// missed counts the due times after at up to now (at most 10,000).
func missed(c interface{ Next(time.Time) time.Time }, at, now time.Time) int {
	n := 0
	for t := c.Next(at); !t.After(now) && n < 10000; t = c.Next(t) {
		n++
	}
	return n
}

// RunName is the snapshot and backup id of a run of schedule due at: <schedule>-<UTC
// time to the second>, the schedule's name shortened to fit 48 characters.
func RunName(schedule string, at time.Time) string {
	stamp := at.UTC().Format("20060102t150405")
	if max := 48 - 1 - len(stamp); len(schedule) > max {
		schedule = schedule[:max]
	}
	return schedule + "-" + stamp
}

// Retention returns, for one definition's runs of schedule s on a remote and its
// snapshots, the snapshots to delete (beyond the newest keep_local of the schedule's,
// none an upload still reads) and the backups to delete (every run older than the
// oldest of the newest keep_remote complete full backups). Pure.
func Retention(s projections.Schedule, rd projections.ResourceDefinition, remote string) (snapshots, backups []string) {
	prefix := RunName(s.Name, time.Time{})
	prefix = prefix[:len(prefix)-len("00010101t000000")]
	if s.KeepLocal > 0 {
		var mine []projections.RDSnapshot
		for _, snap := range rd.Snapshots {
			if strings.HasPrefix(snap.Name, prefix) && snap.Phase == projections.SnapshotTaken {
				mine = append(mine, snap)
			}
		}
		sort.Slice(mine, func(i, j int) bool { return mine[i].StartedSeq > mine[j].StartedSeq })
		for _, snap := range mine[min(len(mine), s.KeepLocal):] {
			inUse := slices.ContainsFunc(rd.Backups, func(b projections.RDBackup) bool {
				return b.Snapshot == snap.Name && b.Phase == projections.BackupUploading
			})
			if !inUse {
				snapshots = append(snapshots, snap.Name)
			}
		}
	}
	if s.KeepRemote > 0 {
		var runs []projections.RDBackup
		for _, b := range rd.Backups {
			if b.Remote == remote && b.Schedule == s.Name {
				runs = append(runs, b)
			}
		}
		sort.Slice(runs, func(i, j int) bool { return runs[i].StartedSeq > runs[j].StartedSeq })
		fulls := 0
		var cut uint64 // runs started before the oldest full kept go
		for _, b := range runs {
			if b.Phase == projections.BackupDone && b.Base == "" {
				fulls++
				if fulls == s.KeepRemote {
					cut = b.StartedSeq
					break
				}
			}
		}
		for _, b := range runs {
			if cut > 0 && b.StartedSeq < cut && b.Phase == projections.BackupDone {
				backups = append(backups, b.ID)
			}
		}
	}
	return snapshots, backups
}

// Scheduler runs the backup schedules while this serve holds the lease.
type Scheduler struct {
	Adm     *admission.Admission
	DB      *projections.DB
	Remotes func(name string) (backup.Store, error)
	Log     zerolog.Logger
	// Every is how often the enablements are looked at (ScheduleCheckEvery).
	Every time.Duration
	// SnapshotWait bounds how long a run waits for its snapshot (2 min).
	SnapshotWait time.Duration
	Now          func() time.Time

	mu       sync.Mutex
	inFlight map[string]time.Time // runs being started, by definition/remote/schedule
}

// ScheduleCheckEvery is how often the lease holder looks at the schedules by default.
const ScheduleCheckEvery = 10 * time.Second

// Run checks the schedules every s.Every until ctx ends (run while holding the lease).
func (s *Scheduler) Run(ctx context.Context) {
	if s.Every <= 0 {
		s.Every = ScheduleCheckEvery
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.SnapshotWait <= 0 {
		s.SnapshotWait = 2 * time.Minute
	}
	s.mu.Lock()
	if s.inFlight == nil {
		s.inFlight = map[string]time.Time{}
	}
	s.mu.Unlock()
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		if err := s.check(ctx); err != nil {
			s.Log.Warn().Err(err).Msg("schedules not checked")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// job is one definition's schedule on one remote.
type job struct {
	remote, rd string
	sched      projections.Schedule
	enabledAt  time.Time
}

func (s *Scheduler) check(ctx context.Context) error {
	v, err := s.DB.Read()
	if err != nil {
		return err
	}
	var jobs []job
	var defs = map[string]projections.ResourceDefinition{}
	err = func() error {
		defer v.Close()
		ens, err := v.ScheduleEnablements("")
		if err != nil {
			return err
		}
		for _, e := range ens {
			sched, ok, err := v.Schedule(e.Schedule)
			if err != nil || !ok {
				continue
			}
			rds := []string{e.Resource}
			if e.Group != "" {
				if rds, err = v.GroupDefinitions(e.Group, 100000); err != nil {
					return err
				}
			}
			for _, name := range rds {
				rd, ok, err := v.ResourceDefinition(name)
				if err != nil {
					return err
				}
				if ok && len(rd.Replicas) > 0 {
					defs[name] = rd
					jobs = append(jobs, job{remote: e.Remote, rd: name, sched: sched, enabledAt: e.EnabledAt})
				}
			}
		}
		return nil
	}()
	if err != nil {
		return err
	}
	now := s.Now()
	for _, j := range jobs {
		rd := defs[j.rd]
		var runs []projections.RDBackup
		for _, b := range rd.Backups {
			if b.Remote == j.remote && b.Schedule == j.sched.Name {
				runs = append(runs, b)
			}
		}
		due, err := DecideRun(j.sched, j.enabledAt, runs, now)
		if err != nil {
			s.Log.Warn().Err(err).Msg("schedule unreadable")
			continue
		}
		if due.Due {
			key := j.rd + "/" + j.remote + "/" + j.sched.Name
			s.mu.Lock()
			busy := !s.inFlight[key].IsZero()
			if !busy {
				s.inFlight[key] = now
			}
			s.mu.Unlock()
			if !busy {
				go func() {
					defer func() { s.mu.Lock(); delete(s.inFlight, key); s.mu.Unlock() }()
					s.runOnce(ctx, j, due)
				}()
			}
		}
		s.retain(ctx, j, rd)
	}
	return nil
}

// runOnce takes the run's snapshot, waits until it is taken and starts its backup.
func (s *Scheduler) runOnce(ctx context.Context, j job, due RunDue) {
	name := RunName(j.sched.Name, due.At)
	log := s.Log.With().Str("schedule", j.sched.Name).Str("resource", j.rd).Str("remote", j.remote).Str("run", name).Logger()
	log.Info().Str("why", due.Why).Int("missed", due.Missed).Bool("full", due.Full).Msg("scheduled backup due")
	if due.Missed > 0 {
		log.Warn().Int("missed", due.Missed).Msg("schedule missed due times: one run covers them")
	}
	snapBody, _ := json.Marshal(map[string]string{"resource": j.rd, "name": name})
	r := s.Adm.Submit(ctx, admission.Request{Verb: "rd.snapshot", Body: snapBody, Actor: "serve:schedule:" + j.sched.Name,
		CommandID: commandID("sched-snap", j.rd, name)})
	if !r.OK && r.Error.Code != "already_exists" {
		log.Warn().Str("error", r.Error.Message).Msg("scheduled snapshot refused")
		return
	}
	deadline := time.Now().Add(s.SnapshotWait)
	for {
		v, err := s.DB.Read()
		if err != nil {
			return
		}
		rd, ok, _ := v.ResourceDefinition(j.rd)
		v.Close()
		var snap *projections.RDSnapshot
		if ok {
			snap, ok = rd.Snapshot(name)
		}
		switch {
		case !ok:
			log.Warn().Msg("scheduled snapshot gone")
			return
		case snap.Phase == projections.SnapshotFailed:
			log.Warn().Str("reason", snap.Reason).Msg("scheduled snapshot failed")
			return
		case time.Now().After(deadline) || ctx.Err() != nil:
			log.Warn().Str("phase", snap.Phase).Msg("scheduled snapshot not taken in time")
			return
		}
		if snap.Phase == projections.SnapshotTaken {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	body, _ := json.Marshal(resources.BackupCreate{Resource: j.rd, Remote: j.remote, Snapshot: name, Full: due.Full, Schedule: j.sched.Name, Missed: due.Missed})
	r = s.Adm.Submit(ctx, admission.Request{Verb: "backup.create", Body: body, Actor: "serve:schedule:" + j.sched.Name,
		CommandID: commandID("sched-backup", j.rd, j.remote, name)})
	if !r.OK {
		log.Warn().Str("error", r.Error.Message).Msg("scheduled backup refused")
		return
	}
	log.Info().Msg("scheduled backup started")
}

// retain deletes what the schedule's retention says is beyond keeping.
func (s *Scheduler) retain(ctx context.Context, j job, rd projections.ResourceDefinition) {
	snaps, backups := Retention(j.sched, rd, j.remote)
	actor := "serve:schedule:" + j.sched.Name
	for _, snap := range snaps {
		body, _ := json.Marshal(map[string]string{"resource": j.rd, "name": snap})
		r := s.Adm.Submit(ctx, admission.Request{Verb: "rd.snapshot-delete", Body: body, Actor: actor, ForgetRefusals: true,
			CommandID: commandID("sched-keep-local", j.rd, snap)})
		s.Log.Info().Str("resource", j.rd).Str("snapshot", snap).Bool("deleted", r.OK).Msg("schedule retention: local snapshot")
	}
	if len(backups) == 0 || s.Remotes == nil {
		return
	}
	st, err := s.Remotes(j.remote)
	if err != nil {
		s.Log.Warn().Err(err).Str("remote", j.remote).Msg("schedule retention: remote unreadable")
		return
	}
	for _, id := range backups {
		body, _ := json.Marshal(map[string]string{"remote": j.remote, "resource": j.rd, "id": id})
		r := s.Adm.Submit(ctx, admission.Request{Verb: "backup.delete", Body: body, Actor: actor, ForgetRefusals: true,
			CommandID: commandID("sched-keep-remote", j.rd, j.remote, id)})
		if !r.OK {
			s.Log.Warn().Str("error", r.Error.Message).Str("backup", id).Msg("schedule retention: backup not deleted")
			continue
		}
		n, err := backup.Delete(ctx, st, j.rd, id, backup.ChunkGrace, time.Now())
		s.Log.Info().Err(err).Str("resource", j.rd).Str("backup", id).Int("chunks_removed", n).Msg("schedule retention: backup deleted from the remote")
	}
}
