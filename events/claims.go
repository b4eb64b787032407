package events

// Claims: events whose only job is to make concurrent commands that take the same
// thing conflict. A command appends a claim on the subject of what it takes,
// conditional on that subject being where its view saw it; two commands taking the
// same port, placing on the same node or changing the same host cannot both land,
// while commands taking different ones never meet. The state itself is in the
// commands' other events.

// PortClaimed: a definition took a DRBD TCP port (on cairn.ev.port.<port>). The claim
// is what makes two concurrent commands that picked the same free port conflict: each
// appends it conditional on the port's subject being where its view saw it. The port
// is free again when the views say so (the definition deleted or moved to another).
type PortClaimed struct {
	Port     int    `json:"port"`
	Resource string `json:"resource"`
}

func (*PortClaimed) EventType() string { return "port.claimed" }

// NodeClaimed: a command placed on the node (on cairn.ev.node.<node>): it took minors
// there and, for a disk, room in a storage pool. Concurrent placements on one node
// conflict through it (each appends it conditional on the node's subject), so minors
// stay unique per node and pools are never overcommitted; placements on different
// nodes never meet. The allocation itself is in the definition's events.
type NodeClaimed struct {
	Name     string `json:"name"`
	Resource string `json:"resource"`
	Reason   string `json:"reason"`
}

func (*NodeClaimed) EventType() string { return "node.claimed" }

// HostChanged: a node joined or left a host (on cairn.ev.host.<host>), in a cluster
// with failure domains: a host keeps one domain, and two nodes leaving the same host
// at once cannot both skip the balance check as "not the last one there".
type HostChanged struct {
	Host          string `json:"host"`
	Node          string `json:"node"`
	FailureDomain string `json:"failure_domain"`
	Change        string `json:"change"` // joined | left
}

func (*HostChanged) EventType() string { return "host.changed" }

// TargetClaimed: rd.clone took the name of its target definition (on
// cairn.ev.rd.<name>) for the restore of its snapshot. A concurrent rd.create of that
// name conflicts with the clone on the subject, and one decided later is refused while
// the claim holds: until the clone's restore creates the definition, or its snapshot
// fails or is deleted.
type TargetClaimed struct {
	Name     string `json:"name"`
	Resource string `json:"resource"`
	Snapshot string `json:"snapshot"`
}

func (*TargetClaimed) EventType() string { return "rd.target-claimed" }

func init() {
	for _, t := range []Type{
		{Name: "port.claimed", Version: 1, New: func() Payload { return new(PortClaimed) }},
		{Name: "node.claimed", Version: 1, New: func() Payload { return new(NodeClaimed) }},
		{Name: "host.changed", Version: 1, New: func() Payload { return new(HostChanged) }},
		{Name: "rd.target-claimed", Version: 1, New: func() Payload { return new(TargetClaimed) }},
	} {
		Register(t)
	}
}
