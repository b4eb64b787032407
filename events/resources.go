package events

import (
	"time"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/storage/backing"
)

// Events of the DRBD resource model: storage pools (on the node aggregate), resource
// groups (cairn.ev.rg.<name>) and resource definitions with their volumes and replicas
// (cairn.ev.rd.<name>). Every allocated identity (port, node id, minor, day-0 GI, seeds)
// is recorded in the event that allocated it and never changed by a later event, except
// the port through resource.activated with reallocate_port.

// StoragePoolCreated: a node offers a storage pool of a provider with a capacity.
type StoragePoolCreated struct {
	Node        string           `json:"node"`
	Name        string           `json:"name"`
	Provider    backing.Provider `json:"provider"`
	Pool        string           `json:"pool"`
	CapacityKiB uint64           `json:"capacity_kib,omitempty"` // 0: not given yet
	// Devices, when set, are blank block devices of the node its agent makes the back
	// end on (a volume group, a thin pool, a zpool: volume.Prepare) before measuring it.
	Devices []string `json:"devices,omitempty"`
}

// StoragePoolModified: a storage pool's capacity as the operator gives it (0: none, the
// agent's reports decide), and a thin pool's over-provisioning ratio (absent: unchanged).
type StoragePoolModified struct {
	Node          string  `json:"node"`
	Name          string  `json:"name"`
	CapacityKiB   uint64  `json:"capacity_kib"`
	Overprovision float64 `json:"overprovision,omitempty"`
}

// StoragePoolCapacityReported: the node's agent measured the pool's back end at At
// (recorded by the leading serve when it first reports, or when free or total moved by
// more than 1% of the total since the last recorded report).
type StoragePoolCapacityReported struct {
	Node     string    `json:"node"`
	Name     string    `json:"name"`
	TotalKiB uint64    `json:"total_kib"`
	FreeKiB  uint64    `json:"free_kib"`
	At       time.Time `json:"at"`
}

func (*StoragePoolCapacityReported) EventType() string { return "sp.capacity-reported" }

func (*StoragePoolModified) EventType() string { return "sp.modified" }

// VolumeDefinitionDeleted: a volume of a definition without replicas is gone.
type VolumeDefinitionDeleted struct {
	Resource string `json:"resource"`
	Volume   int    `json:"volume"`
}

func (*VolumeDefinitionDeleted) EventType() string { return "vd.deleted" }

// ReplicaVolumeAdded: a replica of a deployed definition gets a volume the definition
// just got (vd.created in the same append): its minor and, for a disk, the volume's
// seeds (as replica.added plans them) or a full sync.
type ReplicaVolumeAdded struct {
	Resource string      `json:"resource"`
	Node     string      `json:"node"`
	Volume   int         `json:"volume"`
	Minor    int         `json:"minor"`
	Seeds    []drbd.Seed `json:"seeds,omitempty"`
	FullSync bool        `json:"full_sync,omitempty"`
}

func (*ReplicaVolumeAdded) EventType() string { return "replica.volume-added" }

// ReplicaVolumeRemoved: a replica lets go of a volume the definition drops (vd.deleted
// in the same append): its minor is free again.
type ReplicaVolumeRemoved struct {
	Resource string `json:"resource"`
	Node     string `json:"node"`
	Volume   int    `json:"volume"`
	Minor    int    `json:"minor"`
}

func (*ReplicaVolumeRemoved) EventType() string { return "replica.volume-removed" }

// VolumeDefinitionResized: a volume of a definition grew to SizeKiB (from
// PreviousKiB). Every diskful replica's agent grows its backing volume, then DRBD grows
// the device once all have; each pool that holds a disk takes the difference.
type VolumeDefinitionResized struct {
	Resource    string `json:"resource"`
	Volume      int    `json:"volume"`
	SizeKiB     uint64 `json:"size_kib"`
	PreviousKiB uint64 `json:"previous_kib"`
}

func (*VolumeDefinitionResized) EventType() string { return "vd.resized" }

// ResourceGroupModified: a patch of a group's placement and DRBD options; a field left
// out keeps its value (the replicas_on lists are replaced when present). Existing
// definitions keep their replicas; their nodes get the new options.
type ResourceGroupModified struct {
	Name                string            `json:"name"`
	PlaceCount          int               `json:"place_count,omitempty"`
	StoragePool         *string           `json:"storage_pool,omitempty"`
	Provider            *backing.Provider `json:"provider,omitempty"`
	ReplicasOnSame      *[]string         `json:"replicas_on_same,omitempty"`
	ReplicasOnDifferent *[]string         `json:"replicas_on_different,omitempty"`
	Set                 drbd.Options      `json:"set,omitzero"`
	Unset               []string          `json:"unset,omitempty"`
}

func (*ResourceGroupModified) EventType() string { return "rg.modified" }

