package projections

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/cockroachdb/pebble/v2"
)

// StoragePool is a node's storage pool and how much of it replicas have taken.
type StoragePool struct {
	Node         string           `json:"node"`
	Name         string           `json:"name"`
	Provider     backing.Provider `json:"provider"`
	Pool         string           `json:"pool"`
	CapacityKiB  uint64           `json:"capacity_kib"`
	AllocatedKiB uint64           `json:"allocated_kib"`
	CreatedSeq   uint64           `json:"created_seq"`
	// Reported is the capacity the node's agent last reported that was recorded
	// (sp.capacity-reported), nil before the first.
	Reported *CapacityReport `json:"reported,omitempty"`
	// Overprovision is the thin pool's over-provisioning ratio set by sp.modify (0: the
	// default, DefaultOverprovision; thick pools are never over-provisioned).
	Overprovision float64 `json:"overprovision,omitempty"`
	// Devices are the block devices its agent makes the back end on (sp.create).
	Devices []string `json:"devices,omitempty"`
}

// CapacityReport is a recorded report of a pool's back end.
type CapacityReport struct {
	TotalKiB uint64    `json:"total_kib"`
	FreeKiB  uint64    `json:"free_kib"`
	At       time.Time `json:"at"`
	// AllocatedKiB is what replicas had taken when the report was recorded: a thick
	// pool's reported free already holds those, and later disks come off it.
	AllocatedKiB uint64 `json:"allocated_kib"`
	Seq          uint64 `json:"seq"`
}

// DefaultOverprovision is how many times its reported size a thin pool may promise to
// disks when sp.modify gave it no ratio (LINSTOR's MaxOversubscriptionRatio default).
const DefaultOverprovision = 20

// Thin reports whether the pool's volumes take space only as they are written.
func (p StoragePool) Thin() bool {
	return p.Provider.ZeroesUnwritten() && p.Provider != backing.ProviderZFS
}

// OverprovisionRatio is the ratio a thin pool may promise (1 for thick pools).
func (p StoragePool) OverprovisionRatio() float64 {
	switch {
	case !p.Thin():
		return 1
	case p.Overprovision > 0:
		return p.Overprovision
	}
	return DefaultOverprovision
}

// Known reports whether the pool has a capacity to place on: one the operator gave
// (capacity_kib) or one its agent reported.
func (p StoragePool) Known() bool { return p.CapacityKiB > 0 || p.Reported != nil }

// FreeKiB is what a new disk may take: the smaller of what the operator's capacity leaves
// (capacity_kib, times the over-provisioning ratio on a thin pool, minus what replicas
// took) and what the last recorded report leaves — for a thick pool the reported free
// minus what replicas took since the report, for a thin one min(total x ratio - taken,
// free x ratio). 0 when neither is known.
func (p StoragePool) FreeKiB() uint64 {
	free, known := uint64(math.MaxUint64), false
	if p.CapacityKiB > 0 {
		// A thin pool promises its capacity times the ratio: disks take room only as
		// they are written.
		free, known = sub(uint64(float64(p.CapacityKiB)*p.OverprovisionRatio()), p.AllocatedKiB), true
	}
	if r := p.Reported; r != nil {
		known = true
		if p.Thin() {
			ratio := p.OverprovisionRatio()
			free = min(free, sub(uint64(float64(r.TotalKiB)*ratio), p.AllocatedKiB), uint64(float64(r.FreeKiB)*ratio))
		} else {
			free = min(free, sub(r.FreeKiB, sub(p.AllocatedKiB, r.AllocatedKiB)))
		}
	}
	if !known {
		return 0
	}
	return free
}

// TotalKiB is the pool's size: the operator's capacity, or what its agent reported where
// that is smaller (or the only one known); 0 when neither is known.
func (p StoragePool) TotalKiB() uint64 {
	total := p.CapacityKiB
	if r := p.Reported; r != nil && (total == 0 || r.TotalKiB < total) {
		total = r.TotalKiB
	}
	return total
}

// sub is a - b, 0 when b is larger.
func sub(a, b uint64) uint64 {
	if b >= a {
		return 0
	}
	return a - b
}

// ResourceGroup is a resource group as created, with its free-form properties.
type ResourceGroup struct {
	events.ResourceGroupCreated
	Properties map[string]string `json:"properties,omitempty"`
	CreatedSeq uint64            `json:"created_seq"`
	// OptionsSeq is the sequence of the event that last set the group's DRBD options:
	// desired state resolving them is at least that new.
	OptionsSeq uint64 `json:"options_seq,omitempty"`
}

// VolumeDefinition is one volume of a definition.
type VolumeDefinition struct {
	Volume     int    `json:"volume"`
	SizeKiB    uint64 `json:"size_kib"`
	Day0GI     string `json:"day0_gi"`
	CreatedSeq uint64 `json:"created_seq"`
	// Properties are the volume definition's free-form properties (vd.modify).
	Properties map[string]string `json:"properties,omitempty"`
	// FilesystemWanted is the filesystem to make on the volume (wantFilesystems), ""
	// for none; Filesystem is the one made, once: nil until a node reports it made.
	FilesystemWanted string            `json:"filesystem_wanted,omitempty"`
	Filesystem       *VolumeFilesystem `json:"filesystem,omitempty"`
}

// wantFilesystems decides which of rd's volumes (those which) get a filesystem made:
// those where FileSystem/Type is in force (the volume's property, else the
// definition's, else its group's) at the moment they start holding data: when the
// definition's first replica is placed (a definition restored from a snapshot or a
// backup never: its volumes hold data already), or at their creation on a definition
// that has replicas. A type set later never makes one over data already written.
func wantFilesystems(t *tx, rd *ResourceDefinition, which func(VolumeDefinition) bool) error {
	var group ResourceGroup
	if rd.ResourceGroup != "" {
		if _, err := getJSON(t, rgKey(rd.ResourceGroup), &group); err != nil {
			return err
		}
	}
	for i, v := range rd.Volumes {
		if !which(v) || v.Filesystem != nil {
			continue
		}
		rd.Volumes[i].FilesystemWanted = FilesystemProperty(v, *rd, &group, "FileSystem/Type")
	}
	return nil
}

// FilesystemProperty is a FileSystem/* property in force for volume v of rd: the
// volume's, else the definition's, else its group's (nil: none).
func FilesystemProperty(v VolumeDefinition, rd ResourceDefinition, group *ResourceGroup, key string) string {
	if x := v.Properties[key]; x != "" {
		return x
	}
	if x := rd.Properties[key]; x != "" {
		return x
	}
	if group != nil {
		return group.Properties[key]
	}
	return ""
}

// VolumeFilesystem is the filesystem made on a volume: its type, the node that made
// it, and the event that recorded it.
type VolumeFilesystem struct {
	Type string `json:"type"`
	Node string `json:"node"`
	Seq  uint64 `json:"seq"`
}

