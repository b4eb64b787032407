package resources

import (
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/stretchr/testify/assert"
)

// SnapshotNext: the next phase only once every node's report settles it, failure as
// soon as one node aborted, and reports of an older snapshot of the same name ignored.
func TestSnapshotNext(t *testing.T) {
	report := func(seq uint64, phase string) drbd.Status {
		return drbd.Status{Snapshots: []drbd.SnapshotStatus{{Name: "s1", Seq: seq, Phase: phase, Error: "why"}}}
	}
	suspending := projections.RDSnapshot{Name: "s1", Nodes: []string{"n1", "n2"}, Phase: projections.SnapshotSuspending, StartedSeq: 7}
	taking := suspending
	taking.Phase = projections.SnapshotTaking
	tests := []struct {
		name     string
		snap     projections.RDSnapshot
		statuses map[string]drbd.Status
		phase    string
		ok       bool
	}{
		{"one node has not reported", suspending, map[string]drbd.Status{"n1": report(7, drbd.SnapSuspended)}, "", false},
		{"all suspended", suspending, map[string]drbd.Status{"n1": report(7, drbd.SnapSuspended), "n2": report(7, drbd.SnapSuspended)}, "take", true},
		{"an older snapshot's report", suspending, map[string]drbd.Status{"n1": report(7, drbd.SnapSuspended), "n2": report(3, drbd.SnapSuspended)}, "", false},
		{"one aborted", suspending, map[string]drbd.Status{"n1": report(7, drbd.SnapSuspended), "n2": report(7, drbd.SnapAborted)}, "failed", true},
		{"taking, one still suspended", taking, map[string]drbd.Status{"n1": report(7, drbd.SnapTaken), "n2": report(7, drbd.SnapSuspended)}, "", false},
		{"all taken", taking, map[string]drbd.Status{"n1": report(7, drbd.SnapTaken), "n2": report(7, drbd.SnapTaken)}, "taken", true},
		{"taking, one failed", taking, map[string]drbd.Status{"n1": report(7, drbd.SnapTaken), "n2": report(7, drbd.SnapFailed)}, "failed", true},
		{"a diskless node has not reported", withDiskless(suspending), map[string]drbd.Status{"n1": report(7, drbd.SnapSuspended), "n2": report(7, drbd.SnapSuspended)}, "", false},
		{"all suspended, the diskless node too", withDiskless(suspending), map[string]drbd.Status{"n1": report(7, drbd.SnapSuspended), "n2": report(7, drbd.SnapSuspended), "n3": report(7, drbd.SnapSuspended)}, "take", true},
		{"taking, the diskless node not yet", withDiskless(taking), map[string]drbd.Status{"n1": report(7, drbd.SnapTaken), "n2": report(7, drbd.SnapTaken), "n3": report(7, drbd.SnapSuspended)}, "", false},
		{"taken already", projections.RDSnapshot{Name: "s1", Nodes: []string{"n1"}, Phase: projections.SnapshotTaken, StartedSeq: 7},
			map[string]drbd.Status{"n1": report(7, drbd.SnapTaken)}, "", false},
	}
	for _, tt := range tests {
		if tt.phase == "failed" {
			tt.snap.Diskless = nil
		}
		t.Run(tt.name, func(t *testing.T) {
			phase, reason, ok := SnapshotNext(tt.snap, tt.statuses)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.phase, phase)
			if phase == "failed" {
				assert.Contains(t, reason, "node n2")
			}
		})
	}
}

func withDiskless(s projections.RDSnapshot) projections.RDSnapshot {
	s.Diskless = []string{"n3"}
	return s
}

