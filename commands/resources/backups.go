package resources

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/replicas"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backup"
)

// Backups of a definition's snapshots to remotes (docs/backups.md): the verbs that
// start, finish and abort an upload (on the definition's subject, with a claim on the
// remote's) and the restore of a backup into a new definition.

// BackupCreate is the body of backup.create.
type BackupCreate struct {
	Resource string `json:"resource"`
	Remote   string `json:"remote"`
	Snapshot string `json:"snapshot"`
	// ID names the backup on the remote (default: the snapshot's name).
	ID string `json:"id,omitempty"`
	// Node uploads it (default: the first online node holding the snapshot).
	Node string `json:"node,omitempty"`
	// Full sends every chunk; by default a backup is incremental to the definition's
	// latest complete backup on the remote, when there is one (LINSTOR's default).
	Full bool `json:"full,omitempty"`
	// Schedule and Missed: a run of a backup schedule (events.RDBackupStarted).
	Schedule string `json:"schedule,omitempty"`
	Missed   int    `json:"missed,omitempty"`
}

// BackupShip is the body of backup.ship: a backup to another cluster (a remote of kind
// cairn), restored there into Target once complete.
type BackupShip struct {
	BackupCreate
	Target string `json:"target"`
	// TargetNodes get a disk each on the target (none: one node the target picks);
	// TargetStoragePool and TargetResourceGroup, when set, are the target's.
	TargetNodes         []string `json:"target_nodes,omitempty"`
	TargetStoragePool   string   `json:"target_storage_pool,omitempty"`
	TargetResourceGroup string   `json:"target_resource_group,omitempty"`
}

// ShipFinish is the body of backup.ship-finish: the target's answer to the restore.
type ShipFinish struct {
	Resource string `json:"resource"`
	ID       string `json:"id"`
	OK       bool   `json:"ok"`
	Error    string `json:"error,omitempty"`
}

// BackupFinish is the body of backup.finish (the lease holder records its node's
// report) and backup.abort (an operator stops an upload: OK false, Error says so).
type BackupFinish struct {
	Resource       string `json:"resource"`
	ID             string `json:"id"`
	OK             bool   `json:"ok,omitempty"`
	Error          string `json:"error,omitempty"`
	ManifestSHA256 string `json:"manifest_sha256,omitempty"`
	BytesTotal     int64  `json:"bytes_total,omitempty"`
	BytesSent      int64  `json:"bytes_sent,omitempty"`
	ChunksSent     int64  `json:"chunks_sent,omitempty"`
}

// BackupRestore is the body of backup.restore.
type BackupRestore struct {
	Remote string `json:"remote"`
	// Resource and ID name the backup (of definition Resource, maybe of another cluster).
	Resource string `json:"resource"`
	ID       string `json:"id"`
	// Target is the new definition; Nodes get a disk each, filled from the backup
	// (the same data: they start in sync); StoragePool, when set, is the pool on each.
	Target        string   `json:"target"`
	Nodes         []string `json:"nodes,omitempty"`
	StoragePool   string   `json:"storage_pool,omitempty"`
	ResourceGroup string   `json:"resource_group,omitempty"`
	// PlaceCount, instead of Nodes, has autoplace pick that many nodes (a backup
	// shipped here without target nodes: one).
	PlaceCount int `json:"place_count,omitempty"`
	// Volumes and ManifestSHA256 are the backup's, as its manifest says: `cairn backup
	// restore` and the HTTP API read the manifest and fill them in.
	Volumes        []BackupVolume `json:"volumes"`
	ManifestSHA256 string         `json:"manifest_sha256"`
}

// BackupRestoreOf is backup.restore of backup m on remote, whose manifest hashes to
// sum: its volumes and SHA-256 as the manifest says (the caller sets the target, nodes,
// pool and group).
func BackupRestoreOf(remote string, m backup.Manifest, sum string) BackupRestore {
	c := BackupRestore{Remote: remote, Resource: m.Resource, ID: m.ID, ManifestSHA256: sum}
	for _, v := range m.Volumes {
		c.Volumes = append(c.Volumes, BackupVolume{Number: v.Number, SizeKiB: v.SizeKiB})
	}
	return c
}