// ResourceGroupCreated: a template for resource definitions and their placement.
type ResourceGroupCreated struct {
	Name                string           `json:"name"`
	PlaceCount          int              `json:"place_count"`
	Provider            backing.Provider `json:"provider,omitempty"`
	StoragePool         string           `json:"storage_pool,omitempty"`
	ReplicasOnSame      []string         `json:"replicas_on_same,omitempty"`
	ReplicasOnDifferent []string         `json:"replicas_on_different,omitempty"`
	DRBDOptions         drbd.Options     `json:"drbd_options,omitzero"`
}

// ResourceDefinitionCreated: a DRBD resource exists, with its TCP port allocated.
type ResourceDefinitionCreated struct {
	Name          string       `json:"name"`
	ResourceGroup string       `json:"resource_group,omitempty"`
	Port          int          `json:"port"`
	DRBDOptions   drbd.Options `json:"drbd_options,omitzero"`
	// RestoredFrom is the snapshot a restored definition's data comes from (rd.restore).
	RestoredFrom *drbd.SnapshotRef `json:"restored_from,omitempty"`
}

// VolumeDefinitionCreated: a volume of a definition, with its random day-0 GI.
type VolumeDefinitionCreated struct {
	Resource string `json:"resource"`
	Volume   int    `json:"volume"`
	SizeKiB  uint64 `json:"size_kib"`
	Day0GI   string `json:"day0_gi"`
}

// VolumeMinor is the device minor a replica uses for one volume.
type VolumeMinor struct {
	Volume int `json:"volume"`
	Minor  int `json:"minor"`
}

// ReplicaAdded: a replica of a definition on a node, with its node id and minors and,
// when diskful, its storage pool and seeding plan (Seeds, or FullSync).
type ReplicaAdded struct {
	Resource    string           `json:"resource"`
	Node        string           `json:"node"`
	NodeID      int              `json:"node_id"`
	Minors      []VolumeMinor    `json:"minors"`
	Diskless    bool             `json:"diskless,omitempty"`
	Tiebreaker  bool             `json:"tiebreaker,omitempty"`
	StoragePool string           `json:"storage_pool,omitempty"`
	Provider    backing.Provider `json:"provider,omitempty"`
	Pool        string           `json:"pool,omitempty"`
	Seeds       []drbd.Seed      `json:"seeds,omitempty"`
	FullSync    bool             `json:"full_sync,omitempty"`
	DRBDOptions drbd.Options     `json:"drbd_options,omitzero"`
	// RestoreFrom: the disk starts as this node's copy of a snapshot (rd.restore).
	RestoreFrom *drbd.SnapshotRef `json:"restore_from,omitempty"`
	// RestoreBackup: the disk starts as the data of a backup (backup.restore).
	RestoreBackup *drbd.BackupRef `json:"restore_backup,omitempty"`
	// Reason: explicit, autoplace, tiebreaker, restore or replace.
	Reason string `json:"reason"`
	// Replaces: the node whose replica this one replaces (replica.replace,
	// replica.migrate); that
	// replica is removed once this one is UpToDate.
	Replaces string `json:"replaces,omitempty"`
}

// ReplicaRemoved: a replica left its definition; its node id and minors are free again.
type ReplicaRemoved struct {
	Resource string        `json:"resource"`
	Node     string        `json:"node"`
	NodeID   int           `json:"node_id"`
	Minors   []VolumeMinor `json:"minors"`
	Reason   string        `json:"reason"`
}

// ReplicaDiskToggled: a replica gained a disk (Diskless false: a new disk, FullSync) or
// gave it up (Diskless true).
type ReplicaDiskToggled struct {
	Resource    string           `json:"resource"`
	Node        string           `json:"node"`
	Diskless    bool             `json:"diskless"`
	StoragePool string           `json:"storage_pool,omitempty"`
	Provider    backing.Provider `json:"provider,omitempty"`
	Pool        string           `json:"pool,omitempty"`
	FullSync    bool             `json:"full_sync,omitempty"`
	// Replaces: the node whose disk the new disk replaces (replica.migrate of a
	// diskless replica's node, LINSTOR's toggle-disk --migrate-from).
	Replaces string `json:"replaces,omitempty"`
}

// ReplicaTiebreakerChanged: a diskless replica became the definition's tiebreaker (an
// operator removed it while it was the one breaking ties) or stopped being one.
type ReplicaTiebreakerChanged struct {
	Resource   string `json:"resource"`
	Node       string `json:"node"`
	Tiebreaker bool   `json:"tiebreaker"`
	Reason     string `json:"reason"`
}

// ResourceActivated: the resource runs again on Node ("" = every replica); with a
// reallocated port, Port is the new one and PreviousPort the one freed.
type ResourceActivated struct {
	Resource     string `json:"resource"`
	Node         string `json:"node,omitempty"`
	Port         int    `json:"port,omitempty"`
	PreviousPort int    `json:"previous_port,omitempty"`
}

// ResourceDeactivated: the resource is taken down on Node ("" = every replica), disks
// and metadata kept.
type ResourceDeactivated struct {
	Resource string `json:"resource"`
	Node     string `json:"node,omitempty"`
}

// ResourceOptionsChanged: a patch of a definition's DRBD options; options neither set
// nor unset keep their value.
type ResourceOptionsChanged struct {
	Name  string       `json:"name"`
	Set   drbd.Options `json:"set,omitzero"`
	Unset []string     `json:"unset,omitempty"`
}

