package events

// Events of shared pools (cairn.ev.pool.<name>): a zpool on shared storage that at most
// one node may have imported. Admission grants it to one node at a time; the agent that
// holds the grant runs the MMP activity check before importing.

// PoolCreated: a pool on shared devices, and the nodes that can reach them.
type PoolCreated struct {
	Name    string   `json:"name"`
	Devices []string `json:"devices"`
	Nodes   []string `json:"nodes"`
}

// PoolImportGranted: Node may import the pool. With a previous owner, the grant moved
// because that owner's node was offline past the failover timeout (Reason says since
// when).
type PoolImportGranted struct {
	Pool          string `json:"pool"`
	Node          string `json:"node"`
	PreviousOwner string `json:"previous_owner,omitempty"`
	Reason        string `json:"reason"`
}

// PoolExported: the owner gave the pool up (or an operator cleared a contested pool);
// nobody holds the grant.
type PoolExported struct {
	Pool   string `json:"pool"`
	Node   string `json:"node,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// PoolContested: an agent saw another host write the pool's MMP uberblocks while its
// node held the grant, and fenced its import. No new grant is given until the pool is
// exported.
type PoolContested struct {
	Pool          string `json:"pool"`
	Node          string `json:"node"`
	ForeignHostID string `json:"foreign_hostid,omitempty"`
	ForeignHost   string `json:"foreign_host,omitempty"`
	Reason        string `json:"reason"`
}

func (*PoolCreated) EventType() string       { return "pool.created" }
func (*PoolImportGranted) EventType() string { return "pool.import-granted" }
func (*PoolExported) EventType() string      { return "pool.exported" }
func (*PoolContested) EventType() string     { return "pool.contested" }

func init() {
	for _, t := range []Type{
		{Name: "pool.created", Version: 1, New: func() Payload { return new(PoolCreated) }},
		{Name: "pool.import-granted", Version: 1, New: func() Payload { return new(PoolImportGranted) }},
		{Name: "pool.exported", Version: 1, New: func() Payload { return new(PoolExported) }},
		{Name: "pool.contested", Version: 1, New: func() Payload { return new(PoolContested) }},
	} {
		Register(t)
	}
}
