package resources

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/commands/replicas"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// The definition, volume and replica verbs as operations on a resource plan.

// createDefinition emits rd.created with a fresh port, and rd.properties-changed with
// its free-form properties, if any. Refuses already_exists, invalid_argument for a DRBD
// option among the properties.
func (p *resourcePlan) createDefinition(name, group string, opts drbd.Options, props map[string]string) error {
	if err := decide.FreeProperties(nil, props, nil, "properties"); err != nil {
		return err
	}
	if err := p.read(p.names.Event("rd", name)); err != nil {
		return err
	}
	if _, exists, err := p.v.ResourceDefinition(name); err != nil {
		return err
	} else if exists {
		return cairn.Errorf(cairn.CodeAlreadyExists, "resource definition %s already exists", name).About(cairn.ObjResourceDefinition)
	}
	if err := p.unclaimed(name); err != nil {
		return err
	}
	if group != "" {
		// rg.delete must not miss a definition joining the group, nor this command
		// a group deleted meanwhile.
		if err := p.read(p.names.Event("rg", group)); err != nil {
			return err
		}
	}
	if err := p.loadGroup(group); err != nil {
		return err
	}
	port, err := p.takePort()
	if err != nil {
		return err
	}
	p.rd = projections.ResourceDefinition{Name: name, ResourceGroup: group, Port: port, DRBDOptions: opts}
	p.emit(&events.ResourceDefinitionCreated{Name: name, ResourceGroup: group, Port: port, DRBDOptions: opts})
	if err := p.claimPort(port); err != nil {
		return err
	}
	if len(props) > 0 {
		p.emit(&events.DefinitionPropertiesChanged{Name: name, Set: props})
	}
	return nil
}

// freeVolume is the lowest volume number the definition does not use.
func (p *resourcePlan) freeVolume() int {
	for n := 0; ; n++ {
		if !slices.ContainsFunc(p.rd.Volumes, func(v projections.VolumeDefinition) bool { return v.Volume == n }) {
			return n
		}
	}
}

// createVolume emits vd.created with a random day-0 GI and, on a deployed definition,
// replica.volume-added for every replica: a minor on its node and, for a disk, room in
// its pool and the volume's seeds (the first disk's volume is the first, the others
// day-0 seeded on thin providers, fully synced otherwise or on a restored definition).
// Refuses already_exists for a taken number, precondition_failed when a disk's pool has
// no room or a node no free minor.
// volumeProperties sets the free-form properties of a volume created in this plan, in
// the same append (vd.create with properties). Refuses what DecidePropertiesPatch
// refuses (a DRBD option among them: properties.<key>).
func (p *resourcePlan) volumeProperties(volume int, props map[string]string) error {
	ev, _, err := decide.DecidePropertiesPatch(fmt.Sprintf("%s/%d", p.rd.Name, volume), "volume definition", nil, props, nil)
	if err != nil || ev == nil {
		return err
	}
	p.emit(&events.VolumePropertiesChanged{Resource: p.rd.Name, Volume: volume, Set: ev.Set})
	return nil
}

func (p *resourcePlan) createVolume(volume int, sizeKiB uint64) error {
	for _, v := range p.rd.Volumes {
		if v.Volume == volume {
			return cairn.Errorf(cairn.CodeAlreadyExists, "resource %s already has volume %d (%d KiB)", p.rd.Name, volume, v.SizeKiB).About(cairn.ObjVolumeDefinition)
		}
	}
	gi, err := drbd.NewDay0GI(p.rand)
	if err != nil {
		return err
	}
	p.emit(&events.VolumeDefinitionCreated{Resource: p.rd.Name, Volume: volume, SizeKiB: sizeKiB, Day0GI: gi.String()})
	p.rd.Volumes = append(p.rd.Volumes, projections.VolumeDefinition{Volume: volume, SizeKiB: sizeKiB, Day0GI: gi.String()})
	first := true
	for i := range p.rd.Replicas {
		r := &p.rd.Replicas[i]
		if err := p.claimNode(r.Node, fmt.Sprintf("volume %d of %s", volume, p.rd.Name)); err != nil {
			return err
		}
		minors, err := p.takeMinors(r.Node, 1)
		if err != nil {
			return err
		}
		ev := &events.ReplicaVolumeAdded{Resource: p.rd.Name, Node: r.Node, Volume: volume, Minor: minors[0]}
		if !r.Diskless {
			if sp, ok, err := p.v.StoragePool(r.Node, r.StoragePool); err != nil {
				return err
			} else if ok && sp.Known() && sp.FreeKiB() < sizeKiB {
				return cairn.Errorf(cairn.CodePreconditionFailed, "storage pool %s on node %s has %d KiB free; volume %d of %s needs %d KiB",
					r.StoragePool, r.Node, sp.FreeKiB(), volume, p.rd.Name, sizeKiB).
					WithDetails(map[string]any{"node": r.Node, "storage_pool": r.StoragePool, "free_kib": sp.FreeKiB(), "needed_kib": sizeKiB})
			}
			ev.Seeds, ev.FullSync, err = drbd.PlanSeeds(drbd.SeedInput{NodeID: r.NodeID, Provider: r.Provider,
				Volumes: []drbd.SeedVolume{{Number: volume, Day0GI: gi.String(), First: first}}, ForceInitialSync: p.rd.RestoredFrom != nil || p.rd.RestoredFromBackup != nil, Rand: p.rand})
			if err != nil {
				return err
			}
			first = false
		}
		p.emit(ev)
		r.Minors = append(r.Minors, events.VolumeMinor{Volume: volume, Minor: minors[0]})
	}
	return nil
}

