// Package nodes decides the cluster and node verbs: creating the cluster and activating
// failure domains, adding, modifying and removing nodes, their states, and the
// placement of volume stores and journals that follows topology changes.
package nodes

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/commands/domains"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// ClusterCreate is the body of cluster.create.
type ClusterCreate struct {
	Name           string `json:"name"`
	FailureDomains bool   `json:"failure_domains"`
	DataChunks     int    `json:"data_chunks"`
	ParityChunks   int    `json:"parity_chunks"`
}

// NodeAdd is the body of node.add.
type NodeAdd struct {
	Name          string            `json:"name"`
	Host          string            `json:"host"`
	Address       string            `json:"address"`
	FailureDomain string            `json:"failure_domain"`
	Role          string            `json:"role"`
	PhysicalLabel string            `json:"physical_label"`
	Properties    map[string]string `json:"properties,omitempty"`
	// Interfaces are the node's named network interfaces (name → address); address is
	// one of them, PreferredInterface's when that is among them.
	Interfaces         map[string]string `json:"interfaces,omitempty"`
	PreferredInterface string            `json:"preferred_interface,omitempty"`
}

// NodeRemove is the body of node.remove.
type NodeRemove struct {
	Name string `json:"name"`
}

// NodeSetState is the body of node.set-state.
type NodeSetState struct {
	Name          string `json:"name"`
	State         string `json:"state,omitempty"`
	Reason        string `json:"reason,omitempty"`
	DevicesFailed *int   `json:"devices_failed,omitempty"` // nil: unchanged
}

// DecideClusterCreate creates the deployment's one cluster. Refuses with already_exists
// when a cluster exists: its name, failure-domain mode and erasure-coding scheme are
// settable once.
func DecideClusterCreate(existing *projections.Cluster, c ClusterCreate) (*events.ClusterCreated, error) {
	if existing != nil {
		return nil, cairn.Errorf(cairn.CodeAlreadyExists,
			"cluster %s already exists (failure_domains=%t, scheme %d+%d); a deployment has one cluster and these settings are fixed at creation",
			existing.Name, existing.FailureDomains, existing.DataChunks, existing.ParityChunks).
			WithDetails(map[string]any{"cluster": existing.Name, "failure_domains": existing.FailureDomains,
				"data_chunks": existing.DataChunks, "parity_chunks": existing.ParityChunks})
	}
	// A DRBD-only cluster needs a name alone: the erasure-coding scheme defaults to 1+1.
	return &events.ClusterCreated{Name: c.Name, FailureDomains: c.FailureDomains, DataChunks: max(c.DataChunks, 1), ParityChunks: max(c.ParityChunks, 1)}, nil
}

// DecideNodeAdd admits a node into the cluster. Refuses with precondition_failed when
// there is no cluster, already_exists when the name is taken, and invalid_argument
// (field failure_domain) when the cluster has failure domains and the node no label.
func DecideNodeAdd(cluster *projections.Cluster, existing *projections.NodeSpec, c NodeAdd) (*events.NodeAdded, []string, error) {
	if cluster == nil {
		return nil, nil, cairn.Errorf(cairn.CodePreconditionFailed, "no cluster yet: send cluster.create before node.add")
	}
	if existing != nil {
		return nil, nil, cairn.Errorf(cairn.CodeAlreadyExists, "node %s already exists (host %s, address %s)",
			existing.Name, existing.Host, existing.Address).
			WithDetails(map[string]any{"node": existing.Name, "host": existing.Host, "address": existing.Address}).About(cairn.ObjNode)
	}
	var warnings []string
	if cluster.FailureDomains && c.FailureDomain == "" {
		return nil, nil, cairn.InvalidField("failure_domain", "failure_domain is required: cluster %s has failure domains on", cluster.Name)
	}
	if !cluster.FailureDomains && c.FailureDomain != "" {
		warnings = append(warnings, fmt.Sprintf("cluster %s has failure domains off; label %s is recorded but not used for placement", cluster.Name, c.FailureDomain))
	}
	role := c.Role
	if role == "" {
		role = events.RoleStorage
	}
	return &events.NodeAdded{Name: c.Name, Host: c.Host, Address: c.Address, FailureDomain: c.FailureDomain, Role: role, PhysicalLabel: c.PhysicalLabel, Properties: c.Properties}, warnings, nil
}

