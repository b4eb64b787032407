package projections

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairn-io/cairn/events"
)

// Remote is an object store backups go to: its last remote.created or remote.modified
// (the secret key and the passphrase sealed).
type Remote struct {
	events.RemoteCreated
	Seq uint64 `json:"seq"`
}

// RDBackup is one backup of a definition to a remote.
type RDBackup struct {
	ID       string `json:"id"`
	Snapshot string `json:"snapshot"`
	Remote   string `json:"remote"`
	Node     string `json:"node"`
	Base     string `json:"base,omitempty"`
	// Schedule is the schedule whose run this is ("" for one asked for).
	Schedule string `json:"schedule,omitempty"`
	// Phase: BackupUploading, BackupDone, BackupFailed or BackupDeleted.
	Phase          string `json:"phase"`
	Error          string `json:"error,omitempty"`
	ManifestSHA256 string `json:"manifest_sha256,omitempty"`
	BytesTotal     int64  `json:"bytes_total,omitempty"`
	BytesSent      int64  `json:"bytes_sent,omitempty"`
	ChunksSent     int64  `json:"chunks_sent,omitempty"`
	// Ship, for a backup shipped to another cluster (backup.ship), is its restore there.
	Ship       *Ship     `json:"ship,omitempty"`
	StartedSeq uint64    `json:"started_seq"`
	StartedAt  time.Time `json:"started_at"`
	DoneAt     time.Time `json:"done_at,omitzero"`
}

// Ship is a shipped backup's restore on the remote's cluster.
type Ship struct {
	Target        string   `json:"target"`
	Nodes         []string `json:"nodes,omitempty"`
	StoragePool   string   `json:"storage_pool,omitempty"`
	ResourceGroup string   `json:"resource_group,omitempty"`
	// Phase: ShipWaiting (for the upload), ShipRestoring (the upload is complete; the
	// target is being asked), ShipDone (the target took it), ShipFailed (the upload
	// failed or the target refused: Error).
	Phase string `json:"phase"`
	Error string `json:"error,omitempty"`
}

// Phases of a Ship.
const (
	ShipWaiting   = "waiting"
	ShipRestoring = "restoring"
	ShipDone      = "done"
	ShipFailed    = "failed"
)

// shipDueKey indexes the shipped backups whose upload is complete and whose target
// has not answered yet, so the lease holder finds them without reading every
// definition.
func shipDueKey(rd, id string) string { return "v/ship-due/" + rd + "/" + id }

// ShipDue is one shipped backup whose target is to be asked (the index's entry).
type ShipDue struct {
	Resource string `json:"resource"`
	ID       string `json:"id"`
	Remote   string `json:"remote"`
}

// ShipsDue returns every shipped backup whose target is to be asked.
func (v *View) ShipsDue() ([]ShipDue, error) {
	var out []ShipDue
	err := v.scan("v/ship-due/", func(key string, val []byte) error {
		var d ShipDue
		if err := unmarshalInto(key, val, &d); err != nil {
			return err
		}
		out = append(out, d)
		return nil
	})
	return out, err
}

// Phases of an RDBackup.
const (
	BackupUploading = "uploading"
	BackupDone      = "done"
	BackupFailed    = "failed"
	BackupDeleted   = "deleted"
)

// Backup returns the definition's backup id on remote, if any.
func (rd *ResourceDefinition) Backup(remote, id string) (*RDBackup, bool) {
	for i := range rd.Backups {
		if rd.Backups[i].Remote == remote && rd.Backups[i].ID == id {
			return &rd.Backups[i], true
		}
	}
	return nil, false
}

// LatestBackup returns the newest complete backup of the definition on remote that is
// not deleted (the base of an incremental one), if any.
func (rd *ResourceDefinition) LatestBackup(remote string) (*RDBackup, bool) {
	var best *RDBackup
	for i := range rd.Backups {
		b := &rd.Backups[i]
		if b.Remote == remote && b.Phase == BackupDone && (best == nil || b.StartedSeq > best.StartedSeq) {
			best = b
		}
	}
	return best, best != nil
}

func remoteKey(name string) string { return "v/remote/" + name }

// backupUnderWayKey indexes the uploads under way, so the serve holding the lease finds
// them without reading every definition; its value is the remote and the base.
func backupUnderWayKey(rd, id string) string { return "v/backup-busy/" + rd + "/" + id }

