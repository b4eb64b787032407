// Package zpool is the contract between the control plane and the agents for shared
// pools: the desired state the dispatcher publishes on <prefix>.node.<node>.zpool.<pool>
// and the status an agent reports on <prefix>.status.<node>.zpool.<pool>.
package zpool

import "time"

// Desired tells the node holding a pool's grant to import it. It is published to the
// owner only; an empty message on the subject means the node must not have the pool
// imported (the grant moved, or the pool was exported): export it if it is.
type Desired struct {
	Pool    string   `json:"pool"`
	Node    string   `json:"node"`
	Devices []string `json:"devices"`
	// GrantSeq is the sequence of the pool.import-granted event: a new grant is a new
	// import (with a new activity check), the same grant seen again is not.
	GrantSeq uint64 `json:"grant_seq"`
	// Revision is the sequence of the pool's last event.
	Revision uint64 `json:"revision"`
}

// Phases of a Status.
const (
	PhaseChecking  = "checking"  // the MMP activity check is running
	PhaseImported  = "imported"  // imported; the agent watches the MMP slots
	PhaseRefused   = "refused"   // the check or zpool refused the import (Verdict says why)
	PhaseFailed    = "failed"    // an error other than a refusal
	PhaseContested = "contested" // another host wrote the pool after import: fenced (exported)
	// PhaseSuspended: imported here, but the kernel suspended the pool (code
	// mmp_suspended: MMP writes failed or were delayed, ZFS-8000-MM; io_suspended: I/O
	// failures). The agent never runs zpool clear: that is the operator's decision.
	PhaseSuspended = "suspended"
	PhaseExported  = "exported" // exported on this node
)

// Status is what an agent reports about a pool on its node.
type Status struct {
	Pool     string    `json:"pool"`
	Node     string    `json:"node"`
	At       time.Time `json:"at"`
	GrantSeq uint64    `json:"grant_seq,omitempty"`
	Phase    string    `json:"phase"`
	Error    string    `json:"error,omitempty"`
	// Verdict is the activity check's verdict (storage/mmp), as JSON.
	Verdict any `json:"verdict,omitempty"`
	// ForeignHostID and ForeignHost name the other writer of a contested pool.
	ForeignHostID string `json:"foreign_hostid,omitempty"`
	ForeignHost   string `json:"foreign_host,omitempty"`
	// CheckStartedAt is when the activity check began (for the grant-to-check latency).
	CheckStartedAt time.Time `json:"check_started_at,omitzero"`

	// Code is a stable snake_case reason for refused, failed and contested (and a few
	// notes on imported/exported): an mmp verdict code (no_hostid, activity_detected,
	// unreadable_vdev, …), a zpool refusal (hostid_active, hostid_required,
	// previously_in_use, remote_io), a watcher code (foreign_hostid, txg_fork,
	// sync_slot_rewound, config_behind) or an agent code (see agents/zpoolagent).
	Code string `json:"code,omitempty"`
	// Forced is true when the import ran with -f (the pool was last used by another
	// host and this agent's own activity check proved it idle).
	Forced bool `json:"forced,omitempty"`
	// Fenced is true when a contested pool was exported here (zpool export -f).
	Fenced bool `json:"fenced,omitempty"`
	// Observation is the watcher's observation (storage/mmp) that raised the alarm.
	Observation any `json:"observation,omitempty"`
}