// BackupVolume is one volume of a backup to restore.
type BackupVolume struct {
	Number  int    `json:"number"`
	SizeKiB uint64 `json:"size_kib"`
}

// readRemote makes the decision depend on remote's subject and returns it. Refuses
// not_found.
func (p *resourcePlan) readRemote(name string) (projections.Remote, error) {
	if err := p.read(p.names.Event("remote", name)); err != nil {
		return projections.Remote{}, err
	}
	r, ok, err := p.v.Remote(name)
	if err != nil {
		return r, err
	}
	if !ok {
		return r, cairn.Errorf(cairn.CodeNotFound, "remote %s does not exist", name).About(cairn.ObjRemote)
	}
	return r, nil
}

// createBackup starts the upload of a taken snapshot to a remote: rd.backup-started
// (with the node that uploads and the base of an incremental) and remote.claimed.
// Refuses not_found (remote, snapshot), precondition_failed (snapshot not taken; no
// online node holds it; the id uploading to another remote), invalid_argument naming
// node (a node without the snapshot), already_exists (the id on that remote uploading or
// done).
func (p *resourcePlan) createBackup(c BackupCreate) error {
	if _, err := p.readRemote(c.Remote); err != nil {
		return err
	}
	s, ok := p.rd.Snapshot(c.Snapshot)
	if !ok {
		return cairn.Errorf(cairn.CodeNotFound, "resource definition %s has no snapshot %s", p.rd.Name, c.Snapshot).About(cairn.ObjSnapshot)
	}
	if s.Phase != projections.SnapshotTaken {
		return cairn.Errorf(cairn.CodePreconditionFailed, "snapshot %s of %s is %s; only a taken snapshot is backed up", c.Snapshot, p.rd.Name, s.Phase)
	}
	id := c.ID
	if id == "" {
		id = c.Snapshot
	}
	if b, ok := p.rd.Backup(c.Remote, id); ok && (b.Phase == projections.BackupUploading || b.Phase == projections.BackupDone) {
		return cairn.Errorf(cairn.CodeAlreadyExists, "backup %s of %s on remote %s is %s", id, p.rd.Name, c.Remote, b.Phase).About(cairn.ObjBackup)
	}
	// An id names one upload at a time, whatever the remote: its node's agent and the
	// end it reports know uploads by definition and id.
	for _, b := range p.rd.Backups {
		if b.ID == id && b.Phase == projections.BackupUploading {
			return cairn.Errorf(cairn.CodePreconditionFailed, "backup %s of %s is uploading to remote %s; give this one another id", id, p.rd.Name, b.Remote)
		}
	}
	node := c.Node
	if node != "" && !slices.Contains(s.Nodes, node) {
		return cairn.InvalidField("node", "node %s holds no copy of snapshot %s of %s (nodes: %s)", node, c.Snapshot, p.rd.Name, strings.Join(s.Nodes, ", "))
	}
	if node == "" {
		for _, n := range s.Nodes {
			if cand, ok := p.candidate(n); ok && cand.Online {
				node = n
				break
			}
		}
		if node == "" {
			for _, n := range s.Nodes { // the refusal depends on their states
				if err := p.read(p.names.Event("node", n)); err != nil {
					return err
				}
			}
			return cairn.Errorf(cairn.CodePreconditionFailed, "no node holding snapshot %s of %s is online (%s)", c.Snapshot, p.rd.Name, strings.Join(s.Nodes, ", "))
		}
	}
	ev := &events.RDBackupStarted{Resource: p.rd.Name, ID: id, Snapshot: c.Snapshot, Remote: c.Remote, Node: node, Schedule: c.Schedule, Missed: c.Missed}
	if base, ok := p.rd.LatestBackup(c.Remote); ok && !c.Full {
		ev.Base = base.ID
	}
	p.emit(ev)
	p.claims = append(p.claims, events.Draft{Subject: p.names.Event("remote", c.Remote),
		Payload: &events.RemoteClaimed{Remote: c.Remote, Resource: p.rd.Name, ID: id}})
	return nil
}

