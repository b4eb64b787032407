package events

import "github.com/cairn-io/cairn/drbd"

// Snapshots of DRBD resource definitions (cairn.ev.rd.<resource>), consistent across
// the definition's diskful replicas. A snapshot goes through phases recorded here; the
// agents carry each phase out and report it, and the serve holding the lease records
// the next one (docs/resources.md "Snapshots"):
//
//	rd.snapshot-started    every node in Nodes and Diskless suspends I/O and waits
//	rd.snapshot-suspended  all reported I/O suspended: each disk takes its snapshot and
//	                       keeps I/O suspended
//	rd.snapshot-taken      all reported it taken: the snapshot exists; every node resumes
//	rd.snapshot-failed     a node could not (or its suspension bound passed): aborted,
//	                       every node resumes and removes what it took
//	rd.snapshot-deleted    gone from every node
//
// The failure-domain logical volumes' snapshots are another thing: lvol snapshots,
// snapshot.created / snapshot.deleted (events/types.go).

// RDSnapshotStarted: a snapshot of a definition was asked for; Nodes are the diskful
// replicas' nodes that take part (and hold a copy once taken); Diskless are the nodes
// of its active diskless replicas, which suspend and resume with them but take nothing
// (a diskless Primary's writes would otherwise reach one disk before its copy and
// another after). Events before Diskless existed have none: their diskless replicas
// were not suspended.
type RDSnapshotStarted struct {
	Resource string   `json:"resource"`
	Name     string   `json:"name"`
	Nodes    []string `json:"nodes"`
	Diskless []string `json:"diskless,omitempty"`
	// CloneTo, for the snapshot of rd.clone, is the definition restored from it once
	// it is taken.
	CloneTo string `json:"clone_to,omitempty"`
	// Group, for a snapshot of several definitions at one moment (rd.snapshot-multi),
	// names every snapshot of the group, this one included: no disk of any of them takes
	// its copy before every replica of all of them suspended, none resumes before all
	// took theirs, and one failing fails them all. Started in one append.
	Group []RDSnapshotRef `json:"group,omitempty"`
}

// RDSnapshotRef names one snapshot of a definition (suspended, taken, deleted).
type RDSnapshotRef struct {
	Resource string `json:"resource"`
	Name     string `json:"name"`
}

// RDSnapshotSuspended: every node reported its I/O suspended.
type RDSnapshotSuspended RDSnapshotRef

// RDSnapshotTaken: every node reported its snapshot taken.
type RDSnapshotTaken RDSnapshotRef

// RDSnapshotDeleted: the snapshot is gone.
type RDSnapshotDeleted RDSnapshotRef

// RDSnapshotFailed: the snapshot was aborted; Reason names the node and what it said.
type RDSnapshotFailed struct {
	Resource string `json:"resource"`
	Name     string `json:"name"`
	Reason   string `json:"reason"`
}

// RDRolledBack: every disk of the definition (all deactivated, all holding the
// snapshot) goes back to snapshot Name; Current is the current UUID each volume's
// fresh metadata gets on every disk (hex, by volume number).
type RDRolledBack struct {
	Resource string            `json:"resource"`
	Name     string            `json:"name"`
	Current  map[string]string `json:"current"`
}

func (*RDRolledBack) EventType() string { return "rd.rolled-back" }

// RDRestoreBegun: an existing, empty definition (LINSTOR's clients create the target
// first) is being restored from snapshot From: its volumes and disks come from the
// snapshot next (rd.restore-volumes, rd.restore into it), and disks added later get a
// full sync, as on a definition rd.restore created.
type RDRestoreBegun struct {
	Resource string           `json:"resource"`
	From     drbd.SnapshotRef `json:"from"`
}

func (*RDRestoreBegun) EventType() string { return "rd.restore-begun" }

func (*RDSnapshotStarted) EventType() string   { return "rd.snapshot-started" }
func (*RDSnapshotSuspended) EventType() string { return "rd.snapshot-suspended" }
func (*RDSnapshotTaken) EventType() string     { return "rd.snapshot-taken" }
func (*RDSnapshotFailed) EventType() string    { return "rd.snapshot-failed" }
func (*RDSnapshotDeleted) EventType() string   { return "rd.snapshot-deleted" }

func init() {
	for _, t := range []Type{
		{Name: "rd.snapshot-started", Version: 1, New: func() Payload { return new(RDSnapshotStarted) }},
		{Name: "rd.restore-begun", Version: 1, New: func() Payload { return new(RDRestoreBegun) }},
		{Name: "rd.snapshot-suspended", Version: 1, New: func() Payload { return new(RDSnapshotSuspended) }},
		{Name: "rd.snapshot-taken", Version: 1, New: func() Payload { return new(RDSnapshotTaken) }},
		{Name: "rd.snapshot-failed", Version: 1, New: func() Payload { return new(RDSnapshotFailed) }},
		{Name: "rd.snapshot-deleted", Version: 1, New: func() Payload { return new(RDSnapshotDeleted) }},
		{Name: "rd.rolled-back", Version: 1, New: func() Payload { return new(RDRolledBack) }},
	} {
		Register(t)
	}
}
