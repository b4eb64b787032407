package events

// Event payload types at their current schema versions. Each has a schema
// events/<type>.v<version>.json; field names are part of the contract.

// ClusterCreated: the one cluster of the deployment exists. FailureDomains and the
// erasure-coding scheme (DataChunks k, ParityChunks m) are fixed for its life.
type ClusterCreated struct {
	Name           string `json:"name"`
	FailureDomains bool   `json:"failure_domains"`
	DataChunks     int    `json:"data_chunks"`
	ParityChunks   int    `json:"parity_chunks"`
}

// ClusterActivated: the layout was activated; Domains counts hosts per label then, and
// with failure domains the placement is recorded: every host's volume store and journal set.
type ClusterActivated struct {
	Name         string         `json:"name"`
	Fresh        bool           `json:"fresh"`
	Domains      map[string]int `json:"domains"`
	Warnings     []string       `json:"warnings,omitempty"`
	VolumeStores []StoreHosts   `json:"volume_stores,omitempty"`
	JournalSets  []JournalSet   `json:"journal_sets,omitempty"`
}

// StoreHosts is a volume store by host names.
type StoreHosts struct {
	Primary   string `json:"primary"`
	Secondary string `json:"secondary,omitempty"`
	Tertiary  string `json:"tertiary,omitempty"`
}

// JournalSet is a host's HA journal and the hosts holding its copies.
type JournalSet struct {
	Owner   string   `json:"owner"`
	Members []string `json:"members"`
}

// PathMove is a failover path moved off a departing host.
type PathMove struct {
	Primary string `json:"primary"`
	Path    string `json:"path"`
	From    string `json:"from"`
	To      string `json:"to"`
}

// MemberReplacement is a journal member replaced ("" To: none was free).
type MemberReplacement struct {
	Owner string `json:"owner"`
	From  string `json:"from"`
	To    string `json:"to"`
}

// PlacementUpdated: the recorded placement followed a node joining (new stores and
// journal sets) or leaving (moves, replacements, RemovedHost's own store and set gone).
type PlacementUpdated struct {
	Cluster      string              `json:"cluster"`
	Reason       string              `json:"reason"`
	RemovedHost  string              `json:"removed_host,omitempty"`
	Moves        []PathMove          `json:"moves,omitempty"`
	Replacements []MemberReplacement `json:"replacements,omitempty"`
	VolumeStores []StoreHosts        `json:"volume_stores,omitempty"`
	JournalSets  []JournalSet        `json:"journal_sets,omitempty"`
}

func (*PlacementUpdated) EventType() string { return "placement.updated" }

// NodeAdded (v2): a node joined. v1 had no role; it upcasts to role "storage".
type NodeAdded struct {
	Name          string `json:"name"`
	Host          string `json:"host"`
	Address       string `json:"address"`
	FailureDomain string `json:"failure_domain,omitempty"`
	Role          string `json:"role"`
	PhysicalLabel string `json:"physical_label,omitempty"`
	// Properties are the operator's labels of the node (site, room, …), which resource
	// groups' replicas-on-same / replicas-on-different rules refer to.
	Properties map[string]string `json:"properties,omitempty"`
}

// NodePropertiesChanged: the operator set (Set) and removed (Unset) node properties.
type NodePropertiesChanged struct {
	Name  string            `json:"name"`
	Set   map[string]string `json:"set,omitempty"`
	Unset []string          `json:"unset,omitempty"`
}

func (*NodePropertiesChanged) EventType() string { return "node.properties-changed" }

// NodeAddressChanged: a node's replication address changed (from Previous); every peer
// of its replicas connects to the new one.
type NodeAddressChanged struct {
	Name     string `json:"name"`
	Address  string `json:"address"`
	Previous string `json:"previous"`
}

func (*NodeAddressChanged) EventType() string { return "node.address-changed" }

// NodeInterfacesChanged: a node's named network interfaces (name → address) are now
// Interfaces, and Preferred names the one its replication address comes from when it
// has it ("" for none; LINSTOR's PrefNic). The replication address itself changes only
// by node.added and node.address-changed, which the same command carries when it moves.
type NodeInterfacesChanged struct {
	Name       string            `json:"name"`
	Interfaces map[string]string `json:"interfaces"`
	Preferred  string            `json:"preferred,omitempty"`
}

func (*NodeInterfacesChanged) EventType() string { return "node.interfaces-changed" }

// NodeRemoved: a node left the cluster.
type NodeRemoved struct {
	Name string `json:"name"`
}

