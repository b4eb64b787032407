// Package drbd is Cairn's model of DRBD: the per-node desired state the dispatcher
// publishes and the status agents report (the wire contract), option resolution, GIs
// and UUIDs, day-0 seeding plans, metadata sizes, the sync decision and Converged. Pure:
// no I/O, no programs; how an agent speaks to drbd-utils (argv builders, the resource
// file renderer, the events2 parser) is drbd/drbdutils.
package drbd

import "github.com/cairn-io/cairn/storage/backing"

// Desired is the desired state of one resource on one node: the message the dispatcher
// keeps on <prefix>.node.<node>.drbd.<resource> (one per subject, latest wins). An empty
// message on that subject means the resource is gone from the node (tear it down).
//
// Revision is the CAIRN_EVENTS sequence of the last event that changed anything in it;
// an agent never acts on a Desired older than one it has already carried out.
type Desired struct {
	Resource string `json:"resource"`
	Node     string `json:"node"`
	Revision uint64 `json:"revision"`
	// Active is false after resource.deactivate: the agent takes the resource down but
	// keeps disk, metadata and file.
	Active bool `json:"active"`
	// Port is the definition's TCP port, the same on every host.
	Port int `json:"port"`
	// Options are resolved (controller -> group -> definition -> resource).
	Options Options `json:"options"`
	// Replicas are every replica of the definition, this node's included, by node id.
	Replicas []Replica `json:"replicas"`
	// Volumes are the definition's volumes, by number.
	Volumes []Volume `json:"volumes"`
	// Local is this node's own replica's disk and seeding, nil when it has none (then
	// the resource is removed from this node).
	Local *Local `json:"local,omitempty"`
	// Snapshots are the snapshots of the definition this node's disk takes part in, by
	// name, each with what to do now (see SnapshotOrder). A snapshot the node recorded
	// that is no longer listed is deleted.
	Snapshots []SnapshotOrder `json:"snapshots,omitempty"`
	// Backups are the uploads of the definition's snapshots this node carries out.
	Backups []BackupOrder `json:"backups,omitempty"`
	// Files are the external files deployed with the definition (rd.file-deploy), by
	// path: the agent writes each where its allowed paths let it, and removes a file no
	// longer listed once no other resource on the node lists it.
	Files []File `json:"files,omitempty"`
}

// File is one external file to write on the node.
type File struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
	SHA256  string `json:"sha256"`
}

// SnapshotOrder is one snapshot of the definition as one node's agent carries it out.
type SnapshotOrder struct {
	Name string `json:"name"`
	// Seq is the sequence of the event that started it: a snapshot deleted and started
	// again under the same name is another one.
	Seq uint64 `json:"seq"`
	// Phase: SnapSuspend (suspend I/O, then wait for SnapTake), SnapTake (snapshot
	// every backing volume, resume I/O), SnapKeep (taken: keep it), SnapAbort (resume
	// I/O, remove what was taken).
	Phase string `json:"phase"`
}

// Phases of a SnapshotOrder.
const (
	SnapSuspend = "suspend"
	SnapTake    = "take"
	SnapKeep    = "keep"
	SnapAbort   = "abort"
)

// Replica is one replica of a definition as every peer sees it.
type Replica struct {
	Node    string `json:"node"`
	Host    string `json:"host"` // the name DRBD's `on` section uses (uname -n)
	Address string `json:"address"`
	NodeID  int    `json:"node_id"`
	// Diskless replicas attach no disk; a Tiebreaker is a diskless replica the control
	// plane added only to break quorum ties.
	Diskless   bool `json:"diskless,omitempty"`
	Tiebreaker bool `json:"tiebreaker,omitempty"`
	// Minors are this replica's device minors by volume number (unique per node).
	Minors map[int]int `json:"minors"`
	// Incarnation is the event sequence that created the replica's current disk (or the
	// replica, when diskless): a peer removed and added again under the same node id
	// has a new one, so its peers know to forget the old bitmap slot.
	Incarnation uint64 `json:"incarnation,omitempty"`
}

// Volume is one volume definition of a resource.
type Volume struct {
	Number  int    `json:"number"`
	SizeKiB uint64 `json:"size_kib"`
	// Day0GI is the random day-0 current UUID stored at vd.create (hex, settable once).
	Day0GI string `json:"day0_gi"`
}

