// Package resources decides the verbs of storage pools, resource groups, definitions,
// volumes, replicas and snapshots, and controller.modify: one resourcePlan per command
// reads the definition, allocates ports and minors, places replicas and emits the
// events. The plan is pure: it reads a view and writes nothing.
package resources

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/replicas"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backing"
)

// Bodies of the resource verbs (see schemas/commands/).
type (
	// StoragePoolCreate is the body of sp.create.
	StoragePoolCreate = events.StoragePoolCreated
	// ResourceGroupCreate is the body of rg.create: the group and its free-form
	// properties.
	ResourceGroupCreate struct {
		events.ResourceGroupCreated
		Properties map[string]string `json:"properties,omitempty"`
	}
	// ControllerModify is the body of controller.modify.
	ControllerModify struct {
		DRBDOptions     drbd.Options      `json:"drbd_options"`
		Unset           []string          `json:"unset,omitempty"`
		Properties      map[string]string `json:"properties,omitempty"`
		UnsetProperties []string          `json:"unset_properties,omitempty"`
	}
	// StoragePoolModify is the body of sp.modify: what it leaves out keeps its value.
	StoragePoolModify struct {
		Node          string   `json:"node"`
		Name          string   `json:"name"`
		CapacityKiB   *uint64  `json:"capacity_kib,omitempty"`
		Overprovision *float64 `json:"overprovision,omitempty"`
	}
	// StoragePoolDelete is the body of sp.delete.
	StoragePoolDelete struct {
		Node string `json:"node"`
		Name string `json:"name"`
	}
	// ResourceGroupModify is the body of rg.modify.
	ResourceGroupModify struct {
		Name                string            `json:"name"`
		PlaceCount          int               `json:"place_count,omitempty"`
		StoragePool         *string           `json:"storage_pool,omitempty"`
		Provider            *backing.Provider `json:"provider,omitempty"`
		ReplicasOnSame      *[]string         `json:"replicas_on_same,omitempty"`
		ReplicasOnDifferent *[]string         `json:"replicas_on_different,omitempty"`
		DRBDOptions         drbd.Options      `json:"drbd_options"`
		Unset               []string          `json:"unset,omitempty"`
		Properties          map[string]string `json:"properties,omitempty"`
		UnsetProperties     []string          `json:"unset_properties,omitempty"`
	}
	// ResourceGroupSpawn is the body of rg.spawn: size_kib is one size or one per volume.
	ResourceGroupSpawn struct {
		ResourceGroup string            `json:"resource_group"`
		Name          string            `json:"name"`
		SizeKiB       json.RawMessage   `json:"size_kib"`
		DRBDOptions   drbd.Options      `json:"drbd_options"`
		Properties    map[string]string `json:"properties"`
	}
	// ResourceDefinitionCreate is the body of rd.create.
	ResourceDefinitionCreate struct {
		Name          string            `json:"name"`
		ResourceGroup string            `json:"resource_group"`
		DRBDOptions   drbd.Options      `json:"drbd_options"`
		Properties    map[string]string `json:"properties"`
	}
	// VolumeDefinitionCreate is the body of vd.create; without Volume the lowest number
	// the definition does not use (LINSTOR's way).
	VolumeDefinitionCreate struct {
		Resource   string            `json:"resource"`
		Volume     *int              `json:"volume"`
		SizeKiB    uint64            `json:"size_kib"`
		Properties map[string]string `json:"properties"`
	}
	// VolumeDefinitionResize is the body of vd.resize.
	VolumeDefinitionResize struct {
		Resource string `json:"resource"`
		Volume   int    `json:"volume"`
		SizeKiB  uint64 `json:"size_kib"`
	}
	// VolumeFilesystemMade is the body of vd.filesystem-made.
	VolumeFilesystemMade struct {
		Resource string `json:"resource"`
		Volume   int    `json:"volume"`
		Node     string `json:"node"`
		Type     string `json:"type"`
	}
	// VolumeDefinitionModify is the body of vd.modify.
	VolumeDefinitionModify struct {
		Resource        string            `json:"resource"`
		Volume          int               `json:"volume"`
		Properties      map[string]string `json:"properties"`
		UnsetProperties []string          `json:"unset_properties"`
	}
	// VolumeDefinitionDelete is the body of vd.delete.
	VolumeDefinitionDelete struct {
		Resource string `json:"resource"`
		Volume   int    `json:"volume"`
	}
	// ReplicaAdd is the body of replica.add; without Node it autoplaces.
	ReplicaAdd struct {
		Resource         string       `json:"resource"`
		Node             string       `json:"node"`
		Diskless         bool         `json:"diskless"`
		StoragePool      string       `json:"storage_pool"`
		PlaceCount       int          `json:"place_count"`
		ForceInitialSync bool         `json:"force_initial_sync"`
		DRBDOptions      drbd.Options `json:"drbd_options"`
		// Filter narrows an autoplace (no node) beyond the group's rules.
		Filter *PlacementFilter `json:"filter,omitempty"`
	}
	// PlacementFilter is what one autoplace asks of placement besides its group's rules
	// (LINSTOR's autoplace select_filter).
	PlacementFilter struct {
		Nodes                []string           `json:"nodes,omitempty"`
		StoragePools         []string           `json:"storage_pools,omitempty"`
		Providers            []backing.Provider `json:"providers,omitempty"`
		NotWith              []string           `json:"not_with,omitempty"`
		ReplicasOnSame       []string           `json:"replicas_on_same,omitempty"`
		ReplicasOnDifferent  []string           `json:"replicas_on_different,omitempty"`
		XReplicasOnDifferent map[string]int     `json:"x_replicas_on_different,omitempty"`
	}
	// SnapshotRef is the body of rd.snapshot and rd.snapshot-delete.
	SnapshotRef struct {
		Resource string `json:"resource"`
		Name     string `json:"name"`
	}
	// SnapshotClone is the body of rd.clone.
	SnapshotClone struct {
		Resource string `json:"resource"`
		Target   string `json:"target"`
	}
	// SnapshotRollback is the body of rd.rollback.
	SnapshotRollback struct {
		Resource string `json:"resource"`
		Snapshot string `json:"snapshot"`
	}
	// SnapshotProgress is the body of rd.snapshot-progress.
	SnapshotProgress struct {
		Resource string `json:"resource"`
		Name     string `json:"name"`
		Phase    string `json:"phase"`
		Reason   string `json:"reason,omitempty"`
	}
	// ResourceDefinitionDelete is the body of rd.delete: the definition by name, or by
	// resource as the other resource verbs name it (one of them).
	ResourceDefinitionDelete struct {
		Name     string `json:"name"`
		Resource string `json:"resource"`
	}
	// ResourceModify is the body of rd.modify: the definition by name or resource.
	ResourceModify struct {
		Name            string            `json:"name"`
		Resource        string            `json:"resource"`
		DRBDOptions     drbd.Options      `json:"drbd_options"`
		Unset           []string          `json:"unset"`
		Properties      map[string]string `json:"properties"`
		UnsetProperties []string          `json:"unset_properties"`
	}
	// ReplicaModify is the body of replica.modify.
	ReplicaModify struct {
		Resource        string            `json:"resource"`
		Node            string            `json:"node"`
		DRBDOptions     drbd.Options      `json:"drbd_options"`
		Unset           []string          `json:"unset"`
		Properties      map[string]string `json:"properties"`
		UnsetProperties []string          `json:"unset_properties"`
	}
	// ReplicaRef is the body of replica.remove. KeepTiebreaker (default true): a
	// diskless replica the definition needs as its tiebreaker stays, as one; false
	// removes it all the same (LINSTOR's keep_tiebreaker=false).
	ReplicaRef struct {
		Resource       string `json:"resource"`
		Node           string `json:"node"`
		KeepTiebreaker *bool  `json:"keep_tiebreaker"`
	}
	// ReplicaToggleDisk is the body of replica.toggle-disk.
	ReplicaToggleDisk struct {
		Resource    string `json:"resource"`
		Node        string `json:"node"`
		Diskless    bool   `json:"diskless"`
		StoragePool string `json:"storage_pool"`
	}
	// ResourceActivate is the body of resource.activate and resource.deactivate.
	ResourceActivate struct {
		Resource       string `json:"resource"`
		Node           string `json:"node"`
		ReallocatePort bool   `json:"reallocate_port"`
	}
)