// Replica is one replica of a definition (its desired state; what agents observe is
// kept apart).
type Replica struct {
	Node        string               `json:"node"`
	NodeID      int                  `json:"node_id"`
	Minors      []events.VolumeMinor `json:"minors"`
	Diskless    bool                 `json:"diskless,omitempty"`
	Tiebreaker  bool                 `json:"tiebreaker,omitempty"`
	StoragePool string               `json:"storage_pool,omitempty"`
	Provider    backing.Provider     `json:"provider,omitempty"`
	Pool        string               `json:"pool,omitempty"`
	Seeds       []drbd.Seed          `json:"seeds,omitempty"`
	FullSync    bool                 `json:"full_sync,omitempty"`
	DRBDOptions drbd.Options         `json:"drbd_options,omitzero"`
	// Properties are the replica's free-form properties (replica.modify; LINSTOR's
	// resource properties), as given.
	Properties map[string]string `json:"properties,omitempty"`
	Inactive   bool              `json:"inactive,omitempty"`
	// RestoreFrom: the disk started as this node's copy of a snapshot.
	RestoreFrom *drbd.SnapshotRef `json:"restore_from,omitempty"`
	// RestoreBackup: the disk started as the data of a backup.
	RestoreBackup *drbd.BackupRef `json:"restore_backup,omitempty"`
	// Incarnation is the sequence of the event that created the replica's current disk
	// (replica.added, or replica.disk-toggled to diskful).
	Incarnation uint64    `json:"incarnation"`
	AddedSeq    uint64    `json:"added_seq"`
	AddedAt     time.Time `json:"added_at,omitzero"` // when replica.added occurred
	// Replaces: the node whose replica this one replaces (replica.replace or
	// replica.migrate), until that
	// replica is removed.
	Replaces string `json:"replaces,omitempty"`
}

// Minor returns the replica's minor of a volume (ok false when it has none).
func (r Replica) Minor(volume int) (int, bool) {
	for _, m := range r.Minors {
		if m.Volume == volume {
			return m.Minor, true
		}
	}
	return 0, false
}

// ResourceDefinition is a DRBD resource: its port, volumes and replicas (by node id).
type ResourceDefinition struct {
	Name          string       `json:"name"`
	ResourceGroup string       `json:"resource_group,omitempty"`
	Port          int          `json:"port"`
	DRBDOptions   drbd.Options `json:"drbd_options,omitzero"`
	// Properties are the free-form properties (LINSTOR's outside DrbdOptions/), as given.
	Properties map[string]string  `json:"properties,omitempty"`
	Volumes    []VolumeDefinition `json:"volumes"`
	Replicas   []Replica          `json:"replicas"`
	// RestoredFrom is the snapshot the definition was restored from (rd.restore): every
	// replica added later gets a full sync.
	RestoredFrom *drbd.SnapshotRef `json:"restored_from,omitempty"`
	// RestoredFromBackup is the backup the definition was restored from
	// (backup.restore): every replica added later gets a full sync.
	RestoredFromBackup *drbd.BackupRef `json:"restored_from_backup,omitempty"`
	// Rollback is the definition's last roll back to a snapshot (rd.rolled-back).
	Rollback *RollbackRecord `json:"rollback,omitempty"`
	// Snapshots are the definition's snapshots, by name (docs/resources.md "Snapshots").
	Snapshots []RDSnapshot `json:"snapshots,omitempty"`
	// Backups are the definition's backups to remotes, by id (docs/backups.md).
	Backups []RDBackup `json:"backups,omitempty"`
	// Files are the paths of the external files it deploys (rd.file-deploy), sorted.
	Files      []string `json:"files,omitempty"`
	CreatedSeq uint64   `json:"created_seq"`
	// Seq is the sequence of the last event that changed the definition.
	Seq uint64 `json:"seq"`
}

// RDSnapshot is one snapshot of a definition (not a failure-domain volume's Snapshot).
type RDSnapshot struct {
	Name string `json:"name"`
	// Nodes are the nodes whose disks take part (and hold it once taken).
	Nodes []string `json:"nodes"`
	// Diskless are the nodes of diskless replicas that suspend and resume I/O with the
	// disks but hold no copy.
	Diskless []string `json:"diskless,omitempty"`
	// Phase: SnapshotSuspending, SnapshotTaking, SnapshotTaken or SnapshotFailed.
	Phase  string `json:"phase"`
	Reason string `json:"reason,omitempty"`
	// CloneTo is the definition rd.clone restores from this snapshot once taken;
	// Cloned is set once the restore created it (nothing restores it again, even after
	// the target is deleted).
	CloneTo string `json:"clone_to,omitempty"`
	Cloned  bool   `json:"cloned,omitempty"`
	// Group names every snapshot of a group snapshot (rd.snapshot-multi), this one
	// included; empty for a snapshot of this definition alone.
	Group []events.RDSnapshotRef `json:"group,omitempty"`
	// Volumes are the definition's volumes (number and size) when it was started.
	Volumes    []VolumeDefinition `json:"volumes"`
	StartedSeq uint64             `json:"started_seq"`
	StartedAt  time.Time          `json:"started_at,omitzero"`
	// DoneAt is when it was taken or failed.
	DoneAt time.Time `json:"done_at,omitzero"`
}

// RollbackRecord is a definition's roll back: the snapshot, the event's sequence and
// the shared current UUID of each volume (hex, by volume number).
type RollbackRecord struct {
	Snapshot string            `json:"snapshot"`
	Seq      uint64            `json:"seq"`
	Current  map[string]string `json:"current"`
}

// Phases of an RDSnapshot.
const (
	SnapshotSuspending = "suspending"
	SnapshotTaking     = "taking"
	SnapshotTaken      = "taken"
	SnapshotFailed     = "failed"
)

// Snapshot returns the definition's snapshot called name, if any.
func (rd *ResourceDefinition) Snapshot(name string) (*RDSnapshot, bool) {
	for i := range rd.Snapshots {
		if rd.Snapshots[i].Name == name {
			return &rd.Snapshots[i], true
		}
	}
	return nil, false
}

// Replica returns the replica on node, if any.
func (rd *ResourceDefinition) Replica(node string) (*Replica, bool) {
	for i := range rd.Replicas {
		if rd.Replicas[i].Node == node {
			return &rd.Replicas[i], true
		}
	}
	return nil, false
}

// SizeKiB is the sum of the definition's volume sizes (what a diskful replica takes).
func (rd *ResourceDefinition) SizeKiB() uint64 {
	var s uint64
	for _, v := range rd.Volumes {
		s += v.SizeKiB
	}
	return s
}