// resizeVolume grows a volume to sizeKiB. Refuses not_found (volume), invalid_argument
// naming size_kib for a smaller size (a volume never shrinks: the data past the new end
// would be cut off), and precondition_failed naming the node and pool when a diskful
// replica's pool with a capacity has less free than the growth (pools without one take
// it, as they took the disk). The size it has is a no-op with a warning.
func (p *resourcePlan) resizeVolume(volume int, sizeKiB uint64) error {
	i := slices.IndexFunc(p.rd.Volumes, func(v projections.VolumeDefinition) bool { return v.Volume == volume })
	if i < 0 {
		return cairn.Errorf(cairn.CodeNotFound, "resource %s has no volume %d", p.rd.Name, volume).About(cairn.ObjVolumeDefinition)
	}
	have := p.rd.Volumes[i].SizeKiB
	switch {
	case sizeKiB < have:
		return cairn.InvalidField("size_kib", "size_kib %d is smaller than volume %d of %s (%d KiB): volumes only grow (a shrink would cut off the data past the new end)",
			sizeKiB, volume, p.rd.Name, have)
	case sizeKiB == have:
		p.warn("volume %d of %s already has %d KiB; nothing changed", volume, p.rd.Name, sizeKiB)
		return nil
	}
	grow := sizeKiB - have
	for _, r := range p.rd.Replicas {
		if r.Diskless || r.StoragePool == "" {
			continue
		}
		if err := p.claimNode(r.Node, fmt.Sprintf("growth of volume %d of %s", volume, p.rd.Name)); err != nil {
			return err
		}
		sp, ok, err := p.v.StoragePool(r.Node, r.StoragePool)
		if err != nil {
			return err
		}
		if ok && sp.CapacityKiB > 0 && sp.FreeKiB() < grow {
			return cairn.Errorf(cairn.CodePreconditionFailed, "storage pool %s on node %s has %d KiB free, the replica of %s needs %d KiB more to grow volume %d to %d KiB",
				r.StoragePool, r.Node, sp.FreeKiB(), p.rd.Name, grow, volume, sizeKiB).
				WithDetails(map[string]any{"node": r.Node, "storage_pool": r.StoragePool, "free_kib": sp.FreeKiB(), "needed_kib": grow})
		}
	}
	p.emit(&events.VolumeDefinitionResized{Resource: p.rd.Name, Volume: volume, SizeKiB: sizeKiB, PreviousKiB: have})
	p.rd.Volumes[i].SizeKiB = sizeKiB
	return nil
}

// deleteVolume removes a volume of a definition; on a deployed one every replica lets go
// of it first (replica.volume-removed: its agent detaches it, wipes its metadata and
// removes its backing volume). Refuses not_found for a volume the definition does not
// have, precondition_failed for the only volume of a deployed definition (delete the
// definition) and while an agent reports it Primary (naming the nodes).
func (p *resourcePlan) deleteVolume(volume int) error {
	if len(p.rd.Replicas) > 0 && slices.ContainsFunc(p.rd.Volumes, func(v projections.VolumeDefinition) bool { return v.Volume == volume }) {
		if len(p.rd.Volumes) == 1 {
			return cairn.Errorf(cairn.CodePreconditionFailed, "volume %d is the only volume of %s, which has replicas; delete the definition instead", volume, p.rd.Name).
				WithDetails(map[string]any{"in_use": true})
		}
		if err := p.refuseInUse("a volume of it is deleted"); err != nil {
			return err
		}
		for _, r := range p.rd.Replicas {
			if m, ok := r.Minor(volume); ok {
				p.emit(&events.ReplicaVolumeRemoved{Resource: p.rd.Name, Node: r.Node, Volume: volume, Minor: m})
			}
		}
	}
	for i, v := range p.rd.Volumes {
		if v.Volume == volume {
			p.emit(&events.VolumeDefinitionDeleted{Resource: p.rd.Name, Volume: volume})
			p.rd.Volumes = slices.Delete(p.rd.Volumes, i, i+1)
			return nil
		}
	}
	return cairn.Errorf(cairn.CodeNotFound, "resource %s has no volume %d", p.rd.Name, volume).About(cairn.ObjVolumeDefinition)
}