// Config tunes the resource verbs. Zero values take the defaults in parentheses.
type Config struct {
	// Ports and Minors are the ranges DRBD TCP ports (per definition) and device minors
	// (per node) are allocated from (replicas.DefaultPorts, replicas.DefaultMinors).
	Ports, Minors replicas.Range
	// Busy reports whether a command under way in this process has claimed a subject (a
	// node or a port) that is not in the views yet; autoplace and port allocation skip
	// such candidates rather than lose the race (admission's Busy; nil: none is).
	Busy func(subject string) bool
}

// UnmarshalJSON reads rd.delete's body; resource stands for name.
func (c *ResourceDefinitionDelete) UnmarshalJSON(b []byte) error {
	type plain ResourceDefinitionDelete
	if err := json.Unmarshal(b, (*plain)(c)); err != nil {
		return err
	}
	var err error
	c.Name, err = orResource(c.Name, c.Resource)
	return err
}

// UnmarshalJSON reads rd.modify's body; resource stands for name.
func (c *ResourceModify) UnmarshalJSON(b []byte) error {
	type plain ResourceModify
	if err := json.Unmarshal(b, (*plain)(c)); err != nil {
		return err
	}
	var err error
	c.Name, err = orResource(c.Name, c.Resource)
	return err
}

// orResource is name, else resource; both, when they differ, is an error.
func orResource(name, resource string) (string, error) {
	switch {
	case name == "":
		return resource, nil
	case resource != "" && resource != name:
		return "", fmt.Errorf("name %q and resource %q: give the definition once, as name or as resource", name, resource)
	}
	return name, nil
}

// checkDevices refuses sp.create's devices (invalid_argument naming devices or
// devices[i]) for a pool kept in a directory (file, file_thin), and for a device
// another pool of the node is made on.
func checkDevices(v *projections.View, c StoragePoolCreate) error {
	if len(c.Devices) == 0 {
		return nil
	}
	if c.Provider == backing.ProviderFile || c.Provider == backing.ProviderFileThin {
		return cairn.InvalidField("devices", "a %s pool is a directory; devices are for lvm, lvm_thin, zfs and zfs_thin", c.Provider)
	}
	pools, err := v.NodeStoragePools(c.Node)
	if err != nil {
		return err
	}
	for i, d := range c.Devices {
		for _, sp := range pools {
			if slices.Contains(sp.Devices, d) {
				return cairn.InvalidField(fmt.Sprintf("devices[%d]", i), "%s holds storage pool %s of node %s", d, sp.Name, c.Node)
			}
		}
	}
	return nil
}