// modifyGroup applies a group patch; when its DRBD options change, every node holding a
// replica of one of the group's definitions gets its desired state again (the outbox).
func modifyGroup(t *tx, d *events.ResourceGroupModified, seq uint64) error {
	var g ResourceGroup
	if ok, err := getJSON(t, rgKey(d.Name), &g); err != nil || !ok {
		return err
	}
	if d.PlaceCount != 0 {
		g.PlaceCount = d.PlaceCount
	}
	if d.StoragePool != nil {
		g.StoragePool = *d.StoragePool
	}
	if d.Provider != nil {
		g.Provider = *d.Provider
	}
	if d.ReplicasOnSame != nil {
		g.ReplicasOnSame = *d.ReplicasOnSame
	}
	if d.ReplicasOnDifferent != nil {
		g.ReplicasOnDifferent = *d.ReplicasOnDifferent
	}
	optionsChanged := !reflect.DeepEqual(d.Set, drbd.Options{}) || len(d.Unset) > 0
	if optionsChanged {
		o, err := drbd.Resolve(g.DRBDOptions, d.Set).Without(d.Unset)
		if err != nil {
			return err
		}
		g.DRBDOptions, g.OptionsSeq = o, seq
	}
	if err := t.put(rgKey(d.Name), g); err != nil {
		return err
	}
	if !optionsChanged {
		return nil
	}
	return requeueIndexed(t, rgRDPrefix(d.Name), seq)
}

// requeueNodePeers queues desired state again for every node holding a replica of a
// definition that has one on node (each resource file names every peer's address).
func requeueNodePeers(t *tx, node string, seq uint64) error {
	return requeueIndexed(t, nodeRDPrefix(node), seq)
}

// requeueIndexed queues desired state again for every replica of the definitions an
// index lists (keys <prefix><definition>: a group's, a node's).
func requeueIndexed(t *tx, prefix string, seq uint64) error {
	keys, err := t.keysWithPrefix(prefix)
	if err != nil {
		return err
	}
	for _, k := range keys {
		var rd ResourceDefinition
		if ok, err := getJSON(t, rdKey(strings.TrimPrefix(k, prefix)), &rd); err != nil || !ok {
			return err
		}
		for _, r := range rd.Replicas {
			outbox(t, seq, r.Node, rd.Name)
		}
	}
	return nil
}