// shipBackup starts a backup to another cluster as createBackup does, and records
// where it is to be restored there (rd.ship-requested). Refuses what createBackup
// refuses, and invalid_argument naming remote for a remote that is not a cluster.
func (p *resourcePlan) shipBackup(c BackupShip) error {
	r, err := p.readRemote(c.Remote)
	if err != nil {
		return err
	}
	if r.Kind != events.RemoteCairn {
		return cairn.InvalidField("remote", "remote %s is an %s remote; backups are shipped to another cluster (a remote of kind cairn); use backup.create", c.Remote, r.Kind)
	}
	if err := p.createBackup(c.BackupCreate); err != nil {
		return err
	}
	id := c.ID
	if id == "" {
		id = c.Snapshot
	}
	p.emit(&events.RDShipRequested{Resource: p.rd.Name, ID: id, Remote: c.Remote, Target: c.Target, Nodes: c.TargetNodes,
		StoragePool: c.TargetStoragePool, ResourceGroup: c.TargetResourceGroup})
	return nil
}

// finishShip records the target's answer to a shipped backup's restore. Refuses
// not_found (no such backup) and precondition_failed for one whose target is not
// being asked (not shipped, still uploading, or answered already).
func (p *resourcePlan) finishShip(c ShipFinish) error {
	i := slices.IndexFunc(p.rd.Backups, func(b projections.RDBackup) bool { return b.ID == c.ID && b.Ship != nil })
	if i < 0 {
		return cairn.Errorf(cairn.CodeNotFound, "resource definition %s has no shipped backup %s", p.rd.Name, c.ID).About(cairn.ObjBackup)
	}
	if s := p.rd.Backups[i].Ship; s.Phase != projections.ShipRestoring {
		return cairn.Errorf(cairn.CodePreconditionFailed, "shipped backup %s of %s is %s, not waiting for its target's answer", c.ID, p.rd.Name, s.Phase)
	}
	p.emit(&events.RDShipFinished{Resource: p.rd.Name, ID: c.ID, OK: c.OK, Error: c.Error})
	return nil
}

// finishBackup records the end of an upload. Refuses not_found (no such backup) and
// precondition_failed for one that is not uploading (a repeated report: nothing
// changes).
func (p *resourcePlan) finishBackup(c BackupFinish) error {
	i := slices.IndexFunc(p.rd.Backups, func(b projections.RDBackup) bool { return b.ID == c.ID })
	if i < 0 {
		return cairn.Errorf(cairn.CodeNotFound, "resource definition %s has no backup %s", p.rd.Name, c.ID).About(cairn.ObjBackup)
	}
	j := slices.IndexFunc(p.rd.Backups, func(b projections.RDBackup) bool { return b.ID == c.ID && b.Phase == projections.BackupUploading })
	if j < 0 {
		return cairn.Errorf(cairn.CodePreconditionFailed, "backup %s of %s is %s, not uploading", c.ID, p.rd.Name, p.rd.Backups[i].Phase)
	}
	if c.OK && c.ManifestSHA256 == "" {
		return cairn.InvalidField("manifest_sha256", "a complete backup names its manifest's SHA-256")
	}
	p.emit(&events.RDBackupFinished{Resource: p.rd.Name, ID: c.ID, OK: c.OK, Error: c.Error, ManifestSHA256: c.ManifestSHA256,
		BytesTotal: c.BytesTotal, BytesSent: c.BytesSent, ChunksSent: c.ChunksSent})
	return nil
}