// replicaAdd adds one replica on c.Node, or autoplaces up to the place count, then
// applies the tiebreaker rule.
func (p *resourcePlan) replicaAdd(c ReplicaAdd) error {
	if len(p.rd.Volumes) == 0 {
		return cairn.Errorf(cairn.CodePreconditionFailed, "resource %s has no volumes; define them with vd.create first", p.rd.Name)
	}
	if c.Node != "" && c.Filter != nil {
		return cairn.InvalidField("filter", "a filter narrows an autoplace; replica.add with a node places on that node")
	}
	if c.Node == "" {
		if c.Diskless {
			return cairn.InvalidField("node", "node is required for a diskless replica (autoplace places disks)")
		}
		if err := p.useFilter(c.StoragePool, c.Filter); err != nil {
			return err
		}
		target := c.PlaceCount
		if target == 0 && p.group != nil {
			target = p.group.PlaceCount
		}
		if target == 0 {
			return cairn.InvalidField("place_count", "place_count is required to autoplace a replica of %s, which has no resource group", p.rd.Name)
		}
		if err := p.autoplace(target, c.ForceInitialSync, c.DRBDOptions); err != nil {
			return err
		}
		return p.tiebreaker()
	}
	if err := p.read(p.names.Event("node", c.Node)); err != nil {
		return err
	}
	cand, ok := p.candidate(c.Node)
	if !ok {
		return cairn.Errorf(cairn.CodeNotFound, "node %s is not in the cluster", c.Node).About(cairn.ObjNode)
	}
	if r, exists := p.rd.Replica(c.Node); exists && r.Tiebreaker && c.Diskless {
		// The tiebreaker becomes a diskless replica the operator wants (LINSTOR's
		// make-available on a tiebreaker's node): it stays when the tie is gone.
		p.emit(&events.ReplicaTiebreakerChanged{Resource: p.rd.Name, Node: c.Node, Tiebreaker: false,
			Reason: "wanted as a diskless replica by the operator"})
		p.warn("the tiebreaker of %s on %s is now a diskless replica of its own", p.rd.Name, c.Node)
		return nil
	} else if exists {
		kind := "diskful"
		if r.Diskless {
			kind = "diskless"
		}
		return cairn.Errorf(cairn.CodeAlreadyExists, "resource %s already has a %s replica on node %s (node id %d)", p.rd.Name, kind, c.Node, r.NodeID).About(cairn.ObjResource)
	}
	if !cand.Online {
		p.warn("node %s is offline: its agent carries the replica out when it is back", c.Node)
	}
	var pool *replicas.StoragePool
	if c.Diskless && !p.hasDisk() {
		return cairn.Errorf(cairn.CodePreconditionFailed, "resource %s has no replica with a disk yet; a diskless replica reads and writes through a diskful peer, so add one first", p.rd.Name)
	}
	if !c.Diskless {
		if !cand.Storage {
			return cairn.Errorf(cairn.CodePreconditionFailed, "node %s is not a storage node; it can only hold a diskless replica", c.Node)
		}
		sp, err := p.pickPool(c.Node, c.StoragePool)
		if err != nil {
			return err
		}
		pool = &sp
	}
	if err := p.addReplica(c.Node, pool, false, "explicit", c.ForceInitialSync, c.DRBDOptions); err != nil {
		return err
	}
	return p.tiebreaker()
}

func (p *resourcePlan) replicaRemove(c ReplicaRef) error {
	r, ok := p.rd.Replica(c.Node)
	if !ok {
		return cairn.Errorf(cairn.CodeNotFound, "resource %s has no replica on node %s", p.rd.Name, c.Node).About(cairn.ObjResource)
	}
	diskful := p.diskful()
	diskless := len(p.rd.Replicas) - diskful
	if !r.Diskless && diskful == 1 && diskless > 0 {
		return cairn.Errorf(cairn.CodePreconditionFailed,
			"replica on %s is the last one of %s with a disk and %d diskless replica(s) depend on it; remove them first", c.Node, p.rd.Name, diskless)
	}
	if r.Diskless && (c.KeepTiebreaker == nil || *c.KeepTiebreaker) {
		// Would the definition need a tiebreaker without it? Then it stays, as one.
		rest := make([]replicas.Member, 0, len(p.rd.Replicas))
		for _, m := range p.members() {
			if m.Node != c.Node {
				rest = append(rest, m)
			}
		}
		if replicas.NeedsTiebreaker(rest) {
			if r.Tiebreaker {
				p.warn("replica on %s is the tiebreaker of %s's two diskful replicas; kept", c.Node, p.rd.Name)
				return nil
			}
			p.emit(&events.ReplicaTiebreakerChanged{Resource: p.rd.Name, Node: c.Node, Tiebreaker: true,
				Reason: "removed by the operator while it broke ties between two diskful replicas; kept as tiebreaker"})
			p.warn("replica on %s breaks ties between %s's two diskful replicas; kept as its tiebreaker", c.Node, p.rd.Name)
			return nil
		}
	}
	if err := p.removeReplica(c.Node, "removed by the operator"); err != nil {
		return err
	}
	if r.Diskless && c.KeepTiebreaker != nil && !*c.KeepTiebreaker {
		// Asked not to keep one: no tiebreaker comes back in its place now (the next
		// change of the definition's replicas applies the rule again).
		if replicas.NeedsTiebreaker(p.members()) {
			p.warn("%s has two diskful replicas and no tiebreaker now (keep_tiebreaker false)", p.rd.Name)
		}
		return nil
	}
	return p.tiebreaker()
}

