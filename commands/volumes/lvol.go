// Package volumes decides the logical volume verbs (lvol.create, lvol.delete) and their
// snapshots (snapshot.create, snapshot.delete).
package volumes

import (
	"errors"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// LvolCreate is the body of lvol.create.
type LvolCreate struct {
	Name    string `json:"name"`
	Node    string `json:"node"`
	SizeKiB int64  `json:"size_kib"`
}

// SnapshotCreate is the body of snapshot.create.
type SnapshotCreate struct {
	Name string `json:"name"`
	Lvol string `json:"lvol"`
}

// DecideLvolCreate places a logical volume on a node. Refuses with already_exists for a
// taken name, not_found for an unknown node, precondition_failed for a dedicated
// secondary node (it holds failover paths, not volumes).
func DecideLvolCreate(existing *projections.Lvol, node *projections.Node, c LvolCreate) (*events.LvolCreated, error) {
	if existing != nil {
		return nil, cairn.Errorf(cairn.CodeAlreadyExists, "logical volume %s already exists on node %s", existing.Name, existing.Node)
	}
	if node == nil {
		return nil, cairn.Errorf(cairn.CodeNotFound, "node %s is not in the cluster", c.Node).About(cairn.ObjNode)
	}
	if node.Spec.Role != events.RoleStorage {
		return nil, cairn.Errorf(cairn.CodePreconditionFailed, "node %s is a dedicated %s node; logical volumes go on storage nodes", c.Node, node.Spec.Role)
	}
	return &events.LvolCreated{Name: c.Name, Node: c.Node, SizeKiB: c.SizeKiB}, nil
}

// DecideLvolDelete removes a logical volume. Refuses with not_found, or
// precondition_failed while it has snapshots.
func DecideLvolDelete(existing *projections.Lvol, c decide.NameOnly) (*events.LvolDeleted, error) {
	if existing == nil {
		return nil, cairn.Errorf(cairn.CodeNotFound, "logical volume %s does not exist", c.Name)
	}
	if existing.Snapshots > 0 {
		return nil, cairn.Errorf(cairn.CodePreconditionFailed, "logical volume %s has %d snapshot(s); delete them first", c.Name, existing.Snapshots)
	}
	return &events.LvolDeleted{Name: c.Name, Node: existing.Node}, nil
}

// DecideSnapshotCreate snapshots a logical volume. Refuses with already_exists or
// not_found (the volume).
func DecideSnapshotCreate(existing *projections.Snapshot, lvol *projections.Lvol, c SnapshotCreate) (*events.SnapshotCreated, error) {
	if existing != nil {
		return nil, cairn.Errorf(cairn.CodeAlreadyExists, "snapshot %s already exists (of %s)", existing.Name, existing.Lvol)
	}
	if lvol == nil {
		return nil, cairn.Errorf(cairn.CodeNotFound, "logical volume %s does not exist", c.Lvol)
	}
	return &events.SnapshotCreated{Name: c.Name, Lvol: c.Lvol, Node: lvol.Node}, nil
}

// DecideSnapshotDelete removes a snapshot. Refuses with not_found.
func DecideSnapshotDelete(existing *projections.Snapshot, c decide.NameOnly) (*events.SnapshotDeleted, error) {
	if existing == nil {
		return nil, cairn.Errorf(cairn.CodeNotFound, "snapshot %s does not exist", c.Name)
	}
	return &events.SnapshotDeleted{Name: c.Name, Lvol: existing.Lvol, Node: existing.Node}, nil
}

// Handlers decide the logical volume and snapshot verbs. lvol.create reads its
// name and its node and claims the node (node.remove must see the volume); a snapshot
// reads its volume (lvol.delete must not leave it behind).
func Handlers() []decide.Handler {
	return []decide.Handler{
		{Verb: "lvol.create", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c LvolCreate
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			r := decide.NewReads(v, names)
			if err := errors.Join(r.Of("lvol", c.Name), r.Of("node", c.Node)); err != nil {
				return decide.Decision{}, err
			}
			l, lok, err := v.Lvol(c.Name)
			if err != nil {
				return r.Decide(decide.Decision{}), err
			}
			n, nok, err := v.Node(c.Node)
			if err != nil {
				return r.Decide(decide.Decision{}), err
			}
			ev, err := DecideLvolCreate(decide.Ptr(l, lok), decide.Ptr(n, nok), c)
			d := decide.Decision{}.With(names.Event("lvol", c.Name), ev, nil)
			if err == nil {
				d = d.With(names.Event("node", c.Node), &events.NodeClaimed{Name: c.Node, Resource: c.Name, Reason: "logical volume " + c.Name}, nil)
			}
			return r.Decide(d), err
		}},
		{Verb: "lvol.delete", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c decide.NameOnly
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			r := decide.NewReads(v, names)
			if err := r.Of("lvol", c.Name); err != nil {
				return decide.Decision{}, err
			}
			l, ok, err := v.Lvol(c.Name)
			if err != nil {
				return r.Decide(decide.Decision{}), err
			}
			ev, err := DecideLvolDelete(decide.Ptr(l, ok), c)
			return r.Decide(decide.Decision{}.With(names.Event("lvol", c.Name), ev, nil)), err
		}},
		{Verb: "snapshot.create", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c SnapshotCreate
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			r := decide.NewReads(v, names)
			if err := errors.Join(r.Of("snapshot", c.Name), r.Of("lvol", c.Lvol)); err != nil {
				return decide.Decision{}, err
			}
			s, sok, err := v.Snapshot(c.Name)
			if err != nil {
				return r.Decide(decide.Decision{}), err
			}
			l, lok, err := v.Lvol(c.Lvol)
			if err != nil {
				return r.Decide(decide.Decision{}), err
			}
			ev, err := DecideSnapshotCreate(decide.Ptr(s, sok), decide.Ptr(l, lok), c)
			return r.Decide(decide.Decision{}.With(names.Event("snapshot", c.Name), ev, nil)), err
		}},
		{Verb: "snapshot.delete", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c decide.NameOnly
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			r := decide.NewReads(v, names)
			if err := r.Of("snapshot", c.Name); err != nil {
				return decide.Decision{}, err
			}
			s, ok, err := v.Snapshot(c.Name)
			if err != nil {
				return r.Decide(decide.Decision{}), err
			}
			ev, err := DecideSnapshotDelete(decide.Ptr(s, ok), c)
			return r.Decide(decide.Decision{}.With(names.Event("snapshot", c.Name), ev, nil)), err
		}},
	}
}
