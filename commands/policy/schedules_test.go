package policy

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func run(id, base, phase string, seq uint64, started string) projections.RDBackup {
	return projections.RDBackup{ID: id, Base: base, Phase: phase, StartedSeq: seq, StartedAt: at(started), Schedule: "nightly", Remote: "s3"}
}

func TestDecideRun(t *testing.T) {
	s := projections.Schedule{ScheduleCreated: events.ScheduleCreated{Name: "nightly", FullCron: "0 2 * * *", IncCron: "0 * * * *"}}
	enabled := at("2026-12-01T10:30:00Z")

	due, err := DecideRun(s, enabled, nil, at("2026-12-02T01:59:00Z"))
	require.NoError(t, err)
	assert.False(t, due.Due, "no full backup yet and none due: no incremental either")
	due, _ = DecideRun(s, enabled, nil, at("2026-12-02T02:00:00Z"))
	assert.True(t, due.Due)
	assert.True(t, due.Full)
	assert.Equal(t, at("2026-12-02T02:00:00Z"), due.At)
	assert.Zero(t, due.Missed)

	runs := []projections.RDBackup{run("a", "", projections.BackupDone, 10, "2026-12-02T02:00:05Z")}
	due, _ = DecideRun(s, enabled, runs, at("2026-12-02T02:59:59Z"))
	assert.False(t, due.Due)
	due, _ = DecideRun(s, enabled, runs, at("2026-12-02T03:00:00Z"))
	assert.True(t, due.Due)
	assert.False(t, due.Full, "the hourly one is incremental")

	// Down for three hours: one incremental covers them, two missed.
	due, _ = DecideRun(s, enabled, runs, at("2026-12-02T05:30:00Z"))
	assert.True(t, due.Due)
	assert.Equal(t, at("2026-12-02T03:00:00Z"), due.At)
	assert.Equal(t, 2, due.Missed)
	// A day later the full one wins.
	due, _ = DecideRun(s, enabled, runs, at("2026-12-03T02:00:00Z"))
	assert.True(t, due.Full)

	// A run under way postpones the next.
	busy := append(runs, run("b", "a", projections.BackupUploading, 11, "2026-12-02T03:00:01Z"))
	due, _ = DecideRun(s, enabled, busy, at("2026-12-02T09:00:00Z"))
	assert.False(t, due.Due)
	assert.Contains(t, due.Why, "under way")

	// A failed run: skip waits for the next time; retry tries again up to max_retries.
	failed := append(runs, run("b", "a", projections.BackupFailed, 11, "2026-12-02T03:00:01Z"))
	due, _ = DecideRun(s, enabled, failed, at("2026-12-02T03:10:00Z"))
	assert.False(t, due.Due)
	s.OnFailure, s.MaxRetries = "retry", 1
	due, _ = DecideRun(s, enabled, failed, at("2026-12-02T03:10:00Z"))
	assert.True(t, due.Due)
	assert.Contains(t, due.Why, "retry 1 of 1")
	twice := append(failed, run("c", "a", projections.BackupFailed, 12, "2026-12-02T03:10:01Z"))
	due, _ = DecideRun(s, enabled, twice, at("2026-12-02T03:20:00Z"))
	assert.False(t, due.Due, "max_retries reached")
}

func TestRetention(t *testing.T) {
	s := projections.Schedule{ScheduleCreated: events.ScheduleCreated{Name: "nightly", FullCron: "@daily", KeepLocal: 2, KeepRemote: 2}}
	rd := projections.ResourceDefinition{Name: "r1"}
	for i, name := range []string{"nightly-20261201t000000", "nightly-20261202t000000", "nightly-20261203t000000", "manual"} {
		rd.Snapshots = append(rd.Snapshots, projections.RDSnapshot{Name: name, Phase: projections.SnapshotTaken, StartedSeq: uint64(10 + i)})
	}
	rd.Backups = []projections.RDBackup{
		run("f1", "", projections.BackupDone, 1, "2026-12-01T00:00:00Z"),
		run("i1", "f1", projections.BackupDone, 2, "2026-12-01T01:00:00Z"),
		run("f2", "", projections.BackupDone, 3, "2026-12-02T00:00:00Z"),
		run("i2", "f2", projections.BackupDone, 4, "2026-12-02T01:00:00Z"),
		run("f3", "", projections.BackupDone, 5, "2026-12-03T00:00:00Z"),
		run("x", "", projections.BackupDone, 6, "2026-12-03T00:00:00Z"),
	}
	rd.Backups[5].Schedule = "" // not the schedule's
	snaps, backups := Retention(s, rd, "s3")
	assert.Equal(t, []string{"nightly-20261201t000000"}, snaps, "the newest two of the schedule's; never another's")
	assert.ElementsMatch(t, []string{"f1", "i1"}, backups, "the two newest full backups and what follows them stay")

	rd.Backups = append(rd.Backups, projections.RDBackup{ID: "up", Snapshot: "nightly-20261201t000000", Phase: projections.BackupUploading, Remote: "s3", StartedSeq: 7})
	snaps, _ = Retention(s, rd, "s3")
	assert.Empty(t, snaps, "a snapshot an upload reads stays")
	assert.Equal(t, "nightly-20261205t061500", RunName("nightly", at("2026-12-05T06:15:00Z")))
	assert.Len(t, RunName(string(make([]byte, 60)), time.Now()), 48)
}

// A negative KeepCountEvery turns the keep-count policy off: it reads nothing and adds
// nothing (a nil DB would panic on the first read).
func TestKeepCountOff(t *testing.T) {
	require.NoError(t, (&Evacuator{KeepCountEvery: -1}).keepCount(context.Background(), nil))
}