// patched is current with set applied and unset removed (nil when empty); current is
// not changed.
func patched(current, set map[string]string, unset []string) map[string]string {
	out := make(map[string]string, len(current)+len(set))
	maps.Copy(out, current)
	maps.Copy(out, set)
	for _, k := range unset {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func spKey(node, name string) string { return "v/sp/" + node + "/" + name }
func spNamesKey(node string) string  { return "v/sp-names/" + node }
func rgKey(name string) string       { return "v/rg/" + name }
func rdKey(name string) string       { return "v/rd/" + name }

// rdReplicasKey holds how many replicas a definition has (written with it): what a page
// deep in the list of every replica skips over without decoding the definitions before it.
func rdReplicasKey(name string) string { return rdReplicasPrefix + name }

const rdReplicasPrefix = "v/rd-replicas/"

// rgRDKey indexes a definition under its group (what rg.delete reads). Views built
// before the index existed lack it: run cairn views rebuild once after upgrading.
func rgRDKey(rg, rd string) string    { return rgRDPrefix(rg) + rd }
func rgRDPrefix(rg string) string     { return "v/rg-rd/" + rg + "/" }
func nodeRDPrefix(node string) string { return "v/node-rd/" + node + "/" }

// replacingKey marks a definition with a replica that replaces another (replica.replace,
// replica.migrate) until the replaced one is removed: what the evacuation policy reads
// besides the nodes in maintenance. Only events newer than the key's introduction set
// Replica.Replaces, so views built before it need no rebuild.
func replacingKey(rd string) string { return replacingPrefix + rd }

const replacingPrefix = "v/replacing/"

func nodeRDKey(node, rd string) string { return nodeRDPrefix(node) + rd }

const (
	portHighKey    = "v/port-high"
	portUsedPrefix = "v/port/"
	portFreePrefix = "v/port-free/"
	outboxPrefix   = "o/dispatch/"
)

func portKey(prefix string, port int) string { return fmt.Sprintf("%s%05d", prefix, port) }
func minorHighKey(node string) string        { return "v/minor-high/" + node }
func minorUsedPrefix(node string) string     { return "v/minor/" + node + "/" }
func minorFreePrefix(node string) string     { return "v/minor-free/" + node + "/" }
func minorKey(prefix string, minor int) string {
	return fmt.Sprintf("%s%07d", prefix, minor)
}

// applyResource folds the resource model's events; handled is false for other types.
func applyResource(t *tx, ev events.Event) (handled bool, err error) {
	switch d := ev.Data.(type) {
	case *events.StoragePoolCreated:
		var names []string
		if _, err := getJSON(t, spNamesKey(d.Node), &names); err != nil {
			return true, err
		}
		if !slices.Contains(names, d.Name) {
			names = append(names, d.Name)
			slices.Sort(names)
		}
		if err := t.put(spNamesKey(d.Node), names); err != nil {
			return true, err
		}
		queue(t, ev.Seq, d.Node, KindSP, d.Name) // its agent measures and reports it
		return true, t.put(spKey(d.Node, d.Name), StoragePool{Node: d.Node, Name: d.Name, Provider: d.Provider,
			Pool: d.Pool, CapacityKiB: d.CapacityKiB, Devices: d.Devices, CreatedSeq: ev.Seq})
	case *events.StoragePoolCapacityReported:
		var sp StoragePool
		if ok, err := getJSON(t, spKey(d.Node, d.Name), &sp); err != nil || !ok {
			return true, err
		}
		sp.Reported = &CapacityReport{TotalKiB: d.TotalKiB, FreeKiB: d.FreeKiB, At: d.At, AllocatedKiB: sp.AllocatedKiB, Seq: ev.Seq}
		return true, t.put(spKey(d.Node, d.Name), sp)
	case *events.NodeRemoved:
		var names []string
		if _, err := getJSON(t, spNamesKey(d.Name), &names); err != nil {
			return false, err
		}
		for _, n := range names {
			t.del(spKey(d.Name, n))
		}
		t.del(spNamesKey(d.Name))
		return false, nil // the node views handle the rest
	case *events.ResourceGroupCreated:
		return true, t.put(rgKey(d.Name), ResourceGroup{ResourceGroupCreated: *d, CreatedSeq: ev.Seq, OptionsSeq: ev.Seq})
	case *events.PoolCreated, *events.PoolImportGranted, *events.PoolExported, *events.PoolContested:
		return true, applyPool(t, ev)
	case *events.ResourceDefinitionCreated:
		if err := takePort(t, d.Name, d.Port); err != nil {
			return true, err
		}
		if d.ResourceGroup != "" {
			t.mark(rgRDKey(d.ResourceGroup, d.Name))
		}
		if d.RestoredFrom != nil { // a clone's restore: its snapshot is done
			if err := delIfPresent(t, snapshotUnderWayKey(d.RestoredFrom.Resource, d.RestoredFrom.Snapshot)); err != nil {
				return true, err
			}
			if err := markCloned(t, d.RestoredFrom.Resource, d.RestoredFrom.Snapshot, d.Name); err != nil {
				return true, err
			}
		}
		if err := delIfPresent(t, targetClaimKey(d.Name)); err != nil {
			return true, err
		}
		return true, t.put(rdKey(d.Name), ResourceDefinition{Name: d.Name, ResourceGroup: d.ResourceGroup,
			Port: d.Port, DRBDOptions: d.DRBDOptions, Volumes: []VolumeDefinition{}, Replicas: []Replica{},
			RestoredFrom: d.RestoredFrom, CreatedSeq: ev.Seq, Seq: ev.Seq})
	case *events.ResourceDefinitionDeleted:
		var rd ResourceDefinition
		if ok, err := getJSON(t, rdKey(d.Name), &rd); err != nil || !ok {
			return true, err
		}
		freePort(t, rd.Port)
		if err := forgetDeployments(t, rd); err != nil {
			return true, err
		}
		for _, b := range rd.Backups {
			if b.Phase == BackupUploading {
				t.del(backupUnderWayKey(rd.Name, b.ID))
			}
			if b.Ship != nil && b.Ship.Phase == ShipRestoring {
				t.del(shipDueKey(rd.Name, b.ID))
			}
		}
		t.del(rdKey(d.Name))
		t.del(rdReplicasKey(d.Name))
		if err := delIfPresent(t, replacingKey(d.Name)); err != nil {
			return true, err
		}
		if rd.ResourceGroup != "" {
			t.del(rgRDKey(rd.ResourceGroup, d.Name))
		}
		return true, nil
	case *events.ResourceGroupDeleted:
		t.del(rgKey(d.Name))
		return true, nil
	case *events.StoragePoolModified:
		var sp StoragePool
		if ok, err := getJSON(t, spKey(d.Node, d.Name), &sp); err != nil || !ok {
			return true, err
		}
		sp.CapacityKiB = d.CapacityKiB
		if d.Overprovision > 0 {
			sp.Overprovision = d.Overprovision
		}
		return true, t.put(spKey(d.Node, d.Name), sp)
	case *events.StoragePoolDeleted:
		var names []string
		if _, err := getJSON(t, spNamesKey(d.Node), &names); err != nil {
			return true, err
		}
		names = slices.DeleteFunc(names, func(n string) bool { return n == d.Name })
		if len(names) == 0 {
			t.del(spNamesKey(d.Node))
		} else if err := t.put(spNamesKey(d.Node), names); err != nil {
			return true, err
		}
		t.del(spKey(d.Node, d.Name))
		queue(t, ev.Seq, d.Node, KindSP, d.Name) // its agent stops reporting it
		return true, nil
	case *events.ResourceOptionsChanged:
		return true, updateRD(t, d.Name, ev.Seq, func(rd *ResourceDefinition) error {
			o, err := drbd.Resolve(rd.DRBDOptions, d.Set).Without(d.Unset)
			rd.DRBDOptions = o
			return err
		})
	case *events.ReplicaModified:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			for i := range rd.Replicas {
				r := &rd.Replicas[i]
				if r.Node != d.Node {
					continue
				}
				o, err := drbd.Resolve(r.DRBDOptions, d.Set).Without(d.Unset)
				r.DRBDOptions = o
				r.Properties = patched(r.Properties, d.SetProperties, d.UnsetProperties)
				return err
			}
			return fmt.Errorf("replica.modified: %s has no replica on %s", d.Resource, d.Node)
		})
	case *events.DefinitionPropertiesChanged:
		return true, updateRD(t, d.Name, ev.Seq, func(rd *ResourceDefinition) error {
			rd.Properties = patched(rd.Properties, d.Set, d.Unset)
			return nil
		})
	case *events.VolumePropertiesChanged:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			for i := range rd.Volumes {
				if rd.Volumes[i].Volume == d.Volume {
					rd.Volumes[i].Properties = patched(rd.Volumes[i].Properties, d.Set, d.Unset)
					return nil
				}
			}
			return fmt.Errorf("resource definition %s has no volume %d", d.Resource, d.Volume)
		})
	case *events.VolumeFilesystemMade:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			for i := range rd.Volumes {
				if rd.Volumes[i].Volume == d.Volume {
					rd.Volumes[i].Filesystem = &VolumeFilesystem{Type: d.Type, Node: d.Node, Seq: ev.Seq}
					return nil
				}
			}
			return fmt.Errorf("resource definition %s has no volume %d", d.Resource, d.Volume)
		})
	case *events.ControllerOptionsChanged:
		var c ControllerOptions
		if _, err := getJSON(t, controllerOptionsKey, &c); err != nil {
			return true, err
		}
		o, err := drbd.Resolve(c.Options, d.Set).Without(d.Unset)
		if err != nil {
			return true, err
		}
		if err := t.put(controllerOptionsKey, ControllerOptions{Options: o, Seq: ev.Seq}); err != nil {
			return true, err
		}
		return true, requeueIndexed(t, "v/rd/", ev.Seq)
	case *events.ControllerPropertiesChanged:
		var props map[string]string
		if _, err := getJSON(t, controllerPropsKey, &props); err != nil {
			return true, err
		}
		if touchesAutoQuorum(d.Set, d.Unset) { // every definition's quorum policy changes
			var c ControllerOptions
			if _, err := getJSON(t, controllerOptionsKey, &c); err != nil {
				return true, err
			}
			c.AutoQuorum, c.Seq = d.Set[drbd.AutoQuorumKey], ev.Seq
			if err := t.put(controllerOptionsKey, c); err != nil {
				return true, err
			}
			if err := requeueIndexed(t, "v/rd/", ev.Seq); err != nil {
				return true, err
			}
		}
		if props = patched(props, d.Set, d.Unset); props == nil {
			t.del(controllerPropsKey)
			return true, nil
		}
		return true, t.put(controllerPropsKey, props)
	case *events.ResourceGroupModified:
		return true, modifyGroup(t, d, ev.Seq)
	case *events.GroupPropertiesChanged:
		var g ResourceGroup
		if ok, err := getJSON(t, rgKey(d.Name), &g); err != nil || !ok {
			return true, err
		}
		g.Properties = patched(g.Properties, d.Set, d.Unset)
		if !touchesAutoQuorum(d.Set, d.Unset) {
			return true, t.put(rgKey(d.Name), g)
		}
		g.OptionsSeq = ev.Seq // its definitions' quorum policy changes
		if err := t.put(rgKey(d.Name), g); err != nil {
			return true, err
		}
		return true, requeueIndexed(t, rgRDPrefix(d.Name), ev.Seq)
	case *events.VolumeDefinitionCreated:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			rd.Volumes = append(rd.Volumes, VolumeDefinition{Volume: d.Volume, SizeKiB: d.SizeKiB, Day0GI: d.Day0GI, CreatedSeq: ev.Seq})
			slices.SortFunc(rd.Volumes, func(a, b VolumeDefinition) int { return a.Volume - b.Volume })
			if len(rd.Replicas) == 0 || rd.RestoredFrom != nil || rd.RestoredFromBackup != nil {
				return nil // decided when the first replica is placed
			}
			return wantFilesystems(t, rd, func(v VolumeDefinition) bool { return v.Volume == d.Volume })
		})
	case *events.ReplicaVolumeAdded:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			r, ok := rd.Replica(d.Node)
			if !ok {
				return fmt.Errorf("replica.volume-added: %s has no replica on %s", d.Resource, d.Node)
			}
			r.Minors = append(r.Minors, events.VolumeMinor{Volume: d.Volume, Minor: d.Minor})
			r.Seeds = append(r.Seeds, d.Seeds...)
			if err := takeMinor(t, d.Node, d.Minor, d.Resource, d.Volume); err != nil {
				return err
			}
			if r.Diskless {
				return nil
			}
			for _, v := range rd.Volumes {
				if v.Volume == d.Volume {
					return allocate(t, d.Node, r.StoragePool, int64(v.SizeKiB))
				}
			}
			return fmt.Errorf("replica.volume-added: %s has no volume %d", d.Resource, d.Volume)
		})
	case *events.ReplicaVolumeRemoved:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			r, ok := rd.Replica(d.Node)
			if !ok {
				return fmt.Errorf("replica.volume-removed: %s has no replica on %s", d.Resource, d.Node)
			}
			r.Minors = slices.DeleteFunc(r.Minors, func(m events.VolumeMinor) bool { return m.Volume == d.Volume })
			r.Seeds = slices.DeleteFunc(r.Seeds, func(s drbd.Seed) bool { return s.Volume == d.Volume })
			freeMinor(t, d.Node, d.Minor)
			if r.Diskless {
				return nil
			}
			for _, v := range rd.Volumes {
				if v.Volume == d.Volume {
					return allocate(t, d.Node, r.StoragePool, -int64(v.SizeKiB))
				}
			}
			return nil
		})
	case *events.VolumeDefinitionResized:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			i := slices.IndexFunc(rd.Volumes, func(v VolumeDefinition) bool { return v.Volume == d.Volume })
			if i < 0 {
				return fmt.Errorf("vd.resized: %s has no volume %d", d.Resource, d.Volume)
			}
			grow := int64(d.SizeKiB) - int64(rd.Volumes[i].SizeKiB)
			rd.Volumes[i].SizeKiB = d.SizeKiB
			for _, r := range rd.Replicas {
				if !r.Diskless {
					if err := allocate(t, r.Node, r.StoragePool, grow); err != nil {
						return err
					}
				}
			}
			return nil
		})
	case *events.RDSnapshotStarted:
		t.mark(snapshotUnderWayKey(d.Resource, d.Name))
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			rd.Snapshots = append(rd.Snapshots, RDSnapshot{Name: d.Name, Nodes: d.Nodes, Diskless: d.Diskless, Phase: SnapshotSuspending, CloneTo: d.CloneTo, Group: d.Group,
				Volumes: slices.Clone(rd.Volumes), StartedSeq: ev.Seq, StartedAt: ev.OccurredAt})
			slices.SortFunc(rd.Snapshots, func(a, b RDSnapshot) int { return strings.Compare(a.Name, b.Name) })
			return nil
		})
	case *events.RDSnapshotSuspended:
		return true, snapshotPhase(t, d.Resource, d.Name, ev, SnapshotTaking, "")
	case *events.RDSnapshotTaken:
		return true, snapshotPhase(t, d.Resource, d.Name, ev, SnapshotTaken, "")
	case *events.RDSnapshotFailed:
		return true, snapshotPhase(t, d.Resource, d.Name, ev, SnapshotFailed, d.Reason)
	case *events.RDRolledBack:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			rd.Rollback = &RollbackRecord{Snapshot: d.Name, Seq: ev.Seq, Current: d.Current}
			// The disks' data no longer came from writes since day 0: later disks get a
			// full sync, as on a restored definition.
			rd.RestoredFrom = &drbd.SnapshotRef{Resource: rd.Name, Snapshot: d.Name}
			return nil
		})
	case *events.RDRestoreBegun:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			from := d.From
			rd.RestoredFrom = &from
			return nil
		})
	case *events.RDSnapshotDeleted:
		if err := delIfPresent(t, snapshotUnderWayKey(d.Resource, d.Name)); err != nil {
			return true, err
		}
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			if s, ok := rd.Snapshot(d.Name); ok && s.CloneTo != "" {
				if err := releaseTargetClaim(t, s.CloneTo, rd.Name, s.Name); err != nil {
					return err
				}
			}
			rd.Snapshots = slices.DeleteFunc(rd.Snapshots, func(s RDSnapshot) bool { return s.Name == d.Name })
			return nil
		})
	case *events.TargetClaimed:
		return true, t.put(targetClaimKey(d.Name), d)
	case *events.PortClaimed, *events.NodeClaimed, *events.HostChanged, *events.CommandChecked:
		// Claims carry no state of their own: the allocation is in the definition's
		// events; the claim only moves its subject's boundary (recorded in apply).
		return true, nil
	case *events.VolumeDefinitionDeleted:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			rd.Volumes = slices.DeleteFunc(rd.Volumes, func(v VolumeDefinition) bool { return v.Volume == d.Volume })
			for i := range rd.Snapshots { // the volume's copies go with it
				rd.Snapshots[i].Volumes = slices.DeleteFunc(rd.Snapshots[i].Volumes, func(v VolumeDefinition) bool { return v.Volume == d.Volume })
			}
			return nil
		})
	case *events.ReplicaAdded:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			if _, dup := rd.Replica(d.Node); dup {
				return fmt.Errorf("replica.added: %s already has a replica on %s", d.Resource, d.Node)
			}
			if len(rd.Replicas) == 0 && d.RestoreFrom == nil && d.RestoreBackup == nil && rd.RestoredFrom == nil && rd.RestoredFromBackup == nil {
				if err := wantFilesystems(t, rd, func(VolumeDefinition) bool { return true }); err != nil {
					return err
				}
			}
			r := Replica{Node: d.Node, NodeID: d.NodeID, Minors: d.Minors, Diskless: d.Diskless, Tiebreaker: d.Tiebreaker,
				StoragePool: d.StoragePool, Provider: d.Provider, Pool: d.Pool, Seeds: d.Seeds, FullSync: d.FullSync,
				DRBDOptions: d.DRBDOptions, RestoreFrom: d.RestoreFrom, RestoreBackup: d.RestoreBackup, Incarnation: ev.Seq, AddedSeq: ev.Seq, AddedAt: ev.OccurredAt,
				Replaces: d.Replaces}
			rd.Replicas = append(rd.Replicas, r)
			slices.SortFunc(rd.Replicas, func(a, b Replica) int { return a.NodeID - b.NodeID })
			for _, m := range d.Minors {
				if err := takeMinor(t, d.Node, m.Minor, d.Resource, m.Volume); err != nil {
					return err
				}
			}
			t.mark(nodeRDKey(d.Node, d.Resource))
			if d.Replaces != "" {
				t.mark(replacingKey(d.Resource))
			}
			if !d.Diskless {
				return allocate(t, d.Node, d.StoragePool, int64(rd.SizeKiB()))
			}
			return nil
		})
	case *events.ReplicaRemoved:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			r, ok := rd.Replica(d.Node)
			if !ok {
				return fmt.Errorf("replica.removed: %s has no replica on %s", d.Resource, d.Node)
			}
			if !r.Diskless {
				if err := allocate(t, d.Node, r.StoragePool, -int64(rd.SizeKiB())); err != nil {
					return err
				}
			}
			for _, m := range r.Minors {
				freeMinor(t, d.Node, m.Minor)
			}
			t.del(nodeRDKey(d.Node, d.Resource))
			outbox(t, ev.Seq, d.Node, d.Resource) // the node tears the resource down
			for i := range rd.Snapshots {         // its disk's snapshots go with it
				rd.Snapshots[i].Nodes = slices.DeleteFunc(rd.Snapshots[i].Nodes, func(n string) bool { return n == d.Node })
				rd.Snapshots[i].Diskless = slices.DeleteFunc(rd.Snapshots[i].Diskless, func(n string) bool { return n == d.Node })
			}
			rd.Replicas = slices.DeleteFunc(rd.Replicas, func(x Replica) bool { return x.Node == d.Node })
			return replaced(t, rd, d.Node) // a replacement of the removed one is done
		})
	case *events.ReplicaDiskToggled:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			r, ok := rd.Replica(d.Node)
			if !ok {
				return fmt.Errorf("replica.disk-toggled: %s has no replica on %s", d.Resource, d.Node)
			}
			size := int64(rd.SizeKiB())
			if d.Diskless {
				if err := allocate(t, d.Node, r.StoragePool, -size); err != nil {
					return err
				}
				r.Diskless, r.StoragePool, r.Provider, r.Pool, r.Seeds, r.FullSync = true, "", "", "", nil, false
				if err := replaced(t, rd, d.Node); err != nil { // no disk left to replace
					return err
				}
				for i := range rd.Snapshots { // the agent deletes the disk's copies with it
					rd.Snapshots[i].Nodes = slices.DeleteFunc(rd.Snapshots[i].Nodes, func(n string) bool { return n == d.Node })
				}
				return nil
			}
			r.Diskless, r.Tiebreaker = false, false
			r.StoragePool, r.Provider, r.Pool, r.Seeds, r.FullSync = d.StoragePool, d.Provider, d.Pool, nil, d.FullSync
			r.Incarnation = ev.Seq
			if d.Replaces != "" {
				r.Replaces = d.Replaces
				t.mark(replacingKey(d.Resource))
			}
			return allocate(t, d.Node, d.StoragePool, size)
		})
	case *events.ReplicaTiebreakerChanged:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			r, ok := rd.Replica(d.Node)
			if !ok {
				return fmt.Errorf("replica.tiebreaker-changed: %s has no replica on %s", d.Resource, d.Node)
			}
			r.Tiebreaker = d.Tiebreaker
			return nil
		})
	case *events.ResourceActivated:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			if d.Port != 0 && d.Port != rd.Port {
				freePort(t, rd.Port)
				if err := takePort(t, rd.Name, d.Port); err != nil {
					return err
				}
				rd.Port = d.Port
			}
			setInactive(rd, d.Node, false)
			return nil
		})
	case *events.ResourceDeactivated:
		return true, updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			setInactive(rd, d.Node, true)
			return nil
		})
	}
	return false, nil
}