func (*ResourceOptionsChanged) EventType() string { return "rd.options-changed" }

// ReplicaModified: one replica's DRBD options (the narrowest level: over controller,
// group and definition, on that node only) and free-form properties were patched
// (LINSTOR's resource properties).
type ReplicaModified struct {
	Resource        string            `json:"resource"`
	Node            string            `json:"node"`
	Set             drbd.Options      `json:"set,omitzero"`
	Unset           []string          `json:"unset,omitempty"`
	SetProperties   map[string]string `json:"set_properties,omitempty"`
	UnsetProperties []string          `json:"unset_properties,omitempty"`
}

func (*ReplicaModified) EventType() string { return "replica.modified" }

// ResourceDefinitionDeleted: a definition without replicas is gone, with its volumes;
// Port (freed) and Volumes (how many went) are recorded for audits.
type ResourceDefinitionDeleted struct {
	Name    string `json:"name"`
	Port    int    `json:"port"`
	Volumes int    `json:"volumes"`
}

func (*ResourceDefinitionDeleted) EventType() string { return "rd.deleted" }

func (*StoragePoolCreated) EventType() string        { return "sp.created" }
func (*ResourceGroupCreated) EventType() string      { return "rg.created" }
func (*ResourceDefinitionCreated) EventType() string { return "rd.created" }
func (*VolumeDefinitionCreated) EventType() string   { return "vd.created" }
func (*ReplicaAdded) EventType() string              { return "replica.added" }
func (*ReplicaRemoved) EventType() string            { return "replica.removed" }
func (*ReplicaDiskToggled) EventType() string        { return "replica.disk-toggled" }
func (*ReplicaTiebreakerChanged) EventType() string  { return "replica.tiebreaker-changed" }
func (*ResourceActivated) EventType() string         { return "resource.activated" }
func (*ResourceDeactivated) EventType() string       { return "resource.deactivated" }

func init() {
	for _, t := range []Type{
		// v2: capacity_kib may be absent (not given yet: nothing is placed on the pool
		// until sp.modify gives one); v1 always had it.
		// v3: devices (the agent makes the back end on them); v2 and v1 read as v3 unchanged.
		{Name: "sp.created", Version: 3, New: func() Payload { return new(StoragePoolCreated) },
			Upcasters: map[int]Upcaster{1: func(p map[string]any) (map[string]any, error) { return p, nil },
				2: func(p map[string]any) (map[string]any, error) { return p, nil }}},
		// v2: a replicas_on_same entry may name a value (key=value); v1 named keys only.
		{Name: "rg.created", Version: 2, New: func() Payload { return new(ResourceGroupCreated) },
			Upcasters: map[int]Upcaster{1: func(p map[string]any) (map[string]any, error) { return p, nil }}},
		{Name: "sp.modified", Version: 1, New: func() Payload { return new(StoragePoolModified) }},
		{Name: "sp.capacity-reported", Version: 1, New: func() Payload { return new(StoragePoolCapacityReported) }},
		{Name: "vd.deleted", Version: 1, New: func() Payload { return new(VolumeDefinitionDeleted) }},
		{Name: "vd.resized", Version: 1, New: func() Payload { return new(VolumeDefinitionResized) }},
		{Name: "replica.volume-added", Version: 1, New: func() Payload { return new(ReplicaVolumeAdded) }},
		{Name: "replica.volume-removed", Version: 1, New: func() Payload { return new(ReplicaVolumeRemoved) }},
		{Name: "rg.modified", Version: 2, New: func() Payload { return new(ResourceGroupModified) }, // as rg.created
			Upcasters: map[int]Upcaster{1: func(p map[string]any) (map[string]any, error) { return p, nil }}},
		{Name: "rd.created", Version: 1, New: func() Payload { return new(ResourceDefinitionCreated) }},
		{Name: "vd.created", Version: 1, New: func() Payload { return new(VolumeDefinitionCreated) }},
		{Name: "rd.options-changed", Version: 1, New: func() Payload { return new(ResourceOptionsChanged) }},
		{Name: "rd.deleted", Version: 1, New: func() Payload { return new(ResourceDefinitionDeleted) }},
		{Name: "replica.modified", Version: 1, New: func() Payload { return new(ReplicaModified) }},
		{Name: "replica.added", Version: 1, New: func() Payload { return new(ReplicaAdded) }},
		{Name: "replica.removed", Version: 1, New: func() Payload { return new(ReplicaRemoved) }},
		{Name: "replica.disk-toggled", Version: 1, New: func() Payload { return new(ReplicaDiskToggled) }},
		{Name: "replica.tiebreaker-changed", Version: 1, New: func() Payload { return new(ReplicaTiebreakerChanged) }},
		{Name: "resource.activated", Version: 1, New: func() Payload { return new(ResourceActivated) }},
		{Name: "resource.deactivated", Version: 1, New: func() Payload { return new(ResourceDeactivated) }},
	} {
		Register(t)
	}
}