// BackupUnderWay is one upload under way (the index's entry).
type BackupUnderWay struct {
	Resource string `json:"resource"`
	ID       string `json:"id"`
	Remote   string `json:"remote"`
	Base     string `json:"base,omitempty"`
}

// applyBackup folds remotes and backups; handled is false for other types.
func applyBackup(t *tx, ev events.Event) (handled bool, err error) {
	switch d := ev.Data.(type) {
	case *events.RemoteCreated:
		return true, t.put(remoteKey(d.Name), Remote{RemoteCreated: *d, Seq: ev.Seq})
	case *events.RemoteModified:
		return true, t.put(remoteKey(d.Name), Remote{RemoteCreated: events.RemoteCreated(*d), Seq: ev.Seq})
	case *events.RemoteClaimed:
		return true, nil // a claim: the state is in rd.backup-started
	case *events.RemoteDeleted:
		t.del(remoteKey(d.Name))
		return true, nil
	case *events.RemoteBackupDeleted:
		var rd ResourceDefinition
		if ok, err := getJSON(t, rdKey(d.Resource), &rd); err != nil || !ok {
			return true, err
		}
		if _, ok := rd.Backup(d.Remote, d.ID); !ok {
			return true, nil
		}
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			b, _ := rd.Backup(d.Remote, d.ID)
			b.Phase = BackupDeleted
			return nil
		})
	case *events.RDBackupStarted:
		if err := t.put(backupUnderWayKey(d.Resource, d.ID), BackupUnderWay{Resource: d.Resource, ID: d.ID, Remote: d.Remote, Base: d.Base}); err != nil {
			return true, err
		}
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			// A backup of the same id on the same remote deleted or failed before: replaced.
			rd.Backups = slices.DeleteFunc(rd.Backups, func(b RDBackup) bool { return b.Remote == d.Remote && b.ID == d.ID })
			rd.Backups = append(rd.Backups, RDBackup{ID: d.ID, Snapshot: d.Snapshot, Remote: d.Remote, Node: d.Node, Base: d.Base, Schedule: d.Schedule,
				Phase: BackupUploading, StartedSeq: ev.Seq, StartedAt: ev.OccurredAt})
			slices.SortFunc(rd.Backups, func(a, b RDBackup) int { return strings.Compare(a.ID+"/"+a.Remote, b.ID+"/"+b.Remote) })
			return nil
		})
	case *events.RDBackupFinished:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			i := slices.IndexFunc(rd.Backups, func(b RDBackup) bool { return b.ID == d.ID && b.Phase == BackupUploading })
			if i < 0 {
				return fmt.Errorf("rd.backup-finished: %s has no backup %s uploading", d.Resource, d.ID)
			}
			b := &rd.Backups[i]
			t.del(backupUnderWayKey(d.Resource, d.ID))
			b.Phase, b.Error, b.DoneAt = BackupDone, "", ev.OccurredAt
			if !d.OK {
				b.Phase, b.Error = BackupFailed, d.Error
			}
			b.ManifestSHA256, b.BytesTotal, b.BytesSent, b.ChunksSent = d.ManifestSHA256, d.BytesTotal, d.BytesSent, d.ChunksSent
			if b.Ship != nil {
				b.Ship.Phase = ShipRestoring
				if !d.OK {
					b.Ship.Phase, b.Ship.Error = ShipFailed, "the upload failed: "+d.Error
				} else if err := t.put(shipDueKey(d.Resource, d.ID), ShipDue{Resource: d.Resource, ID: d.ID, Remote: b.Remote}); err != nil {
					return err
				}
			}
			return nil
		})
	case *events.RDShipRequested:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			b, ok := rd.Backup(d.Remote, d.ID)
			if !ok {
				return fmt.Errorf("rd.ship-requested: %s has no backup %s to %s", d.Resource, d.ID, d.Remote)
			}
			b.Ship = &Ship{Target: d.Target, Nodes: d.Nodes, StoragePool: d.StoragePool, ResourceGroup: d.ResourceGroup, Phase: ShipWaiting}
			return nil
		})
	case *events.RDShipFinished:
		t.del(shipDueKey(d.Resource, d.ID))
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			i := slices.IndexFunc(rd.Backups, func(b RDBackup) bool { return b.ID == d.ID && b.Ship != nil && b.Ship.Phase == ShipRestoring })
			if i < 0 {
				return fmt.Errorf("rd.ship-finished: %s has no shipped backup %s waiting for its target", d.Resource, d.ID)
			}
			s := rd.Backups[i].Ship
			s.Phase, s.Error = ShipDone, ""
			if !d.OK {
				s.Phase, s.Error = ShipFailed, d.Error
			}
			return nil
		})
	case *events.RDRestoreFromBackupBegun:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			from := d.From
			rd.RestoredFromBackup = &from
			return nil
		})
	}
	return false, nil
}