func setInactive(rd *ResourceDefinition, node string, inactive bool) {
	for i := range rd.Replicas {
		if node == "" || rd.Replicas[i].Node == node {
			rd.Replicas[i].Inactive = inactive
		}
	}
}

// targetClaimKey holds the claim of rd.clone on the name of its target
// (events.TargetClaimed) while it holds.
func targetClaimKey(name string) string { return "v/rd-claim/" + name }

// releaseTargetClaim ends the claim on name if it is the clone's of snapshot snap of rd.
func releaseTargetClaim(t *tx, name, rd, snap string) error {
	var c events.TargetClaimed
	if ok, err := getJSON(t, targetClaimKey(name), &c); err != nil || !ok {
		return err
	}
	if c.Resource == rd && c.Snapshot == snap {
		t.del(targetClaimKey(name))
	}
	return nil
}

// markCloned records that the clone snapshot snap of rd was restored into target (on
// the source as it is: no desired state of the source changes). The snapshot stays in
// the under-way index until it is deleted, so that the lease holder's sweep deletes it
// once every restored disk was made from it (resources.CloneCleanupDue), unless the
// source has a disk on ZFS, where the clone depends on the snapshot for good.
func markCloned(t *tx, rd, snap, target string) error {
	var src ResourceDefinition
	if ok, err := getJSON(t, rdKey(rd), &src); err != nil || !ok {
		return err
	}
	s, ok := src.Snapshot(snap)
	if !ok || s.CloneTo != target {
		return nil
	}
	s.Cloned = true
	if !src.OnZFS() {
		t.mark(snapshotUnderWayKey(rd, snap))
	}
	return t.put(rdKey(rd), src)
}