// refuseBackupsOf refuses precondition_failed when an upload of snapshot name is
// under way (deleting the snapshot would cut it off: backup.abort first).
func (p *resourcePlan) refuseBackupsOf(name string) error {
	for _, b := range p.rd.Backups {
		if b.Snapshot == name && b.Phase == projections.BackupUploading {
			return cairn.Errorf(cairn.CodePreconditionFailed, "backup %s of snapshot %s of %s to remote %s is uploading; abort it first (backup.abort)", b.ID, name, p.rd.Name, b.Remote)
		}
	}
	return nil
}

// restoreBackup creates definition c.Target from a backup: the backup's volumes (new
// day-0 GIs), a disk on every node of c.Nodes filled from the backup with restore seeds
// (one current UUID per volume shared by all: they hold the same verified data and
// start in sync), and the tiebreaker rule; disks added later get a full sync. Refuses
// not_found (remote, node), invalid_argument naming volumes or nodes, and what rd.create
// and replica placement refuse.
func (p *resourcePlan) restoreBackup(c BackupRestore) error {
	if c.Remote != events.RemoteReceived { // this cluster's received store is no remote of the views
		if _, err := p.readRemote(c.Remote); err != nil {
			return err
		}
	}
	if len(c.Volumes) == 0 {
		return cairn.InvalidField("volumes", "required: the backup's volumes as its manifest lists them (cairn backup restore and the HTTP API read them from the remote)")
	}
	if len(c.Nodes) == 0 && c.PlaceCount == 0 {
		return cairn.InvalidField("nodes", "required: at least one node to restore on (or place_count, for nodes this cluster picks)")
	}
	if len(c.Nodes) > 0 && c.PlaceCount > 0 {
		return cairn.InvalidField("place_count", "give nodes or place_count, not both")
	}
	if err := p.createDefinition(c.Target, c.ResourceGroup, drbd.Options{}, nil); err != nil {
		return err
	}
	from := drbd.BackupRef{Remote: c.Remote, Resource: c.Resource, ID: c.ID, ManifestSHA256: c.ManifestSHA256}
	p.emit(&events.RDRestoreFromBackupBegun{Resource: c.Target, From: from})
	p.rd.RestoredFromBackup = &from
	for i, vol := range c.Volumes {
		if vol.SizeKiB == 0 {
			return cairn.InvalidField(fmt.Sprintf("volumes[%d].size_kib", i), "must be more than 0")
		}
		if err := p.createVolume(vol.Number, vol.SizeKiB); err != nil {
			return err
		}
	}
	current, err := p.restoreCurrents()
	if err != nil {
		return err
	}
	p.restore = &restorePlan{backup: &from, current: current}
	if c.PlaceCount > 0 { // the disks go where autoplace puts them, in StoragePool when given
		if c.StoragePool != "" {
			p.filter = &replicas.Rules{StoragePool: c.StoragePool}
		}
		if err := p.autoplace(c.PlaceCount, false, drbd.Options{}); err != nil {
			return err
		}
	}
	for i, node := range c.Nodes {
		if slices.Contains(c.Nodes[:i], node) {
			return cairn.InvalidField(fmt.Sprintf("nodes[%d]", i), "node %s is named twice", node)
		}
		cand, ok := p.candidate(node)
		if !ok {
			return cairn.Errorf(cairn.CodeNotFound, "node %s is not in the cluster", node).About(cairn.ObjNode)
		}
		if !cand.Online {
			if err := p.read(p.names.Event("node", node)); err != nil {
				return err
			}
			return cairn.Errorf(cairn.CodePreconditionFailed, "node %s is offline", node)
		}
		pool, err := p.pickPool(node, c.StoragePool)
		if err != nil {
			return err
		}
		if err := p.addReplica(node, &pool, false, "restore", false, drbd.Options{}); err != nil {
			return err
		}
	}
	p.restore = nil
	return p.tiebreaker()
}
