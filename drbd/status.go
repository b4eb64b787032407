package drbd

import "time"

// Status is what an agent observed of one resource on its node, published on
// <prefix>.status.<node>.drbd.<resource> (CAIRN_STATUS keeps a few per subject). The
// control plane folds the latest into the resource view as observed state; it never
// changes desired state.
type Status struct {
	Resource string    `json:"resource"`
	Node     string    `json:"node"`
	At       time.Time `json:"at"`
	// Revision and Incarnation are those of the Desired the agent last carried out.
	Revision    uint64 `json:"revision"`
	Incarnation uint64 `json:"incarnation,omitempty"`
	// Phase: applied (the desired state is carried out), pending (working on it), failed
	// (Error says why; the host is left as it was before the attempt), removed (torn
	// down; the last message for the subject).
	Phase string `json:"phase"`
	Error string `json:"error,omitempty"`
	// From drbdsetup events2 (role, quorum, per volume and per peer).
	Role string `json:"role,omitempty"` // Primary | Secondary | Unknown
	// MayPromote and PromotionScore are DRBD's (events2 may_promote, promotion_score): the
	// replica could become Primary now, and how good a Primary it would be (0: none).
	MayPromote     *bool          `json:"may_promote,omitempty"`
	PromotionScore int            `json:"promotion_score,omitempty"`
	Quorum         *bool          `json:"quorum,omitempty"`
	Open           *bool          `json:"open,omitempty"`
	Volumes        []VolumeStatus `json:"volumes,omitempty"`
	Peers          []PeerStatus   `json:"peers,omitempty"`
	// Snapshots are where this node is with each snapshot of its Desired.
	Snapshots []SnapshotStatus `json:"snapshots,omitempty"`
	// Backups are where this node is with each upload of its Desired, and with the
	// restore of its disks from a backup (ID "restore").
	Backups []BackupStatus `json:"backups,omitempty"`
	// FilesystemsMade are the volumes whose filesystem (Local.Filesystems) this node made
	// in its current incarnation, with the type.
	FilesystemsMade map[int]string `json:"filesystems_made,omitempty"`
}

// BackupStatus is one node's upload of one backup.
type BackupStatus struct {
	ID  string `json:"id"`
	Seq uint64 `json:"seq"`
	// Phase: BackupUploading (Error, when set, is what the last attempt stopped on: it
	// is tried again), BackupUploaded (ManifestSHA256 is the complete backup's),
	// BackupFailed (Error: nothing a retry cures, such as wrong credentials).
	Phase          string `json:"phase"`
	Error          string `json:"error,omitempty"`
	ManifestSHA256 string `json:"manifest_sha256,omitempty"`
	BytesDone      int64  `json:"bytes_done"`
	BytesTotal     int64  `json:"bytes_total"`
	BytesSent      int64  `json:"bytes_sent"`
	ChunksSent     int64  `json:"chunks_sent"`
}

// Phases of a BackupStatus.
const (
	BackupUploading = "uploading"
	BackupUploaded  = "uploaded"
	BackupFailed    = "failed"
	BackupRestoring = "restoring"
)

// SnapshotStatus is one node's part of one snapshot.
type SnapshotStatus struct {
	Name string `json:"name"`
	Seq  uint64 `json:"seq"`
	// Phase: SnapSuspended (I/O suspended, waiting for the order to take), SnapTaken,
	// SnapAborted (I/O resumed without a snapshot: the order to take came too late, or
	// the snapshot was aborted), SnapFailed (Error says why).
	Phase string `json:"phase"`
	Error string `json:"error,omitempty"`
	// SuspendedMs is how long I/O was suspended (once resumed).
	SuspendedMs float64 `json:"suspended_ms,omitempty"`
	// Held is true while the node keeps I/O suspended for the snapshot (from before
	// suspend-io until resume-io succeeded: a taken copy waits for every other node's).
	Held bool `json:"held,omitempty"`
}

// Phases of a SnapshotStatus.
const (
	SnapSuspended = "suspended"
	SnapTaken     = "taken"
	SnapAborted   = "aborted"
	SnapFailed    = "failed"
)

// Phases of a Status.
const (
	PhaseApplied = "applied"
	PhasePending = "pending"
	PhaseFailed  = "failed"
	PhaseRemoved = "removed"
)

// VolumeStatus is the local device of one volume.
type VolumeStatus struct {
	Volume    int    `json:"volume"`
	Minor     int    `json:"minor"`
	DiskState string `json:"disk_state,omitempty"` // Diskless, UpToDate, Inconsistent, …
	// CurrentGI is the current UUID (hex) from drbdsetup get-gi while up, or drbdmeta
	// get-gi while down (events2 never prints it).
	CurrentGI string `json:"current_gi,omitempty"`
	// SizeKiB is the device's size as DRBD reports it (events2), 0 when not known.
	SizeKiB uint64 `json:"size_kib,omitempty"`
	// Resize says how far a grow of the volume (vd.resize) is on this replica, absent
	// when the device has the desired size (or its size is not known):
	// ResizeGrowingBacking, then ResizeGrowingDevice.
	Resize string `json:"resize,omitempty"`
}

// Phases of VolumeStatus.Resize.
const (
	// ResizeGrowingBacking: this replica's backing volume does not hold the new size yet.
	ResizeGrowingBacking = "growing-backing"
	// ResizeGrowingDevice: the backing holds it (or the replica is diskless); DRBD grows
	// the device once every diskful replica's backing does and all are connected.
	ResizeGrowingDevice = "growing-device"
)

// PeerStatus is the connection to one peer and its volumes.
type PeerStatus struct {
	Node       string             `json:"node,omitempty"`
	NodeID     int                `json:"node_id"`
	Connection string             `json:"connection,omitempty"` // Connected, Connecting, StandAlone, …
	Volumes    []PeerVolumeStatus `json:"volumes,omitempty"`
}

// PeerVolumeStatus is the replication of one volume to one peer.
type PeerVolumeStatus struct {
	Volume      int      `json:"volume"`
	Replication string   `json:"replication,omitempty"` // Established, SyncSource, SyncTarget, …
	PeerDisk    string   `json:"peer_disk,omitempty"`
	SyncPercent *float64 `json:"sync_percent,omitempty"` // events2 "done" while syncing
	// SyncKind is what the last (simulated or observed) sync of this connection copied:
	// none (Established without a resync), bitmap or full (out-of-sync at the start of
	// the resync below or at the volume's size), unrelated (DRBD refused the peer). It
	// stays after the sync finished, until the connection is lost.
	SyncKind string `json:"sync_kind,omitempty"`
	// OutOfSyncKiB is events2's out-of-sync (KiB still to copy to or from the peer).
	OutOfSyncKiB *uint64 `json:"out_of_sync_kib,omitempty"`
	// LastSyncKiB is what the last resync had to copy when it started (its out-of-sync).
	LastSyncKiB *uint64 `json:"last_sync_kib,omitempty"`
	// SyncRateKiBs is the resync under way's average rate since it started (KiB/s), and
	// SyncETASeconds the seconds left at it; absent while no resync runs or before one
	// second of it.
	SyncRateKiBs   *uint64 `json:"sync_rate_kib_s,omitempty"`
	SyncETASeconds *uint64 `json:"sync_eta_s,omitempty"`
}