// OnZFS reports whether a disk of the definition is on a ZFS provider (zfs, zfs_thin).
func (rd *ResourceDefinition) OnZFS() bool {
	for _, r := range rd.Replicas {
		if !r.Diskless && (r.Provider == backing.ProviderZFS || r.Provider == backing.ProviderZFSThin) {
			return true
		}
	}
	return false
}

// TargetClaim returns the claim of a clone on definition name, if one holds.
func (v *View) TargetClaim(name string) (events.TargetClaimed, bool, error) {
	var c events.TargetClaimed
	ok, err := getJSON(v.r, targetClaimKey(name), &c)
	return c, ok, err
}

// snapshotUnderWayKey indexes the snapshots under way (started, not yet taken or
// failed), so the serve holding the lease finds them without reading every definition.
func snapshotUnderWayKey(rd, name string) string { return "v/snap-busy/" + rd + "/" + name }

// DefinitionsWithSnapshotsUnderWay lists the definitions with a snapshot under way.
func (v *View) DefinitionsWithSnapshotsUnderWay() ([]string, error) {
	var out []string
	err := v.scan("v/snap-busy/", func(key string, _ []byte) error {
		rd, _, _ := strings.Cut(strings.TrimPrefix(key, "v/snap-busy/"), "/")
		if len(out) == 0 || out[len(out)-1] != rd {
			out = append(out, rd)
		}
		return nil
	})
	return out, err
}