// DecideNodeRemove removes a node. Refuses with not_found for a node not in the cluster.
func DecideNodeRemove(existing *projections.Node, c NodeRemove) (*events.NodeRemoved, error) {
	if existing == nil {
		return nil, cairn.Errorf(cairn.CodeNotFound, "node %s is not in the cluster", c.Name).About(cairn.ObjNode)
	}
	return &events.NodeRemoved{Name: c.Name}, nil
}

// DecideNodeSetState records a change of a node's liveness or of its failed devices
// (fields left out keep their value). Refuses with not_found for a node not in the
// cluster; a change to what the node already has is a no-op with a warning.
func DecideNodeSetState(existing *projections.Node, c NodeSetState) (*events.NodeStateChanged, []string, error) {
	if existing == nil {
		return nil, nil, cairn.Errorf(cairn.CodeNotFound, "node %s is not in the cluster", c.Name).About(cairn.ObjNode)
	}
	state, devices := existing.Status.State, existing.Status.DevicesFailed
	if c.State != "" {
		state = c.State
	}
	if c.DevicesFailed != nil {
		devices = *c.DevicesFailed
	}
	if state == existing.Status.State && devices == existing.Status.DevicesFailed {
		return nil, []string{fmt.Sprintf("node %s is already %s with %d failed device(s); nothing changed", c.Name, state, devices)}, nil
	}
	return &events.NodeStateChanged{Name: c.Name, State: state, Previous: existing.Status.State, Reason: c.Reason, DevicesFailed: devices}, nil, nil
}

