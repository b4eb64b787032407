package events

import (
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/storage/secret"
)

// Events of backups: remotes (cairn.ev.remote.<name>), the object stores backups go to,
// and a definition's backups (on its own subject, cairn.ev.rd.<name>, beside its
// snapshots). docs/backups.md tells the whole story.

// RemoteCreated: an S3 remote (kind "s3": Endpoint, Bucket, Region, PathStyle,
// AccessKey and SecretKey), or another Cairn cluster backups are shipped to (kind
// "cairn": Endpoint is its HTTP API, SecretKey its API token, sealed even when empty).
// Secrets are held sealed (package secret: AES-256-GCM under the serves' key file),
// never in clear. v2 added kind cairn; a v1 event is an s3 remote unchanged.
type RemoteCreated struct {
	Name      string        `json:"name"`
	Kind      string        `json:"kind"`
	Endpoint  string        `json:"endpoint"`
	Bucket    string        `json:"bucket,omitempty"`
	Region    string        `json:"region,omitempty"`
	PathStyle bool          `json:"path_style,omitempty"`
	AccessKey string        `json:"access_key,omitempty"`
	SecretKey secret.Sealed `json:"secret_key"`
	// EncryptionPassphrase, when set, encrypts the backups' chunks on the client
	// (storage/backup.Cipher); sealed like the secret key.
	EncryptionPassphrase *secret.Sealed `json:"encryption_passphrase,omitempty"`
}

// Kinds of remote.
const (
	RemoteS3    = "s3"
	RemoteCairn = "cairn"
)

// RemoteReceived names every cluster's own store of the backups other clusters shipped
// to it, in the backup routes and backup.restore. It is not a remote of the views: no
// remote may take its name.
const RemoteReceived = "received"

// RemoteModified: a remote's configuration changed (remote.modify): the whole new
// configuration, the secret key sealed again when it was given, else the old one.
type RemoteModified RemoteCreated

// RemoteDeleted: a remote is gone (the backups on it stay on the store).
type RemoteDeleted struct {
	Name string `json:"name"`
}

// RemoteBackupDeleted: backup ID of Resource on the remote was deleted; the serve that
// admitted it removes its manifest (from then on it is not listed) and the chunks no
// other backup names.
type RemoteBackupDeleted struct {
	Remote   string `json:"remote"`
	Resource string `json:"resource"`
	ID       string `json:"id"`
}

// RDBackupStarted: Node uploads taken snapshot Snapshot of the definition to Remote as
// backup ID, incremental to backup Base of the same definition on the same remote
// (its chunks are not sent again) or full (Base "").
type RDBackupStarted struct {
	Resource string `json:"resource"`
	ID       string `json:"id"`
	Snapshot string `json:"snapshot"`
	Remote   string `json:"remote"`
	Node     string `json:"node"`
	Base     string `json:"base,omitempty"`
	// Schedule, for a run of a backup schedule, names it; Missed counts the times the
	// schedule was due since its previous run that got no run of their own (the
	// scheduler was down, or the previous run was still under way).
	Schedule string `json:"schedule,omitempty"`
	Missed   int    `json:"missed,omitempty"`
}

// RDBackupFinished: backup ID's upload ended: complete (OK, its manifest's SHA-256 and
// what was sent) or failed (Error; nothing of it is listed on the remote).
type RDBackupFinished struct {
	Resource       string `json:"resource"`
	ID             string `json:"id"`
	OK             bool   `json:"ok"`
	Error          string `json:"error,omitempty"`
	ManifestSHA256 string `json:"manifest_sha256,omitempty"`
	BytesTotal     int64  `json:"bytes_total,omitempty"`
	BytesSent      int64  `json:"bytes_sent,omitempty"`
	ChunksSent     int64  `json:"chunks_sent,omitempty"`
}

// RDRestoreFromBackupBegun: the definition (created in the same append) is restored
// from a backup: its disks start as the backup's data (drbd.BackupRef), and any disk
// added later gets a full sync.
type RDRestoreFromBackupBegun struct {
	Resource string         `json:"resource"`
	From     drbd.BackupRef `json:"from"`
}

// RDShipRequested: backup ID of the definition (started in the same append, to a
// remote of kind cairn) is restored on that remote's cluster into definition Target
// once complete: on Nodes (none: one node the target picks), in StoragePool and
// ResourceGroup when given. The lease holder asks the target and records its answer
// (rd.ship-finished).
type RDShipRequested struct {
	Resource      string   `json:"resource"`
	ID            string   `json:"id"`
	Remote        string   `json:"remote"`
	Target        string   `json:"target"`
	Nodes         []string `json:"nodes,omitempty"`
	StoragePool   string   `json:"storage_pool,omitempty"`
	ResourceGroup string   `json:"resource_group,omitempty"`
}

// RDShipFinished: the target cluster took the restore of shipped backup ID (OK: its
// definition Target exists there, filled from the backup) or refused it (Error).
type RDShipFinished struct {
	Resource string `json:"resource"`
	ID       string `json:"id"`
	OK       bool   `json:"ok"`
	Error    string `json:"error,omitempty"`
}

func (*RDShipRequested) EventType() string          { return "rd.ship-requested" }
func (*RDShipFinished) EventType() string           { return "rd.ship-finished" }
func (*RemoteCreated) EventType() string            { return "remote.created" }
func (*RemoteDeleted) EventType() string            { return "remote.deleted" }
func (*RemoteModified) EventType() string           { return "remote.modified" }
func (*RemoteBackupDeleted) EventType() string      { return "remote.backup-deleted" }
func (*RDBackupStarted) EventType() string          { return "rd.backup-started" }
func (*RDBackupFinished) EventType() string         { return "rd.backup-finished" }
func (*RDRestoreFromBackupBegun) EventType() string { return "rd.restore-from-backup-begun" }

func init() {
	sameV1 := map[int]Upcaster{1: func(p map[string]any) (map[string]any, error) { return p, nil }} // v2 only added kind cairn
	Register(Type{Name: "remote.created", Version: 2, New: func() Payload { return new(RemoteCreated) }, Upcasters: sameV1})
	Register(Type{Name: "remote.deleted", Version: 1, New: func() Payload { return new(RemoteDeleted) }})
	Register(Type{Name: "remote.modified", Version: 2, New: func() Payload { return new(RemoteModified) }, Upcasters: sameV1})
	Register(Type{Name: "rd.ship-requested", Version: 1, New: func() Payload { return new(RDShipRequested) }})
	Register(Type{Name: "rd.ship-finished", Version: 1, New: func() Payload { return new(RDShipFinished) }})
	Register(Type{Name: "remote.backup-deleted", Version: 1, New: func() Payload { return new(RemoteBackupDeleted) }})
	Register(Type{Name: "rd.backup-started", Version: 1, New: func() Payload { return new(RDBackupStarted) }})
	Register(Type{Name: "rd.backup-finished", Version: 1, New: func() Payload { return new(RDBackupFinished) }})
	Register(Type{Name: "rd.restore-from-backup-begun", Version: 1, New: func() Payload { return new(RDRestoreFromBackupBegun) }})
}

// RemoteClaimed: a backup to the remote started (on cairn.ev.remote.<name>). It makes a
// concurrent backup.delete of its base, or remote.delete, conflict with the start; the
// state is in rd.backup-started.
type RemoteClaimed struct {
	Remote   string `json:"remote"`
	Resource string `json:"resource"`
	ID       string `json:"id"`
}

func (*RemoteClaimed) EventType() string { return "remote.claimed" }

func init() {
	Register(Type{Name: "remote.claimed", Version: 1, New: func() Payload { return new(RemoteClaimed) }})
}