// snapshotPhase moves a definition's snapshot to phase.
func snapshotPhase(t *tx, rdName, name string, ev events.Event, phase, reason string) error {
	return updateRD(t, rdName, ev.Seq, func(rd *ResourceDefinition) error {
		s, ok := rd.Snapshot(name)
		if !ok {
			return fmt.Errorf("%s: %s has no snapshot %s", ev.Type, rdName, name)
		}
		s.Phase, s.Reason = phase, reason
		if phase == SnapshotTaken || phase == SnapshotFailed {
			s.DoneAt = ev.OccurredAt
			// Off the under-way index, except a clone's: a taken one stays until the
			// target is restored (rd.created with restored_from), a failed one until it
			// is deleted (the lease holder starts the clone again:
			// resources.ClonesToRetry).
			if s.CloneTo == "" {
				t.del(snapshotUnderWayKey(rdName, name))
			}
			if phase == SnapshotFailed && s.CloneTo != "" {
				return releaseTargetClaim(t, s.CloneTo, rdName, name)
			}
		}
		return nil
	})
}

// replaced ends the replacement of node's disk in rd (the disk was removed or gave up):
// the replicas that replaced it are ordinary ones now, and rd leaves the index of
// definitions replacing a disk when none is left.
func replaced(t *tx, rd *ResourceDefinition, node string) error {
	replacing := false
	for i := range rd.Replicas {
		if rd.Replicas[i].Replaces == node {
			rd.Replicas[i].Replaces = ""
		}
		replacing = replacing || rd.Replicas[i].Replaces != ""
	}
	if !replacing {
		return delIfPresent(t, replacingKey(rd.Name))
	}
	return nil
}

// updateRD reads a definition, changes it, writes it back and queues its desired state
// for every node holding a replica.
func updateRD(t *tx, name string, seq uint64, change func(*ResourceDefinition) error) error {
	var rd ResourceDefinition
	found, err := getJSON(t, rdKey(name), &rd)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("resource definition %s does not exist", name)
	}
	if err := change(&rd); err != nil {
		return err
	}
	rd.Seq = seq
	for _, r := range rd.Replicas {
		outbox(t, seq, r.Node, name)
	}
	t.putUint(rdReplicasKey(name), uint64(len(rd.Replicas)))
	return t.put(rdKey(name), rd)
}

// allocate adds delta KiB to a storage pool's allocation (clamped at zero).
func allocate(t *tx, node, pool string, delta int64) error {
	if pool == "" {
		return nil
	}
	var sp StoragePool
	found, err := getJSON(t, spKey(node, pool), &sp)
	if err != nil || !found {
		return err
	}
	if delta < 0 && uint64(-delta) > sp.AllocatedKiB {
		sp.AllocatedKiB = 0
	} else {
		sp.AllocatedKiB = uint64(int64(sp.AllocatedKiB) + delta)
	}
	return t.put(spKey(node, pool), sp)
}

// delIfPresent deletes key only when it exists: a blind delete would leave a tombstone
// in the free lists for every value ever taken, which their scans would wade through.
func delIfPresent(t *tx, key string) error {
	v, err := t.Get([]byte(key))
	if err == nil && v != nil {
		t.del(key)
	}
	return err
}

// take records value n as used by owner (usedKey), off the free list (freeKey), and
// raises the allocator's high-water mark (highKey) past it.
func take(t *tx, usedKey, freeKey, highKey string, n int, owner []byte) error {
	t.putRaw(usedKey, owner)
	high, err := getUint(t, highKey)
	if err != nil {
		return err
	}
	if uint64(n+1) > high {
		// Never handed out before, so not on the free list (only values below the
		// high-water mark are released there): no lookup of a key that is not there,
		// which on a big view costs a read of a table's filter block.
		t.putUint(highKey, uint64(n+1))
		return nil
	}
	return delIfPresent(t, freeKey)
}

// release moves a value from used (usedKey) to the free list (freeKey).
func release(t *tx, usedKey, freeKey string) {
	t.del(usedKey)
	t.mark(freeKey)
}

func takePort(t *tx, rd string, port int) error {
	return take(t, portKey(portUsedPrefix, port), portKey(portFreePrefix, port), portHighKey, port, []byte(rd))
}

func freePort(t *tx, port int) {
	release(t, portKey(portUsedPrefix, port), portKey(portFreePrefix, port))
}

func takeMinor(t *tx, node string, minor int, rd string, volume int) error {
	return take(t, minorKey(minorUsedPrefix(node), minor), minorKey(minorFreePrefix(node), minor), minorHighKey(node),
		minor, []byte(rd+"/"+strconv.Itoa(volume)))
}

func freeMinor(t *tx, node string, minor int) {
	release(t, minorKey(minorUsedPrefix(node), minor), minorKey(minorFreePrefix(node), minor))
}

// outbox queues the desired state of rd on node for the dispatcher.
func outbox(t *tx, seq uint64, node, rd string) { queue(t, seq, node, KindDRBD, rd) }

// queue queues the desired state of (kind, id) on node for the dispatcher. Entries are
// keyed by sequence, written once and deleted only by the dispatcher once published.
func queue(t *tx, seq uint64, node, kind, id string) {
	t.queued = true
	b := append(t.scratch[:0], outboxPrefix...)
	b = appendPadded(b, seq, 20)
	for _, part := range []string{node, kind, id} {
		b = append(append(b, '/'), part...)
	}
	t.scratch = b
	t.putOnce(b, []byte("1"))
}

// StoragePool returns a node's storage pool.
func (v *View) StoragePool(node, name string) (p StoragePool, ok bool, err error) {
	ok, err = getJSON(v.r, spKey(node, name), &p)
	return
}

// StoragePools lists every storage pool, by node then name.
func (v *View) StoragePools() ([]StoragePool, error) { return scanAll[StoragePool](v, "v/sp/") }

// NodeStoragePools lists a node's storage pools by name. Unlike StoragePools it reads
// point keys only, so its cost does not grow with how often allocations changed them.
func (v *View) NodeStoragePools(node string) ([]StoragePool, error) {
	var names []string
	if _, err := getJSON(v.r, spNamesKey(node), &names); err != nil {
		return nil, err
	}
	out := make([]StoragePool, 0, len(names))
	for _, n := range names {
		sp, ok, err := v.StoragePool(node, n)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, sp)
		}
	}
	return out, nil
}

// ResourceGroup returns a resource group.
func (v *View) ResourceGroup(name string) (g ResourceGroup, ok bool, err error) {
	ok, err = getJSON(v.r, rgKey(name), &g)
	return
}

// ResourceDefinition returns a resource definition with its volumes and replicas.
func (v *View) ResourceDefinition(name string) (rd ResourceDefinition, ok bool, err error) {
	ok, err = getJSON(v.r, rdKey(name), &rd)
	return
}

const (
	controllerPropsKey   = "v/controller/properties"
	controllerOptionsKey = "v/controller/options"
)