// A clone's snapshot name stays a valid snapshot name (at most 48 characters) for any
// target LINSTOR allows (48 characters), and two long targets with one prefix get two
// names (on the old code a target over 42 characters was refused).
func TestCloneSnapshotNames(t *testing.T) {
	assert.Equal(t, "clone-r1c", CloneSnapshot("r1c"))
	a := CloneSnapshot("pvc-0123456789abcdef0123456789abcdef-0000000001")
	b := CloneSnapshot("pvc-0123456789abcdef0123456789abcdef-0000000002")
	assert.NotEqual(t, a, b)
	for _, n := range []string{a, b, CloneSnapshot(strings.Repeat("x", 42)), CloneSnapshot(strings.Repeat("y", 63))} {
		assert.LessOrEqual(t, len(n), 48, n)
		assert.Regexp(t, snapshotName, n)
	}
}

// A clone's snapshot is due for deletion once every disk restored from it reports its
// desired state carried out at its incarnation, or its target is gone; never before,
// never a snapshot not yet restored, never on ZFS.
func TestCloneCleanupDue(t *testing.T) {
	ref := &drbd.SnapshotRef{Resource: "r1", Snapshot: "clone-t1"}
	src := projections.ResourceDefinition{Name: "r1",
		Replicas:  []projections.Replica{{Node: "n1", Provider: "file_thin"}, {Node: "n2", Provider: "file_thin"}},
		Snapshots: []projections.RDSnapshot{{Name: "clone-t1", CloneTo: "t1", Cloned: true}, {Name: "clone-t2", CloneTo: "t2"}, {Name: "s1"}}}
	target := projections.ResourceDefinition{Name: "t1", Replicas: []projections.Replica{
		{Node: "n1", RestoreFrom: ref, Incarnation: 7}, {Node: "n2", RestoreFrom: ref, Incarnation: 8}, {Node: "n3", Diskless: true, Incarnation: 9}}}
	applied := func(inc uint64) drbd.Status { return drbd.Status{Phase: drbd.PhaseApplied, Incarnation: inc} }
	for _, c := range []struct {
		name     string
		exists   bool
		statuses map[string]drbd.Status
		want     []string
	}{
		{"one disk not yet restored", true, map[string]drbd.Status{"n1": applied(7)}, nil},
		{"one disk at an older incarnation", true, map[string]drbd.Status{"n1": applied(7), "n2": applied(3)}, nil},
		{"one disk failed", true, map[string]drbd.Status{"n1": applied(7), "n2": {Phase: drbd.PhaseFailed, Incarnation: 8}}, nil},
		{"every restored disk carried out", true, map[string]drbd.Status{"n1": applied(7), "n2": applied(8)}, []string{"clone-t1"}},
		{"the target is gone", false, nil, []string{"clone-t1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := CloneCleanupDue(src, func(name string) (projections.ResourceDefinition, bool, map[string]drbd.Status) {
				assert.Equal(t, "t1", name)
				if !c.exists {
					return projections.ResourceDefinition{}, false, nil
				}
				return target, true, c.statuses
			})
			assert.Equal(t, c.want, got)
		})
	}
	zfs := src
	zfs.Replicas = []projections.Replica{{Node: "n1", Provider: "zfs"}}
	assert.Empty(t, CloneCleanupDue(zfs, func(string) (projections.ResourceDefinition, bool, map[string]drbd.Status) {
		return projections.ResourceDefinition{}, false, nil
	}), "a ZFS clone depends on its snapshot")
}

