package nodes

import (
	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// NodeMaintenance is the body of node.evacuate, node.evict and node.restore.
type NodeMaintenance struct {
	Name   string `json:"name"`
	Reason string `json:"reason,omitempty"`
}

// maintenanceModes maps each maintenance verb to the mode it sets.
var maintenanceModes = map[string]string{
	"node.evacuate": events.MaintenanceEvacuating,
	"node.evict":    events.MaintenanceEvicted,
	"node.restore":  events.MaintenanceNone,
}

// DecideNodeMaintenance decides node.evacuate, node.evict and node.restore on the node
// (nil when it is not in the cluster): the maintenance mode the verb sets, or nil and a
// warning when the node is in it already. Refuses not_found for an unknown node and
// precondition_failed for node.evict of an online node (eviction is for a node that is
// gone; node.evacuate drains a live one).
func DecideNodeMaintenance(existing *projections.Node, verb string, c NodeMaintenance) (*events.NodeMaintenanceChanged, []string, error) {
	if existing == nil {
		return nil, nil, cairn.Errorf(cairn.CodeNotFound, "node %s is not in the cluster", c.Name).About(cairn.ObjNode)
	}
	mode := maintenanceModes[verb]
	if verb == "node.evict" && existing.Status.State == events.StateOnline {
		return nil, nil, cairn.Errorf(cairn.CodePreconditionFailed,
			"node %s is online; eviction is for a node that is gone (node.evacuate drains a live one)", c.Name).About(cairn.ObjNode)
	}
	if existing.Spec.Maintenance == mode {
		if mode == events.MaintenanceNone {
			return nil, []string{"node " + c.Name + " is neither evacuating nor evicted; nothing changed"}, nil
		}
		return nil, []string{"node " + c.Name + " is " + mode + " already; nothing changed"}, nil
	}
	return &events.NodeMaintenanceChanged{Name: c.Name, Mode: mode, Previous: existing.Spec.Maintenance, Reason: c.Reason}, nil, nil
}

// maintenanceHandlers decide the maintenance verbs, each bounded by its node's subject
// (the node's state, for node.evict, is on it too).
func maintenanceHandlers() []decide.Handler {
	var out []decide.Handler
	for verb := range maintenanceModes {
		out = append(out, decide.Handler{Verb: verb, Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c NodeMaintenance
			subject := names.Event("node", c.Name)
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) {
				subject = names.Event("node", c.Name)
				return decide.SubjectBoundary(v, subject)
			})
			if err != nil {
				return d, err
			}
			n, found, err := v.Node(c.Name)
			if err != nil {
				return d, err
			}
			ev, warnings, err := DecideNodeMaintenance(decide.Ptr(n, found), verb, c)
			return d.With(subject, ev, warnings), err
		}})
	}
	return out
}