// ControllerOptions are the deployment's DRBD options (the broadest level) and the
// sequence of the event that last set them.
type ControllerOptions struct {
	Options drbd.Options `json:"options,omitzero"`
	Seq     uint64       `json:"seq"`
	// AutoQuorum is the controller's DrbdOptions/auto-quorum property (drbd.WithQuorumPolicy):
	// kept here, beside the options, because it changes every definition's desired state.
	AutoQuorum string `json:"auto_quorum,omitempty"`
}

// touchesAutoQuorum reports whether a properties patch sets or removes
// DrbdOptions/auto-quorum.
func touchesAutoQuorum(set map[string]string, unset []string) bool {
	_, ok := set[drbd.AutoQuorumKey]
	return ok || slices.Contains(unset, drbd.AutoQuorumKey)
}

// ControllerOptions returns the deployment's DRBD options.
func (v *View) ControllerOptions() (ControllerOptions, error) {
	var c ControllerOptions
	_, err := getJSON(v.r, controllerOptionsKey, &c)
	return c, err
}

// ControllerProperties returns the deployment's free-form properties (nil when none).
func (v *View) ControllerProperties() (map[string]string, error) {
	var props map[string]string
	_, err := getJSON(v.r, controllerPropsKey, &props)
	return props, err
}

// GroupDefinitions lists up to limit definitions of a group, by name.
func (v *View) GroupDefinitions(group string, limit int) ([]string, error) {
	names, _, err := v.DefinitionNamesPage(group, "", "", limit)
	return names, err
}

// DefinitionNamesPage is one page of the names of the definitions in a group (group
// != "") or with a replica on a node (node != ""), in name order after after: at most
// limit names, and next (the last of them) when more follow. From the views' indexes:
// its cost is the page's, whatever the cluster's size.
func (v *View) DefinitionNamesPage(group, node, after string, limit int) (names []string, next string, err error) {
	prefix := rgRDPrefix(group)
	if node != "" {
		prefix = nodeRDPrefix(node)
	}
	lower := prefix
	if after != "" {
		lower = prefix + after + "\x00"
	}
	it, err := v.newIter(&pebble.IterOptions{LowerBound: []byte(lower), UpperBound: prefixEnd([]byte(prefix))})
	if err != nil {
		return nil, "", err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if len(names) == limit {
			return names, names[len(names)-1], it.Error()
		}
		names = append(names, strings.TrimPrefix(string(it.Key()), prefix))
	}
	return names, "", it.Error()
}

// ResourceDefinitions lists every resource definition by name.
func (v *View) ResourceDefinitions() ([]ResourceDefinition, error) {
	return scanAll[ResourceDefinition](v, "v/rd/")
}

// EachResourceDefinition calls fn with every resource definition in name order, one at
// a time (memory bounded by one definition), until fn returns false or an error (which
// EachResourceDefinition returns).
func (v *View) EachResourceDefinition(fn func(rd ResourceDefinition) (more bool, err error)) error {
	return eachOf(v, "v/rd/", fn)
}

// EachResourceDefinitionFrom walks the definitions from name on (name order), as
// EachResourceDefinition.
func (v *View) EachResourceDefinitionFrom(name string, fn func(rd ResourceDefinition) (more bool, err error)) error {
	return stopped(v.scanRange([]byte(rdKey(name)), prefixEnd([]byte("v/rd/")), func(key string, val []byte) error {
		var rd ResourceDefinition
		if err := unmarshalInto(key, val, &rd); err != nil {
			return err
		}
		return goOn(fn(rd))
	}))
}

// SkipReplicas finds where the list of every replica (by definition name, then node)
// reaches position offset: the first definition whose replicas are not all before it,
// and how many replicas the definitions before that one have. It reads only the
// replica counts (v/rd-replicas/), never a definition; name is "" when the list has
// offset replicas or fewer.
func (v *View) SkipReplicas(offset int) (name string, before int, err error) {
	err = v.scan(rdReplicasPrefix, func(key string, val []byte) error {
		n := int(binary.BigEndian.Uint64(val))
		if before+n > offset {
			name = strings.TrimPrefix(key, rdReplicasPrefix)
			return errStopEach
		}
		before += n
		return nil
	})
	return name, before, stopped(err)
}

// EachStoragePool calls fn with every storage pool in key order (by node, then name;
// see EachNode for names that extend others), one at a time,
// until fn returns false or an error (which EachStoragePool returns).
func (v *View) EachStoragePool(fn func(sp StoragePool) (more bool, err error)) error {
	return eachOf(v, "v/sp/", fn)
}

// EachResourceGroup calls fn with every resource group in name order, one at a time,
// until fn returns false or an error (which EachResourceGroup returns).
func (v *View) EachResourceGroup(fn func(g ResourceGroup) (more bool, err error)) error {
	return eachOf(v, "v/rg/", fn)
}

// DefinitionsReplacing lists the definitions with a replica that replaces another one
// still there (replica.replace, replica.migrate), by name.
func (v *View) DefinitionsReplacing() ([]string, error) {
	var out []string
	err := v.scan(replacingPrefix, func(key string, _ []byte) error {
		out = append(out, strings.TrimPrefix(key, replacingPrefix))
		return nil
	})
	return out, err
}

// NodeResources lists the definitions with a replica on node, by name.
func (v *View) NodeResources(node string) ([]string, error) {
	var out []string
	prefix := nodeRDPrefix(node)
	err := v.scan(prefix, func(key string, _ []byte) error {
		out = append(out, strings.TrimPrefix(key, prefix))
		return nil
	})
	return out, err
}

// AllocatorState is an allocator's state for replicas.Take: its high-water mark and the
// lowest freed values at or above from (at most limit of them).
type AllocatorState struct {
	HighWater int
	Free      []int
}

// PortAllocator returns the TCP port allocator's state.
func (v *View) PortAllocator(from, limit int) (AllocatorState, error) {
	return v.allocator(portHighKey, portFreePrefix, 5, from, limit)
}

// MinorAllocator returns a node's minor allocator's state.
func (v *View) MinorAllocator(node string, from, limit int) (AllocatorState, error) {
	return v.allocator(minorHighKey(node), minorFreePrefix(node), 7, from, limit)
}

func (v *View) allocator(highKey, freePrefix string, width, from, limit int) (AllocatorState, error) {
	high, err := getUint(v.r, highKey)
	if err != nil {
		return AllocatorState{}, err
	}
	st := AllocatorState{HighWater: int(high)}
	lower := fmt.Sprintf("%s%0*d", freePrefix, width, max(from, 0))
	it, err := v.newIter(&pebble.IterOptions{LowerBound: []byte(lower), UpperBound: prefixEnd([]byte(freePrefix))})
	if err != nil {
		return st, err
	}
	defer it.Close()
	for it.First(); it.Valid() && len(st.Free) < limit; it.Next() {
		n, err := strconv.Atoi(strings.TrimPrefix(string(it.Key()), freePrefix))
		if err != nil {
			return st, fmt.Errorf("allocator key %s: %w", it.Key(), err)
		}
		st.Free = append(st.Free, n)
	}
	return st, it.Error()
}