// nodeHandlers returns the handlers of the cluster and node verbs. Each computes its
// consistency boundary first, so that a refusal can be checked against the stream too.
// NodeModify is the body of node.modify: the operator's node properties to set and to
// remove.
type NodeModify struct {
	Name       string            `json:"name"`
	Address    string            `json:"address,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
	Unset      []string          `json:"unset,omitempty"`
	// Interfaces sets named network interfaces (name → address), UnsetInterfaces
	// removes some, PreferredInterface names the one the replication address comes from
	// ("" for none; absent: unchanged).
	Interfaces         map[string]string `json:"interfaces,omitempty"`
	UnsetInterfaces    []string          `json:"unset_interfaces,omitempty"`
	PreferredInterface *string           `json:"preferred_interface,omitempty"`
}

// DecideNodeModify changes a node's replication address (every peer of its replicas gets
// it) and its properties (what replicas_on_same/different refer to; placements already
// made stay). Refuses with not_found for an unknown node, already_exists for an address
// another node has, invalid_argument (field unset) for a key both set and removed or
// more than 32 properties; a change that changes nothing is a no-op with a warning.
func DecideNodeModify(v *projections.View, n *projections.Node, c NodeModify) (NodeModified, []string, error) {
	var out NodeModified
	if n == nil {
		return out, nil, cairn.Errorf(cairn.CodeNotFound, "node %s is not in the cluster", c.Name).About(cairn.ObjNode)
	}
	ifs, address, err := decideInterfaces(n.Spec, interfacesPatch{Set: c.Interfaces, Unset: c.UnsetInterfaces, Preferred: c.PreferredInterface, Address: c.Address})
	if err != nil {
		return out, nil, err
	}
	out.Interfaces = ifs
	if address != n.Spec.Address {
		others, _, err := v.NodesAt(address, 1)
		if err != nil {
			return out, nil, err
		}
		if len(others) > 0 {
			return out, nil, cairn.Errorf(cairn.CodeAlreadyExists, "node %s already has address %s", others[0], address).About(cairn.ObjNode)
		}
		out.Address = &events.NodeAddressChanged{Name: c.Name, Address: address, Previous: n.Spec.Address}
	}
	set, unset, err := decide.PatchMap(n.Spec.Properties, c.Properties, c.Unset, "unset")
	if err != nil {
		return out, nil, err
	}
	if len(set) > 0 || len(unset) > 0 {
		if len(n.Spec.Properties)+decide.CountNew(n.Spec.Properties, set)-len(unset) > 32 {
			return out, nil, cairn.InvalidField("properties", "a node has at most 32 properties")
		}
		out.Properties = &events.NodePropertiesChanged{Name: c.Name, Set: set, Unset: unset}
	}
	if out.Address == nil && out.Properties == nil && out.Interfaces == nil {
		return out, []string{"node " + c.Name + " already has this address, these interfaces and these properties; nothing changed"}, nil
	}
	return out, nil, nil
}

// NodeModified is what node.modify changes: each nil when it stays.
type NodeModified struct {
	Address    *events.NodeAddressChanged
	Properties *events.NodePropertiesChanged
	Interfaces *events.NodeInterfacesChanged
}

// Handlers decide the cluster and node verbs: cluster.create, cluster.activate,
// node.add, node.remove, node.modify, node.set-state and the maintenance verbs
// (node.evacuate, node.evict, node.restore). Each reads its node's subject; with failure
// domains, the cluster and the node's host too (readTopology).
func Handlers() []decide.Handler {
	return append(maintenanceHandlers(), []decide.Handler{activateHandler(),
		{Verb: "node.modify", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c NodeModify
			// The node's own subject. The address check against the other nodes is
			// advice, not an invariant (node.add accepts a shared address with a
			// warning), so it is not a read to check: two renames racing to one address
			// can both land, as two node.add with it can.
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, names.Event("node", c.Name)) })
			if err != nil {
				return d, err
			}
			n, found, err := v.Node(c.Name)
			if err != nil {
				return d, err
			}
			m, warnings, err := DecideNodeModify(v, decide.Ptr(n, found), c)
			subject := names.Event("node", c.Name)
			return d.With(subject, m.Interfaces, nil).With(subject, m.Address, nil).With(subject, m.Properties, warnings), err
		}},
		{Verb: "cluster.create", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c ClusterCreate
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.AggregateBoundary(v, names, "cluster") })
			if err != nil {
				return d, err
			}
			cl, ok, err := v.Cluster()
			if err != nil {
				return d, err
			}
			ev, err := DecideClusterCreate(decide.Ptr(cl, ok), c)
			return d.With(names.Event("cluster", c.Name), ev, nil), err
		}},
		{Verb: "node.add", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c NodeAdd
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			r := decide.NewReads(v, names)
			d, err := decideNodeAdd(r, c)
			return r.Decide(d), err
		}},
		{Verb: "node.remove", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c NodeRemove
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			r := decide.NewReads(v, names)
			d, err := decideNodeRemove(r, c)
			return r.Decide(d), err
		}},
		{Verb: "node.set-state", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c NodeSetState
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, names.Event("node", c.Name)) })
			if err != nil {
				return d, err
			}
			n, found, err := v.Node(c.Name)
			if err != nil {
				return d, err
			}
			ev, warnings, err := DecideNodeSetState(decide.Ptr(n, found), c)
			return d.With(names.Event("node", c.Name), ev, warnings), err
		}},
	}...)
}

// readTopology records the reads of a topology decision in a cluster with failure
// domains: the cluster (its activation, placement and the balance every counted host
// change rewrites through placement.updated) and the node's host.
func readTopology(r *decide.Reads, cl projections.Cluster, host string) error {
	if !cl.FailureDomains {
		return nil
	}
	return errors.Join(r.Aggregate("cluster"), r.Of("host", host))
}

// hostChanged is the claim on a host a node joins or leaves, in a cluster with failure
// domains (nil otherwise).
func hostChanged(cl projections.Cluster, host, node, domain, change string) *events.HostChanged {
	if !cl.FailureDomains {
		return nil
	}
	return &events.HostChanged{Host: host, Node: node, FailureDomain: domain, Change: change}
}

// decideNodeAdd decides node.add. Reads: the node's subject; without a cluster, the
// cluster's; with failure domains, the cluster and the host (readTopology). The other
// nodes' addresses are advice (a warning), not reads.
func decideNodeAdd(r *decide.Reads, c NodeAdd) (decide.Decision, error) {
	v, names := r.View(), r.Names()
	var d decide.Decision
	if err := r.Of("node", c.Name); err != nil {
		return d, err
	}
	cl, ok, err := v.Cluster()
	if err != nil {
		return d, err
	}
	if !ok {
		if err := r.Aggregate("cluster"); err != nil {
			return d, err
		}
	} else if err := readTopology(r, cl, c.Host); err != nil {
		return d, err
	}
	n, found, err := v.Node(c.Name)
	if err != nil {
		return d, err
	}
	ev, warnings, err := DecideNodeAdd(decide.Ptr(cl, ok), decide.Ptr(n.Spec, found), c)
	if err != nil {
		return d, err
	}
	ifs, err := decideAddInterfaces(c)
	if err != nil {
		return d, err
	}
	// A few names are enough to warn: listing every node of a shared address would make
	// each node.add cost (and its reply grow with) all of them.
	others, more, err := v.NodesAt(c.Address, 3)
	if err != nil {
		return d, err
	}
	switch {
	case len(others) == 1:
		warnings = append(warnings, fmt.Sprintf("node %s has the same address %s: replicas of one resource on both would share DRBD's endpoint", others[0], c.Address))
	case len(others) > 1:
		who := strings.Join(others, ", ")
		if more {
			who += " and others"
		}
		warnings = append(warnings, fmt.Sprintf("nodes %s have the same address %s: replicas of one resource on them would share DRBD's endpoint", who, c.Address))
	}
	m := domains.Member{Name: ev.Name, Host: ev.Host, Domain: ev.FailureDomain, Role: ev.Role, Physical: ev.PhysicalLabel}
	if err := checkTopology(v, &m, ""); err != nil {
		return d, err
	}
	up, err := placementFor(v, &m, "")
	if err != nil {
		return d, err
	}
	d = d.With(names.Event("node", c.Name), ev, warnings).With(names.Event("node", c.Name), ifs, nil).With(names.Event("cluster", cl.Name), up, nil)
	return d.With(names.Event("host", c.Host), hostChanged(cl, c.Host, c.Name, c.FailureDomain, "joined"), nil), nil
}

// decideNodeRemove decides node.remove. Reads: the node's subject (its replicas and
// volumes claim it); with failure domains, the cluster and the host; once activated,
// every node (the online hosts that must stay above k + m); while the cluster holds no
// data, every definition and volume (the two-host floor starts with the first).
func decideNodeRemove(r *decide.Reads, c NodeRemove) (decide.Decision, error) {
	return decideRemoval(r, c, false)
}

// DecideLostNodeRemoval decides the node.remove part of node.lost: as node.remove, but
// the node's replicas are removed by the same command (their removal is the other part
// of its decision), so holding replicas does not refuse it.
func DecideLostNodeRemoval(r *decide.Reads, c NodeRemove) (decide.Decision, error) {
	return decideRemoval(r, c, true)
}

func decideRemoval(r *decide.Reads, c NodeRemove, lost bool) (decide.Decision, error) {
	v, names := r.View(), r.Names()
	var d decide.Decision
	if err := r.Of("node", c.Name); err != nil {
		return d, err
	}
	n, found, err := v.Node(c.Name)
	if err != nil {
		return d, err
	}
	ev, err := DecideNodeRemove(decide.Ptr(n, found), c)
	if err != nil {
		return d, err
	}
	cl, _, err := v.Cluster()
	if err != nil {
		return d, err
	}
	if err := readTopology(r, cl, n.Spec.Host); err != nil {
		return d, err
	}
	if cl.Activated {
		if err := r.Aggregate("node"); err != nil {
			return d, err
		}
		if data, err := v.HoldsData(); err != nil {
			return d, err
		} else if !data {
			if err := errors.Join(r.Aggregate("rd"), r.Aggregate("lvol")); err != nil {
				return d, err
			}
		}
	}
	if err := checkRemoval(v, c.Name); err != nil {
		return d, err
	}
	if rds, err := v.NodeResources(c.Name); err != nil {
		return d, err
	} else if len(rds) > 0 && !lost {
		return d, cairn.Errorf(cairn.CodePreconditionFailed, "node %s holds replicas of %d resource(s) (%s); remove them first",
			c.Name, len(rds), strings.Join(rds[:min(len(rds), 10)], ", ")).WithDetails(map[string]any{"resources": rds})
	}
	if err := checkTopology(v, nil, c.Name); err != nil {
		return d, err
	}
	up, err := placementFor(v, nil, c.Name)
	if err != nil {
		return d, err
	}
	d = d.With(names.Event("node", c.Name), ev, nil)
	if up != nil {
		d = d.With(names.Event("cluster", up.Cluster), up, nil)
	}
	return d.With(names.Event("host", n.Spec.Host), hostChanged(cl, n.Spec.Host, c.Name, n.Spec.FailureDomain, "left"), nil), nil
}