// Local is what only the node that carries the replica needs.
type Local struct {
	NodeID   int              `json:"node_id"`
	Diskless bool             `json:"diskless,omitempty"`
	Provider backing.Provider `json:"provider,omitempty"`
	// Pool is the provider's storage pool: the LVM volume group (for lvm_thin
	// "vg/thinpool"), the zpool, or the directory for file providers.
	Pool string `json:"pool,omitempty"`
	// Incarnation identifies this replica's life on this node: the event sequence of the
	// replica.added (or disk toggle) that created its current disk. Metadata is created
	// and seeded once per incarnation; a plan from an older incarnation is never applied.
	Incarnation uint64 `json:"incarnation"`
	// Seeds are the set-gi calls to make after create-md and before the first adjust,
	// per volume. Empty (with FullSync) means fresh metadata and a full initial sync.
	Seeds    []Seed `json:"seeds,omitempty"`
	FullSync bool   `json:"full_sync,omitempty"`
	// RestoreFrom, on a replica of a restored definition, is the snapshot whose copy on
	// this node (of the source definition's volumes in the same pool) each new backing
	// volume starts from.
	RestoreFrom *SnapshotRef `json:"restore_from,omitempty"`
	// RestoreBackup, on a replica of a definition restored from a backup, is the
	// backup each new backing volume is filled from (every chunk checked) before its
	// metadata is created with Seeds.
	RestoreBackup *BackupRef `json:"restore_backup,omitempty"`
	// Rollback, once per Seq, makes every backing volume hold its snapshot Snapshot
	// again and gives it fresh metadata with Seeds (the same current UUID on every
	// replica), while the resource is down.
	Rollback *Rollback `json:"rollback,omitempty"`
	// Filesystems are the filesystems this node makes on the definition's new volumes
	// (LINSTOR's FileSystem/Type): each once its disk is UpToDate, through DRBD so every
	// connected disk gets it, and never over a volume that already carries a signature.
	Filesystems []FilesystemOrder `json:"filesystems,omitempty"`
}

// FilesystemOrder is one filesystem to make on a volume (FileSystem/Type,
// FileSystem/MkfsParams, FileSystem/User and FileSystem/Group).
type FilesystemOrder struct {
	Volume int    `json:"volume"`
	Type   string `json:"type"` // ext4 or xfs
	Params string `json:"params,omitempty"`
	// User and Group own the filesystem's root directory (names or numbers; ext4 only).
	User  string `json:"user,omitempty"`
	Group string `json:"group,omitempty"`
}

// Filesystem types Cairn makes.
const (
	FilesystemExt4 = "ext4"
	FilesystemXFS  = "xfs"
)

// Rollback is a definition's roll back to one of its snapshots, as one node carries it out.
type Rollback struct {
	Snapshot string `json:"snapshot"`
	Seq      uint64 `json:"seq"`
	Seeds    []Seed `json:"seeds"`
}

// Seed is one `drbdmeta --force --node-id NodeID <minor> v09 <disk> internal set-gi GI`.
type Seed struct {
	Volume int    `json:"volume"`
	NodeID int    `json:"node_id"`
	GI     string `json:"gi"`
}

// BackupRef names a backup on a remote a restored replica's disks start from
// (Local.RestoreBackup): the manifest's SHA-256 is the one recorded when it was taken
// or read when the restore was admitted, so a manifest changed on the store since is
// refused.
type BackupRef struct {
	Remote         string `json:"remote"`
	Resource       string `json:"resource"`
	ID             string `json:"id"`
	ManifestSHA256 string `json:"manifest_sha256"`
}

// BackupOrder is one backup of the definition this node uploads: snapshot Snapshot's
// copy on this node goes to Remote as backup ID, incremental to Base ("" for full).
// Seq is the sequence of rd.backup-started. A backup no longer listed is stopped.
type BackupOrder struct {
	ID       string `json:"id"`
	Seq      uint64 `json:"seq"`
	Snapshot string `json:"snapshot"`
	Remote   string `json:"remote"`
	// Base and BaseManifestSHA256 name the backup this one is incremental to.
	Base               string `json:"base,omitempty"`
	BaseManifestSHA256 string `json:"base_manifest_sha256,omitempty"`
}