// Remote returns the remote called name, if any.
func (v *View) Remote(name string) (Remote, bool, error) {
	var r Remote
	ok, err := getJSON(v.r, remoteKey(name), &r)
	return r, ok, err
}

// Remotes returns every remote in name order.
func (v *View) Remotes() ([]Remote, error) {
	var out []Remote
	err := v.scan("v/remote/", func(key string, val []byte) error {
		var r Remote
		if err := unmarshalInto(key, val, &r); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// BackupsUnderWay returns every upload under way, by definition and id.
func (v *View) BackupsUnderWay() ([]BackupUnderWay, error) {
	var out []BackupUnderWay
	err := v.scan("v/backup-busy/", func(key string, val []byte) error {
		var b BackupUnderWay
		if err := unmarshalInto(key, val, &b); err != nil {
			return err
		}
		out = append(out, b)
		return nil
	})
	return out, err
}

// Schedule is a backup schedule (schedule.created).
type Schedule struct {
	events.ScheduleCreated
	Seq uint64 `json:"seq"`
}

// ScheduleEnabled is one enablement of a schedule on a remote, for a definition or a
// group (remote.schedule-enabled).
type ScheduleEnabled struct {
	events.RemoteScheduleEnabled
	Seq       uint64    `json:"seq"`
	EnabledAt time.Time `json:"enabled_at"`
}

func scheduleKey(name string) string { return "v/schedule/" + name }

// enabledKey indexes an enablement under its remote: v/remote-sched/<remote>/<schedule>/
// rd:<name> or rg:<name>.
func enabledKey(remote, schedule, resource, group string) string {
	target := "rd:" + resource
	if group != "" {
		target = "rg:" + group
	}
	return "v/remote-sched/" + remote + "/" + schedule + "/" + target
}

// applySchedule folds schedules and their enablements; handled is false for other types.
func applySchedule(t *tx, ev events.Event) (handled bool, err error) {
	switch d := ev.Data.(type) {
	case *events.ScheduleCreated:
		return true, t.put(scheduleKey(d.Name), Schedule{ScheduleCreated: *d, Seq: ev.Seq})
	case *events.ScheduleModified:
		return true, t.put(scheduleKey(d.Name), Schedule{ScheduleCreated: events.ScheduleCreated(*d), Seq: ev.Seq})
	case *events.ScheduleDeleted:
		t.del(scheduleKey(d.Name))
		return true, nil
	case *events.RemoteScheduleEnabled:
		return true, t.put(enabledKey(d.Remote, d.Schedule, d.Resource, d.Group), ScheduleEnabled{RemoteScheduleEnabled: *d, Seq: ev.Seq, EnabledAt: ev.OccurredAt})
	case *events.RemoteScheduleDisabled:
		t.del(enabledKey(d.Remote, d.Schedule, d.Resource, d.Group))
		return true, nil
	}
	return false, nil
}

// Schedule returns the schedule called name, if any.
func (v *View) Schedule(name string) (Schedule, bool, error) {
	var s Schedule
	ok, err := getJSON(v.r, scheduleKey(name), &s)
	return s, ok, err
}

// Schedules returns every schedule in name order.
func (v *View) Schedules() ([]Schedule, error) {
	var out []Schedule
	err := v.scan("v/schedule/", func(key string, val []byte) error {
		var s Schedule
		if err := unmarshalInto(key, val, &s); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// ScheduleEnablements returns every enablement of a schedule on a remote, by remote,
// schedule and target; remote "" for every remote's.
func (v *View) ScheduleEnablements(remote string) ([]ScheduleEnabled, error) {
	prefix := "v/remote-sched/"
	if remote != "" {
		prefix += remote + "/"
	}
	var out []ScheduleEnabled
	err := v.scan(prefix, func(key string, val []byte) error {
		var s ScheduleEnabled
		if err := unmarshalInto(key, val, &s); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// ScheduleEnabledFor reports whether schedule is enabled on remote for the definition
// resource or the group (one of them set).
func (v *View) ScheduleEnabledFor(remote, schedule, resource, group string) (bool, error) {
	var s ScheduleEnabled
	return getJSON(v.r, enabledKey(remote, schedule, resource, group), &s)
}