// SnapshotGroupNext: the members of a group snapshot move as one. No take until every
// member's nodes are suspended, no resume until every member's are taken, and one
// member failing (or gone) fails the others.
func TestSnapshotGroupNext(t *testing.T) {
	report := func(phase string) map[string]drbd.Status {
		return map[string]drbd.Status{"n1": {Snapshots: []drbd.SnapshotStatus{{Name: "g", Seq: 7, Phase: phase, Error: "why"}}}}
	}
	member := func(rd, phase, reported string) GroupMember {
		s := projections.RDSnapshot{Name: "g", Nodes: []string{"n1"}, Phase: phase, StartedSeq: 7, Reason: "n1 aborted"}
		m := GroupMember{Ref: events.RDSnapshotRef{Resource: rd, Name: "g"}, Snapshot: s, Found: true}
		if reported != "" {
			m.Statuses = report(reported)
		}
		return m
	}
	gone := GroupMember{Ref: events.RDSnapshotRef{Resource: "r2", Name: "g"}}
	const suspending, taking, taken, failed = projections.SnapshotSuspending, projections.SnapshotTaking, projections.SnapshotTaken, projections.SnapshotFailed
	tests := []struct {
		name    string
		members []GroupMember
		phase   string
		reason  string
	}{
		{"one member suspended, the other not yet", []GroupMember{member("r1", suspending, drbd.SnapSuspended), member("r2", suspending, "")}, "", ""},
		{"both suspended", []GroupMember{member("r1", suspending, drbd.SnapSuspended), member("r2", suspending, drbd.SnapSuspended)}, "take", ""},
		{"one already takes, the other suspended", []GroupMember{member("r1", taking, drbd.SnapSuspended), member("r2", suspending, drbd.SnapSuspended)}, "take", ""},
		{"one taken, the other still suspending", []GroupMember{member("r1", taking, drbd.SnapTaken), member("r2", suspending, drbd.SnapSuspended)}, "take", ""},
		{"one taken, the other taking", []GroupMember{member("r1", taking, drbd.SnapTaken), member("r2", taking, drbd.SnapSuspended)}, "", ""},
		{"both taken", []GroupMember{member("r1", taking, drbd.SnapTaken), member("r2", taking, drbd.SnapTaken)}, "taken", ""},
		{"one recorded taken", []GroupMember{member("r1", taken, drbd.SnapTaken), member("r2", taking, drbd.SnapTaken)}, "taken", ""},
		{"a node of one aborted", []GroupMember{member("r1", suspending, drbd.SnapSuspended), member("r2", suspending, drbd.SnapAborted)}, "failed", "group snapshot: r2/g: node n1: aborted: why"},
		{"one member failed", []GroupMember{member("r1", taking, drbd.SnapTaken), member("r2", failed, drbd.SnapSuspended)}, "failed", "group snapshot: r2/g failed: n1 aborted"},
		{"one member gone", []GroupMember{member("r1", suspending, drbd.SnapSuspended), gone}, "failed", "group snapshot: r2/g is gone"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			phase, reason, ok := SnapshotGroupNext(tc.members)
			assert.Equal(t, tc.phase, phase)
			assert.Equal(t, tc.phase != "", ok)
			assert.Equal(t, tc.reason, reason)
		})
	}
}

// A clone whose snapshot failed at the suspension bound is started again once
// CloneRetryAfter has passed; one that failed for another reason, whose target exists,
// or that failed a moment ago is not.
func TestClonesToRetry(t *testing.T) {
	done := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	rd := projections.ResourceDefinition{Name: "src", Snapshots: []projections.RDSnapshot{
		{Name: "clone-a", CloneTo: "a", Phase: projections.SnapshotFailed, Reason: "node n3: aborted: suspended for the whole bound without the order to take it", DoneAt: done, StartedSeq: 9},
		{Name: "clone-b", CloneTo: "b", Phase: projections.SnapshotFailed, Reason: "node n1: provider lvm has no snapshots", DoneAt: done},
		{Name: "clone-c", CloneTo: "c", Phase: projections.SnapshotFailed, Reason: "I/O resumed at the suspension bound", DoneAt: done},
		{Name: "clone-d", CloneTo: "d", Phase: projections.SnapshotTaken, DoneAt: done},
		{Name: "plain", Phase: projections.SnapshotFailed, Reason: "suspended for the whole bound", DoneAt: done},
	}}
	exists := func(name string) bool { return name == "c" }
	assert.Empty(t, ClonesToRetry(rd, exists, done.Add(time.Second)), "a moment after the failure")
	assert.Equal(t, []CloneRetry{{Resource: "src", Snapshot: "clone-a", Target: "a", StartedSeq: 9}}, ClonesToRetry(rd, exists, done.Add(CloneRetryAfter)))
}
