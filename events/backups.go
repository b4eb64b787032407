package events

import (
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/storage/secret"
)

// Events of backups: remotes (cairn.ev.remote.<name>), the object stores backups go to,
// and a definition's backups (on its own subject, cairn.ev.rd.<name>, beside its
// snapshots). docs/backups.md tells the whole story.

// RemoteCreated: an S3 remote (kind "s3"). Its secret key is held sealed (package
// secret: AES-256-GCM under the serves' key file), never in clear.
type RemoteCreated struct {
	Name      string        `json:"name"`
	Kind      string        `json:"kind"`
	Endpoint  string        `json:"endpoint"`
	Bucket    string        `json:"bucket"`
	Region    string        `json:"region,omitempty"`
	PathStyle bool          `json:"path_style,omitempty"`
	AccessKey string        `json:"access_key"`
	SecretKey secret.Sealed `json:"secret_key"`
	// EncryptionPassphrase, when set, encrypts the backups' chunks on the client
	// (storage/backup.Cipher); sealed like the secret key.
	EncryptionPassphrase *secret.Sealed `json:"encryption_passphrase,omitempty"`
}

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

func (*RemoteCreated) EventType() string            { return "remote.created" }
func (*RemoteDeleted) EventType() string            { return "remote.deleted" }
func (*RemoteModified) EventType() string           { return "remote.modified" }
func (*RemoteBackupDeleted) EventType() string      { return "remote.backup-deleted" }
func (*RDBackupStarted) EventType() string          { return "rd.backup-started" }
func (*RDBackupFinished) EventType() string         { return "rd.backup-finished" }
func (*RDRestoreFromBackupBegun) EventType() string { return "rd.restore-from-backup-begun" }

func init() {
	Register(Type{Name: "remote.created", Version: 1, New: func() Payload { return new(RemoteCreated) }})
	Register(Type{Name: "remote.deleted", Version: 1, New: func() Payload { return new(RemoteDeleted) }})
	Register(Type{Name: "remote.modified", Version: 1, New: func() Payload { return new(RemoteModified) }})
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
