package resources

import (
	"slices"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/commands/replicas"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// ReplicaReplace is the body of replica.replace: the replica of Resource on Node is to
// leave (an evacuation or eviction of its node).
type ReplicaReplace struct {
	Resource string `json:"resource"`
	Node     string `json:"node"`
	// Avoid are nodes the replacement must not go to (the evacuation's per-node limit of
	// syncs).
	Avoid []string `json:"avoid,omitempty"`
}

// replicaReplace starts moving the replica on c.Node elsewhere. A diskful one gets a
// replacement: one new diskful replica autoplaced by the group's rules as if the leaving
// one were gone (so replicas-on-different lets it into the leaving one's domain), never
// on a cordoned node, marked as replacing c.Node. The leaving replica stays until the
// replacement is UpToDate; then replica.remove takes it away (the evacuation policy
// sends both), so the definition never has fewer UpToDate disks than before. A
// tiebreaker moves at once: it is removed and the tiebreaker rule places one on another
// node. Refuses not_found without such a replica and precondition_failed for a diskless
// replica that is no tiebreaker (it holds no data: replica.remove it) or when no node
// qualifies (the reasons per node in details). A replacement already under way is a
// no-op with a warning.
func (p *resourcePlan) replicaReplace(c ReplicaReplace) error {
	r, ok := p.rd.Replica(c.Node)
	if !ok {
		return cairn.Errorf(cairn.CodeNotFound, "resource %s has no replica on node %s", p.rd.Name, c.Node).About(cairn.ObjResource)
	}
	if r.Tiebreaker {
		if err := p.removeReplica(c.Node, "tiebreaker moved off "+c.Node); err != nil {
			return err
		}
		return p.tiebreaker()
	}
	if r.Diskless {
		return cairn.Errorf(cairn.CodePreconditionFailed,
			"the replica of %s on %s is diskless and no tiebreaker: it holds no data to replace (replica.remove it)", p.rd.Name, c.Node)
	}
	for _, x := range p.rd.Replicas {
		if x.Replaces == c.Node {
			p.warn("the replica of %s on %s already replaces the one on %s; nothing placed", p.rd.Name, x.Node, c.Node)
			return nil
		}
	}
	cands, err := p.candidates()
	if err != nil {
		return err
	}
	var staying []replicas.Member
	for _, m := range p.members() {
		if m.Node != c.Node {
			staying = append(staying, m)
		}
	}
	var idle []replicas.Candidate
	for _, cand := range cands {
		if slices.Contains(c.Avoid, cand.Node) {
			cand.Cordoned = "at its limit of replacements syncing at once"
		}
		if cand.Node != c.Node && !p.cfg.Busy(p.names.Event("node", cand.Node)) {
			idle = append(idle, cand)
		}
	}
	// The leaving node holds a replica: listed as a member it is never chosen, but it
	// is left out of the members so its properties rule nothing out; so it is left out
	// of the candidates instead.
	choices, err := replicas.Autoplace(p.rules(), p.rd.SizeKiB(), 1, staying, idle)
	if err != nil {
		return err
	}
	choice := choices[0]
	if x, ok := p.rd.Replica(choice.Node); ok && x.Tiebreaker {
		return cairn.Errorf(cairn.CodePreconditionFailed, "the only node that qualifies to replace the replica of %s on %s is %s, which holds its tiebreaker", p.rd.Name, c.Node, choice.Node)
	}
	p.replaces = c.Node
	defer func() { p.replaces = "" }()
	if err := p.addReplica(choice.Node, &choice.Pool, false, "replace", false, drbd.Options{}); err != nil {
		return err
	}
	return p.tiebreaker()
}

// ReplicaMigrate is the body of replica.migrate: the disk of Resource on From moves to
// Node (on StoragePool, or the pool pickPool chooses).
type ReplicaMigrate struct {
	Resource    string `json:"resource"`
	Node        string `json:"node"`
	From        string `json:"from"`
	StoragePool string `json:"storage_pool"`
}

// replicaMigrate places a diskful replica on c.Node that replaces the one on c.From
// (LINSTOR's migrate-disk): the evacuation policy removes the old one once the new one
// is UpToDate and not while it is Primary, as for an evacuation. The node is the
// operator's choice: a cordoned one is allowed. A diskless replica there gets the disk
// (LINSTOR's toggle-disk --migrate-from). Refuses not_found for an unknown node or no
// replica on c.From, already_exists when c.Node holds a disk, and
// precondition_failed for a diskless replica on c.From, a node that is no storage node
// or a pool without room. A migration of c.From already under way is a no-op with a
// warning.
func (p *resourcePlan) replicaMigrate(c ReplicaMigrate) error {
	from, ok := p.rd.Replica(c.From)
	if !ok {
		return cairn.Errorf(cairn.CodeNotFound, "resource %s has no replica on node %s", p.rd.Name, c.From).About(cairn.ObjResource)
	}
	if from.Diskless {
		return cairn.Errorf(cairn.CodePreconditionFailed, "the replica of %s on %s is diskless: it has no disk to migrate", p.rd.Name, c.From)
	}
	for _, x := range p.rd.Replicas {
		if x.Replaces == c.From {
			p.warn("the replica of %s on %s already replaces the one on %s; nothing placed", p.rd.Name, x.Node, c.From)
			return nil
		}
	}
	target, exists := p.rd.Replica(c.Node)
	if exists && !target.Diskless {
		return cairn.Errorf(cairn.CodeAlreadyExists, "resource %s already has a disk on node %s (node id %d)", p.rd.Name, c.Node, target.NodeID).About(cairn.ObjResource)
	}
	if err := p.read(p.names.Event("node", c.Node)); err != nil {
		return err
	}
	if _, err := p.candidates(); err != nil {
		return err
	}
	cand, ok := p.candidate(c.Node)
	if !ok {
		return cairn.Errorf(cairn.CodeNotFound, "node %s is not in the cluster", c.Node).About(cairn.ObjNode)
	}
	if !cand.Storage {
		return cairn.Errorf(cairn.CodePreconditionFailed, "node %s is not a storage node; it can hold no disk", c.Node)
	}
	sp, err := p.pickPool(c.Node, c.StoragePool)
	if err != nil {
		return err
	}
	if !cand.Online {
		p.warn("node %s is offline: the migration starts when its agent is back", c.Node)
	}
	p.replaces = c.From
	defer func() { p.replaces = "" }()
	if exists { // its diskless replica gets the disk (LINSTOR's toggle-disk --migrate-from)
		err = p.giveDisk(target, sp)
	} else {
		err = p.addReplica(c.Node, &sp, false, "migrate", false, drbd.Options{})
	}
	if err != nil {
		return err
	}
	return p.tiebreaker()
}

// RemoveLostReplicas decides the replica part of node.lost: every replica on node is
// removed (replica.removed; its disk's data is gone with the node), one definition at a
// time on v, reading each definition. Nothing is placed instead: no tiebreaker (each
// definition's plan would take minors from the same view, so two could pick the same
// one) and no disk; the keep-count policy and the next change of a definition's
// replicas do that. Warnings name the definitions left without a disk or a tiebreaker
// they need.
func RemoveLostReplicas(v *projections.View, names events.Names, cfg Config, node string) (decide.Decision, error) {
	rds, err := v.NodeResources(node)
	if err != nil {
		return decide.Decision{}, err
	}
	var ds []decide.Decision
	for _, name := range rds {
		p, err := newResourcePlan(v, names, cfg)
		if err == nil {
			err = p.load(name)
		}
		if err == nil {
			err = p.removeReplica(node, "node "+node+" lost")
		}
		if err != nil {
			return decide.Merge(append(ds, p.decision())...), err
		}
		switch {
		case !p.hasDisk() && len(p.rd.Replicas) > 0:
			p.warn("%s has no disk left: its diskless replicas have no data", name)
		case !p.hasDisk():
			p.warn("%s has no replica left", name)
		case replicas.NeedsTiebreaker(p.members()):
			p.warn("%s has two disks and no tiebreaker now", name)
		}
		ds = append(ds, p.decision())
	}
	return decide.Merge(ds...), nil
}