// NodeStateChanged: the observed liveness of a node changed (operator or watchdog).
type NodeStateChanged struct {
	Name          string `json:"name"`
	State         string `json:"state"`
	Previous      string `json:"previous"`
	Reason        string `json:"reason,omitempty"`
	DevicesFailed int    `json:"devices_failed,omitempty"`
}

func (*ClusterCreated) EventType() string   { return "cluster.created" }
func (*ClusterActivated) EventType() string { return "cluster.activated" }
func (*NodeAdded) EventType() string        { return "node.added" }
func (*NodeRemoved) EventType() string      { return "node.removed" }
func (*NodeStateChanged) EventType() string { return "node.state-changed" }

// LvolCreated: a logical volume was placed on a node.
type LvolCreated struct {
	Name    string `json:"name"`
	Node    string `json:"node"`
	SizeKiB int64  `json:"size_kib"`
}

// LvolDeleted: a logical volume was removed.
type LvolDeleted struct {
	Name string `json:"name"`
	Node string `json:"node"`
}

// SnapshotCreated: a snapshot of a logical volume, on the volume's node.
type SnapshotCreated struct {
	Name string `json:"name"`
	Lvol string `json:"lvol"`
	Node string `json:"node"`
}

// SnapshotDeleted: a snapshot was removed.
type SnapshotDeleted struct {
	Name string `json:"name"`
	Lvol string `json:"lvol"`
	Node string `json:"node"`
}

func (*LvolCreated) EventType() string     { return "lvol.created" }
func (*LvolDeleted) EventType() string     { return "lvol.deleted" }
func (*SnapshotCreated) EventType() string { return "snapshot.created" }
func (*SnapshotDeleted) EventType() string { return "snapshot.deleted" }

// Node roles and states.
const (
	RoleStorage   = "storage"
	RoleSecondary = "secondary"
	StateOnline   = "online"
	StateOffline  = "offline"
)

func init() {
	Register(Type{Name: "cluster.created", Version: 1, New: func() Payload { return new(ClusterCreated) }})
	Register(Type{Name: "cluster.activated", Version: 1, New: func() Payload { return new(ClusterActivated) }})
	Register(Type{Name: "placement.updated", Version: 1, New: func() Payload { return new(PlacementUpdated) }})
	Register(Type{Name: "node.added", Version: 2, New: func() Payload { return new(NodeAdded) },
		Upcasters: map[int]Upcaster{1: func(p map[string]any) (map[string]any, error) {
			if _, ok := p["role"]; !ok {
				p["role"] = RoleStorage
			}
			return p, nil
		}}})
	Register(Type{Name: "lvol.created", Version: 1, New: func() Payload { return new(LvolCreated) }})
	Register(Type{Name: "lvol.deleted", Version: 1, New: func() Payload { return new(LvolDeleted) }})
	Register(Type{Name: "snapshot.created", Version: 1, New: func() Payload { return new(SnapshotCreated) }})
	Register(Type{Name: "snapshot.deleted", Version: 1, New: func() Payload { return new(SnapshotDeleted) }})
	Register(Type{Name: "node.removed", Version: 1, New: func() Payload { return new(NodeRemoved) }})
	Register(Type{Name: "node.properties-changed", Version: 1, New: func() Payload { return new(NodePropertiesChanged) }})
	Register(Type{Name: "node.address-changed", Version: 1, New: func() Payload { return new(NodeAddressChanged) }})
	Register(Type{Name: "node.interfaces-changed", Version: 1, New: func() Payload { return new(NodeInterfacesChanged) }})
	Register(Type{Name: "node.state-changed", Version: 1, New: func() Payload { return new(NodeStateChanged) }})
}

// Node maintenance modes (NodeMaintenanceChanged.Mode).
const (
	MaintenanceNone       = ""           // a placement target like any other
	MaintenanceEvacuating = "evacuating" // node.evacuate: every replica moves off it
	MaintenanceEvicted    = "evicted"    // node.evict (auto-evict): offline too long, replicas re-placed
)

// NodeMaintenanceChanged: a node was set to evacuate (node.evacuate), evicted
// (node.evict, the auto-evict policy) or restored as a placement target (node.restore,
// Mode ""). A node in either mode gets no new replicas, and the evacuation policy moves
// its replicas off it: a replacement first, the old replica once the replacement is
// UpToDate.
type NodeMaintenanceChanged struct {
	Name     string `json:"name"`
	Mode     string `json:"mode"`
	Previous string `json:"previous"`
	Reason   string `json:"reason,omitempty"`
}

func (*NodeMaintenanceChanged) EventType() string { return "node.maintenance-changed" }

func init() {
	Register(Type{Name: "node.maintenance-changed", Version: 1, New: func() Payload { return new(NodeMaintenanceChanged) }})
}