func (p *resourcePlan) toggleDisk(c ReplicaToggleDisk) error {
	r, ok := p.rd.Replica(c.Node)
	if !ok {
		return cairn.Errorf(cairn.CodeNotFound, "resource %s has no replica on node %s", p.rd.Name, c.Node).About(cairn.ObjResource)
	}
	if r.Diskless == c.Diskless {
		p.warn("replica of %s on %s is already %s; nothing changed", p.rd.Name, c.Node, diskWord(c.Diskless))
		return nil
	}
	if c.Diskless {
		if p.diskful() == 1 {
			return cairn.Errorf(cairn.CodePreconditionFailed, "replica on %s holds the only disk of %s; add another diskful replica first", c.Node, p.rd.Name)
		}
		p.emit(&events.ReplicaDiskToggled{Resource: p.rd.Name, Node: c.Node, Diskless: true})
		r.Diskless, r.StoragePool = true, ""
		return p.tiebreaker()
	}
	cand, _ := p.candidate(c.Node)
	if cand == nil || !cand.Storage {
		return cairn.Errorf(cairn.CodePreconditionFailed, "node %s is not a storage node; it cannot hold a disk", c.Node)
	}
	sp, err := p.pickPool(c.Node, c.StoragePool)
	if err != nil {
		return err
	}
	if err := p.giveDisk(r, sp); err != nil {
		return err
	}
	return p.tiebreaker()
}

func diskWord(diskless bool) string {
	if diskless {
		return "diskless"
	}
	return "diskful"
}

func (p *resourcePlan) activate(c ResourceActivate, active bool) error {
	if c.Node != "" {
		r, ok := p.rd.Replica(c.Node)
		if !ok {
			return cairn.Errorf(cairn.CodeNotFound, "resource %s has no replica on node %s", p.rd.Name, c.Node).About(cairn.ObjResource)
		}
		if r.Inactive == !active && !c.ReallocatePort {
			p.warn("resource %s is already %s on %s; nothing changed", p.rd.Name, activeWord(active), c.Node)
			return nil
		}
	}
	if !active {
		p.emit(&events.ResourceDeactivated{Resource: p.rd.Name, Node: c.Node})
		return nil
	}
	ev := &events.ResourceActivated{Resource: p.rd.Name, Node: c.Node}
	if c.ReallocatePort {
		port, err := p.takePort()
		if err != nil {
			return err
		}
		ev.Port, ev.PreviousPort = port, p.rd.Port
	}
	p.emit(ev)
	if c.ReallocatePort {
		return p.claimPort(ev.Port)
	}
	return nil
}

func activeWord(active bool) string {
	if active {
		return "active"
	}
	return "inactive"
}

// spawnSizes decodes rg.spawn's size_kib: one number, or one per volume.
func spawnSizes(raw json.RawMessage) ([]uint64, error) {
	var one uint64
	if err := json.Unmarshal(raw, &one); err == nil {
		return []uint64{one}, nil
	}
	var many []uint64
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, cairn.InvalidField("size_kib", "size_kib must be a size in KiB or a list of them: %v", err)
	}
	return many, nil
}

// spawn creates a definition in a group with its volumes and places it as the group
// says (rg.spawn).
func (p *resourcePlan) spawn(c ResourceGroupSpawn, sizes []uint64) error {
	if err := p.createDefinition(c.Name, c.ResourceGroup, c.DRBDOptions, c.Properties); err != nil {
		return err
	}
	for i, size := range sizes {
		if err := p.createVolume(i, size); err != nil {
			return err
		}
	}
	if err := p.autoplace(p.group.PlaceCount, false, drbd.Options{}); err != nil {
		return err
	}
	return p.tiebreaker()
}
