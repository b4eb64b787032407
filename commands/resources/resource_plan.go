package resources

import (
	"crypto/rand"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/commands/replicas"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backing"
)

// The resource plan: the state of one definition a command decides on, the claims it
// makes and the replica operations every verb builds on.

// resourcePlan decides one command on one resource definition: it holds the state read
// from the view, applies each decided event to it, so later decisions of the same
// command see earlier ones (a tiebreaker after an autoplace), and collects the events.
type resourcePlan struct {
	v       *projections.View
	names   events.Names
	cfg     Config
	rand    io.Reader
	cluster projections.Cluster
	rd      projections.ResourceDefinition
	group   *projections.ResourceGroup
	cands   []replicas.Candidate
	byNode  map[string]int // index into cands
	d       decide.Decision
	// replaces is the node whose replica the replica being added replaces
	// (replica.replace), "" otherwise.
	replaces string
	// reads is the decision's read set: every subject whose state it depends on.
	reads *decide.Reads
	// claims are the node.claimed and port.claimed events, appended after the others.
	claims []events.Draft
	// restore, during rd.restore, gives the disks added restore seeds and the snapshot
	// to start from.
	restore *restorePlan
	// restoring, during rd.restore, is the snapshot restored from: a clone's own restore
	// may create the target the clone claimed.
	restoring *drbd.SnapshotRef
	// filter, during an autoplace with a filter, narrows the group's rules.
	filter *replicas.Rules
}

// restorePlan is what the disks of a definition restored from a snapshot share.
type restorePlan struct {
	from drbd.SnapshotRef
	// backup, for backup.restore, is the backup the disks are filled from (from unused).
	backup  *drbd.BackupRef
	current map[int]drbd.UUID // by volume: the current UUID of every restored copy
}

// newResourcePlan starts a plan on the view. It always returns a plan, whose decision
// carries the reads made so far even when it also returns a refusal.
func newResourcePlan(v *projections.View, names events.Names, cfg Config) (*resourcePlan, error) {
	p := &resourcePlan{v: v, names: names, cfg: cfg, rand: rand.Reader, reads: decide.NewReads(v, names)}
	// Unchecked: see below (the failure-domain rule never changes).
	cl, ok, err := v.Unchecked().Cluster()
	if err != nil {
		return p, err
	}
	if !ok {
		// The refusal depends on every cluster subject: cluster.create moves it.
		if err := p.reads.Aggregate("cluster"); err != nil {
			return p, err
		}
		return p, cairn.Errorf(cairn.CodePreconditionFailed, "there is no cluster yet: run cluster.create first")
	}
	// Not a read to check: what a plan uses of the cluster (its failure-domain rule) is
	// set at cluster.create and never changes.
	p.cluster = cl
	return p, nil
}

// read records that the decision depends on subject as the view has it.
func (p *resourcePlan) read(subject string) error { return p.reads.Subject(subject) }

// decision is the plan's events with its read set as the boundary.
func (p *resourcePlan) decision() decide.Decision {
	d := p.d
	if len(d.Events) > 0 {
		d.Events = append(slices.Clip(d.Events), p.claims...)
	}
	return p.reads.Decide(d)
}

// claimNode makes the command's append conditional on node's subject and records the
// claim there (node.claimed, once per node and command): two commands taking minors or
// pool room on one node conflict, on different nodes they never meet.
func (p *resourcePlan) claimNode(node, reason string) error {
	subject := p.names.Event("node", node)
	for _, d := range p.claims {
		if d.Subject == subject {
			return nil
		}
	}
	if err := p.read(subject); err != nil {
		return err
	}
	p.claims = append(p.claims, events.Draft{Subject: subject, Payload: &events.NodeClaimed{Name: node, Resource: p.rd.Name, Reason: reason}})
	return nil
}

// candidates are every node as placement sees it, read once per plan. Not a read to
// check: a node added or changed meanwhile only means the placement could have chosen
// otherwise; the nodes actually placed on are claimed (claimNode).
func (p *resourcePlan) candidates() ([]replicas.Candidate, error) {
	if p.byNode != nil {
		return p.cands, nil
	}
	p.byNode = map[string]int{}
	v := p.v.Unchecked()
	nodes, err := v.Nodes()
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		props := map[string]string{replicas.PropNode: n.Spec.Name, replicas.PropHost: n.Spec.Host}
		if n.Spec.FailureDomain != "" {
			props[replicas.PropFailureDomain] = n.Spec.FailureDomain
		}
		if n.Spec.PhysicalLabel != "" {
			props[replicas.PropPhysical] = n.Spec.PhysicalLabel
		}
		for k, val := range n.Spec.Properties {
			props[k] = val
		}
		p.byNode[n.Spec.Name] = len(p.cands)
		c := replicas.Candidate{Node: n.Spec.Name, Online: n.Status.State == events.StateOnline,
			Storage: n.Spec.Role == events.RoleStorage, Domain: n.Spec.FailureDomain, Props: props,
			Cordoned: replicas.CordonReason(n.Spec.Properties, n.Spec.Maintenance)}
		pools, err := v.NodeStoragePools(n.Spec.Name)
		if err != nil {
			return nil, err
		}
		for _, sp := range pools {
			pool := replicas.StoragePool{Name: sp.Name, Provider: sp.Provider, Pool: sp.Pool, FreeKiB: sp.FreeKiB(),
				TotalKiB: sp.TotalKiB(), NoCapacity: !sp.Known()}
			if rep, ok, err := v.StoragePoolReport(n.Spec.Name, sp.Name); err != nil {
				return nil, err
			} else if ok && rep.Error != "" {
				pool.Unusable = rep.Error
			}
			c.Pools = append(c.Pools, pool)
		}
		p.cands = append(p.cands, c)
	}
	return p.cands, nil
}

// load reads the definition (not_found when it does not exist) and its group.
func (p *resourcePlan) load(name string) error {
	if err := p.read(p.names.Event("rd", name)); err != nil {
		return err
	}
	rd, ok, err := p.v.ResourceDefinition(name)
	if err != nil {
		return err
	}
	if !ok {
		return cairn.Errorf(cairn.CodeNotFound, "resource definition %s does not exist", name).About(cairn.ObjResourceDefinition)
	}
	p.rd = rd
	// Not a read to check: a group is never deleted while a definition is in it, and
	// a concurrent rg.modify only orders before or after this command.
	return p.loadGroup(rd.ResourceGroup)
}

func (p *resourcePlan) loadGroup(name string) error {
	if name == "" {
		return nil
	}
	// Unchecked: see load; a command that creates a definition in the group reads
	// the group itself (rd.create, rg.spawn).
	g, ok, err := p.v.Unchecked().ResourceGroup(name)
	if err != nil {
		return err
	}
	if !ok {
		return cairn.Errorf(cairn.CodeNotFound, "resource group %s does not exist", name).About(cairn.ObjResourceGroup)
	}
	p.group = &g
	return nil
}

// deleteDefinition deletes a definition with its replicas (diskless first, then the
// disks), its volumes and its port. The snapshots of its clones that serve nothing any
// more go with it (cloneLeftovers). Refuses precondition_failed while it has other
// snapshots (naming them) or an agent reports it Primary (naming the nodes).
func (p *resourcePlan) deleteDefinition() error {
	leftovers, err := p.cloneLeftovers()
	if err != nil {
		return err
	}
	var names []string
	for _, s := range p.rd.Snapshots {
		if !slices.Contains(leftovers, s.Name) {
			names = append(names, s.Name)
		}
	}
	if len(names) > 0 {
		return cairn.Errorf(cairn.CodePreconditionFailed, "resource definition %s has snapshots (%s); delete them first (rd.snapshot-delete)",
			p.rd.Name, strings.Join(names, ", ")).WithDetails(map[string]any{"snapshots": names})
	}
	for _, name := range leftovers {
		if err := p.deleteSnapshot(name); err != nil {
			return err
		}
	}
	if err := p.refuseInUse("it is deleted"); err != nil {
		return err
	}
	// Its replicas go with it, in the same append: diskless ones first, then the disks.
	var nodes []string
	for _, diskless := range []bool{true, false} {
		for _, r := range slices.Clone(p.rd.Replicas) {
			if r.Diskless == diskless {
				nodes = append(nodes, r.Node)
				if err := p.removeReplica(r.Node, "definition deleted"); err != nil {
					return err
				}
			}
		}
	}
	if len(nodes) > 0 {
		p.warn("resource definition %s was deleted with its %d replica(s), on %s (torn down there)", p.rd.Name, len(nodes), strings.Join(nodes, ", "))
	}
	p.emit(&events.ResourceDefinitionDeleted{Name: p.rd.Name, Port: p.rd.Port, Volumes: len(p.rd.Volumes)})
	return nil
}

// cloneLeftovers names the snapshots of the definition's clones that nothing needs any
// more: one that failed (its clone never started), or one restored into its target
// where that target is gone (its disks were made from it, or never will be). The clean-up
// policy deletes those too, a moment later; a client that deletes a clone and then its
// source at once (linstor-csi under csi-sanity) must not find the source refused for
// them. A clone snapshot whose target exists may still be what its disks are made from:
// it stays, and blocks. Reads each target's subject.
func (p *resourcePlan) cloneLeftovers() ([]string, error) {
	var out []string
	for _, s := range p.rd.Snapshots {
		if s.CloneTo == "" {
			continue
		}
		if s.Phase == projections.SnapshotFailed {
			out = append(out, s.Name)
			continue
		}
		if !s.Cloned {
			continue
		}
		if err := p.read(p.names.Event("rd", s.CloneTo)); err != nil {
			return nil, err
		}
		if _, exists, err := p.v.ResourceDefinition(s.CloneTo); err != nil {
			return nil, err
		} else if !exists {
			out = append(out, s.Name)
		}
	}
	return out, nil
}

// refuseInUse refuses precondition_failed while an agent reports the definition Primary
// somewhere (naming the nodes): what stops using it must go first.
func (p *resourcePlan) refuseInUse(before string) error {
	observed, err := p.v.ResourceStatus(p.rd.Name)
	if err != nil {
		return err
	}
	var primaries []string
	for node, st := range observed {
		if _, has := p.rd.Replica(node); has && st.Role == "Primary" {
			primaries = append(primaries, node)
		}
	}
	if len(primaries) > 0 {
		slices.Sort(primaries)
		return cairn.Errorf(cairn.CodePreconditionFailed, "resource definition %s is in use (Primary on %s); stop what uses it before %s",
			p.rd.Name, strings.Join(primaries, ", "), before).WithDetails(map[string]any{"nodes": primaries})
	}
	return nil
}

func (p *resourcePlan) emit(payload events.Payload) {
	p.d = p.d.With(p.names.Event("rd", p.rd.Name), payload, nil)
}

func (p *resourcePlan) warn(format string, args ...any) {
	p.d.Warnings = append(p.d.Warnings, fmt.Sprintf(format, args...))
}

func (p *resourcePlan) candidate(node string) (*replicas.Candidate, bool) {
	if _, err := p.candidates(); err != nil {
		return nil, false
	}
	i, ok := p.byNode[node]
	if !ok {
		return nil, false
	}
	return &p.cands[i], true
}

// members are the definition's replicas as the placement rules see them.
func (p *resourcePlan) members() []replicas.Member {
	out := make([]replicas.Member, 0, len(p.rd.Replicas))
	for _, r := range p.rd.Replicas {
		m := replicas.Member{Node: r.Node, Diskless: r.Diskless, Tiebreaker: r.Tiebreaker}
		if c, ok := p.candidate(r.Node); ok {
			m.Domain, m.Props = c.Domain, c.Props
		}
		out = append(out, m)
	}
	return out
}

// rules are the placement rules: the group's, with what an autoplace's filter names in
// their place (LINSTOR's autoplace select_filter overrides its group's, field by field).
func (p *resourcePlan) rules() replicas.Rules {
	r := replicas.Rules{SpreadDomains: p.cluster.FailureDomains}
	if p.group != nil {
		r.StoragePool, r.Provider = p.group.StoragePool, p.group.Provider
		r.ReplicasOnSame, r.ReplicasOnDifferent = p.group.ReplicasOnSame, p.group.ReplicasOnDifferent
	}
	if f := p.filter; f != nil {
		r.Nodes, r.Excluded, r.AtMostPerValue = f.Nodes, f.Excluded, f.AtMostPerValue
		if f.StoragePool != "" || len(f.StoragePools) > 0 {
			r.StoragePool, r.StoragePools = f.StoragePool, f.StoragePools
		}
		if len(f.Providers) > 0 {
			r.Provider, r.Providers = "", f.Providers
		}
		if len(f.ReplicasOnSame) > 0 {
			r.ReplicasOnSame = f.ReplicasOnSame
		}
		if len(f.ReplicasOnDifferent) > 0 {
			r.ReplicasOnDifferent = f.ReplicasOnDifferent
		}
	}
	return r
}

// useFilter narrows this autoplace by its storage pool and filter f (either may be
// empty). not_with reads each named definition's subject: its replicas' nodes are
// passed over (a name that is no definition excludes nothing).
func (p *resourcePlan) useFilter(pool string, f *PlacementFilter) error {
	if pool == "" && f == nil {
		return nil
	}
	if f == nil {
		f = &PlacementFilter{}
	}
	r := &replicas.Rules{StoragePool: pool, Nodes: f.Nodes, StoragePools: f.StoragePools, Providers: f.Providers,
		ReplicasOnSame: f.ReplicasOnSame, ReplicasOnDifferent: f.ReplicasOnDifferent, AtMostPerValue: f.XReplicasOnDifferent}
	for _, name := range f.NotWith {
		if err := p.read(p.names.Event("rd", name)); err != nil {
			return err
		}
		other, ok, err := p.v.ResourceDefinition(name)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		for _, rep := range other.Replicas {
			if r.Excluded == nil {
				r.Excluded = map[string]string{}
			}
			if r.Excluded[rep.Node] == "" {
				r.Excluded[rep.Node] = "holds a replica of " + name + " (not_with)"
			}
		}
	}
	p.filter = r
	return nil
}

// pickPool chooses the storage pool of node for a new disk: the named one, else the
// group's, else the matching pool with most free space; refuses when none fits or the
// node's agent reports it cannot use them.
func (p *resourcePlan) pickPool(node, named string) (replicas.StoragePool, error) {
	c, _ := p.candidate(node)
	rules := p.rules()
	if named != "" {
		rules.StoragePool = named
	}
	need := p.rd.SizeKiB()
	var matching []replicas.StoragePool
	for _, sp := range c.Pools {
		if (rules.StoragePool == "" || sp.Name == rules.StoragePool) && (rules.Provider == "" || sp.Provider == rules.Provider) {
			matching = append(matching, sp)
		}
	}
	if len(matching) == 0 {
		what := "any storage pool"
		if rules.StoragePool != "" {
			what = "storage pool " + rules.StoragePool
		}
		if rules.Provider != "" {
			what += " of provider " + string(rules.Provider)
		}
		return replicas.StoragePool{}, cairn.Errorf(cairn.CodePreconditionFailed, "node %s has no %s for a disk of %s", node, what, p.rd.Name)
	}
	usable := matching[:0:0]
	for _, sp := range matching {
		if sp.Unusable == "" {
			usable = append(usable, sp)
		}
	}
	if len(usable) == 0 {
		return replicas.StoragePool{}, cairn.Errorf(cairn.CodePreconditionFailed, "the agent of node %s cannot use storage pool %s: %s", node, matching[0].Name, matching[0].Unusable).
			WithDetails(map[string]any{"node": node, "storage_pool": matching[0].Name})
	}
	matching = usable
	best := matching[0]
	for _, sp := range matching[1:] {
		if sp.FreeKiB > best.FreeKiB {
			best = sp
		}
	}
	if best.FreeKiB < need && best.NoCapacity {
		// The operator's choice: autoplace never picks a pool of unknown size.
		p.warn("storage pool %s on node %s has no capacity yet (its agent has not reported one, sp.modify gave none): placed on it by your choice, unchecked", best.Name, node)
		return best, nil
	}
	if best.FreeKiB < need {
		return replicas.StoragePool{}, cairn.Errorf(cairn.CodePreconditionFailed,
			"storage pool %s on node %s has %d KiB free; %s needs %d KiB", best.Name, node, best.FreeKiB, p.rd.Name, need).
			WithDetails(map[string]any{"node": node, "storage_pool": best.Name, "free_kib": best.FreeKiB, "needed_kib": need})
	}
	return best, nil
}

// addReplica allocates a node id and minors and decides the seeding plan of a new
// replica, then emits replica.added. pool is nil for a diskless replica.
func (p *resourcePlan) addReplica(node string, pool *replicas.StoragePool, tiebreaker bool, reason string, force bool, opts drbd.Options) error {
	if err := p.claimNode(node, "replica of "+p.rd.Name+" ("+reason+")"); err != nil {
		return err
	}
	used := make([]int, 0, len(p.rd.Replicas))
	for _, r := range p.rd.Replicas {
		used = append(used, r.NodeID)
	}
	id, err := replicas.NodeID(p.rd.Name, used)
	if err != nil {
		return err
	}
	minors, err := p.takeMinors(node, len(p.rd.Volumes))
	if err != nil {
		return err
	}
	ev := &events.ReplicaAdded{Resource: p.rd.Name, Node: node, NodeID: id, Diskless: pool == nil,
		Tiebreaker: tiebreaker, DRBDOptions: opts, Reason: reason, Replaces: p.replaces}
	for i, vol := range p.rd.Volumes {
		ev.Minors = append(ev.Minors, events.VolumeMinor{Volume: vol.Volume, Minor: minors[i]})
	}
	if pool != nil {
		ev.StoragePool, ev.Provider, ev.Pool = pool.Name, pool.Provider, pool.Pool
		if p.restore != nil {
			if p.restore.backup != nil {
				ev.RestoreBackup, ev.Reason = p.restore.backup, "restore"
			} else {
				from := p.restore.from
				ev.RestoreFrom, ev.Reason = &from, "restore"
			}
			ev.Seeds, err = drbd.PlanRestoreSeeds(id, p.restore.current)
		} else {
			// A restored definition's data came from a snapshot, not from writes since
			// day 0: a later disk gets a full sync.
			ev.Seeds, ev.FullSync, err = p.seeds(id, pool.Provider, !p.hasDisk(), force || p.rd.RestoredFrom != nil || p.rd.RestoredFromBackup != nil)
		}
		if err != nil {
			return err
		}
		c, _ := p.candidate(node)
		for i := range c.Pools {
			if c.Pools[i].Name == pool.Name {
				c.Pools[i].FreeKiB -= min(c.Pools[i].FreeKiB, p.rd.SizeKiB())
			}
		}
	}
	p.emit(ev)
	p.rd.Replicas = append(p.rd.Replicas, projections.Replica{Node: node, NodeID: id, Minors: ev.Minors,
		Diskless: ev.Diskless, Tiebreaker: tiebreaker, StoragePool: ev.StoragePool, Provider: ev.Provider, Pool: ev.Pool,
		RestoreFrom: ev.RestoreFrom, RestoreBackup: ev.RestoreBackup, Replaces: ev.Replaces})
	return nil
}

// hasDisk reports whether any replica of the definition has a disk.
func (p *resourcePlan) hasDisk() bool { return p.diskful() > 0 }

// diskful counts the definition's replicas with a disk.
func (p *resourcePlan) diskful() int {
	n := 0
	for _, r := range p.rd.Replicas {
		if !r.Diskless {
			n++
		}
	}
	return n
}

// takeMinors hands out n minors on node from the configured range. A node appears once
// per definition, so minors taken earlier in the same command are on other nodes.
func (p *resourcePlan) takeMinors(node string, n int) ([]int, error) {
	st, err := p.v.MinorAllocator(node, p.cfg.Minors.Min, n)
	if err != nil {
		return nil, err
	}
	return replicas.Take(replicas.Pool(st), p.cfg.Minors, n, "minor on node "+node)
}

// seeds plans the set-gi calls of a new disk with node id id (see drbd.PlanSeeds).
// first is set when no other replica holds data: the disk is the volume's first.
func (p *resourcePlan) seeds(id int, provider backing.Provider, first, force bool) ([]drbd.Seed, bool, error) {
	vols := make([]drbd.SeedVolume, 0, len(p.rd.Volumes))
	for _, v := range p.rd.Volumes {
		vols = append(vols, drbd.SeedVolume{Number: v.Volume, Day0GI: v.Day0GI, First: first})
	}
	return drbd.PlanSeeds(drbd.SeedInput{NodeID: id, Provider: provider, Volumes: vols, ForceInitialSync: force, Rand: p.rand})
}

// tiebreaker applies the tiebreaker rule after the command's other changes.
func (p *resourcePlan) tiebreaker() error {
	cands, err := p.candidates()
	if err != nil {
		return err
	}
	plan := replicas.PlanTiebreaker(p.members(), cands)
	switch {
	case plan.Add != "":
		return p.addReplica(plan.Add, nil, true, "tiebreaker", false, drbd.Options{})
	case plan.Remove != "":
		return p.removeReplica(plan.Remove, "tiebreaker no longer needed")
	case plan.Warning != "":
		p.warn("%s", plan.Warning)
	}
	return nil
}

func (p *resourcePlan) removeReplica(node, reason string) error {
	r, ok := p.rd.Replica(node)
	if !ok {
		return cairn.Errorf(cairn.CodeNotFound, "resource %s has no replica on node %s", p.rd.Name, node).About(cairn.ObjResource)
	}
	p.emit(&events.ReplicaRemoved{Resource: p.rd.Name, Node: node, NodeID: r.NodeID, Minors: r.Minors, Reason: reason})
	if !r.Diskless {
		if c, ok := p.candidate(node); ok {
			for i := range c.Pools {
				if c.Pools[i].Name == r.StoragePool {
					c.Pools[i].FreeKiB += p.rd.SizeKiB()
				}
			}
		}
	}
	for i := range p.rd.Replicas {
		if p.rd.Replicas[i].Node == node {
			p.rd.Replicas = append(p.rd.Replicas[:i], p.rd.Replicas[i+1:]...)
			break
		}
	}
	return nil
}

// autoplace adds diskful replicas until there are target of them.
func (p *resourcePlan) autoplace(target int, force bool, opts drbd.Options) error {
	diskful := p.diskful()
	if diskful >= target {
		p.warn("resource %s already has %d diskful replica(s) (place count %d); nothing placed", p.rd.Name, diskful, target)
		return nil
	}
	cands, err := p.candidates()
	if err != nil {
		return err
	}
	// Nodes another command of this process is placing on right now come last: taken
	// only when the placement needs them (each claim would conflict with the other).
	var idle []replicas.Candidate
	for _, c := range cands {
		if !p.cfg.Busy(p.names.Event("node", c.Node)) {
			idle = append(idle, c)
		}
	}
	choices, err := replicas.Autoplace(p.rules(), p.rd.SizeKiB(), target-diskful, p.members(), idle)
	if err != nil && len(idle) < len(cands) {
		choices, err = replicas.Autoplace(p.rules(), p.rd.SizeKiB(), target-diskful, p.members(), cands)
	}
	if cairn.ErrorCode(err) == cairn.CodePreconditionFailed {
		// Short of nodes: the tiebreaker's node may take a disk (LINSTOR's tiebreaker
		// takeover). Only then: a new node's disk on a thin pool starts at day 0 and syncs
		// what was written since, where the tiebreaker's gets a full sync.
		var placed []replicas.Member
		for _, m := range p.members() {
			if !m.Tiebreaker {
				placed = append(placed, m)
			}
		}
		if len(placed) < len(p.members()) {
			if again, err2 := replicas.Autoplace(p.rules(), p.rd.SizeKiB(), target-diskful, placed, cands); err2 == nil {
				choices, err = again, nil
			}
		}
	}
	if err != nil {
		return err
	}
	for _, c := range choices {
		if r, ok := p.rd.Replica(c.Node); ok && r.Tiebreaker {
			if err := p.giveDisk(r, c.Pool); err != nil {
				return err
			}
			continue
		}
		if err := p.addReplica(c.Node, &c.Pool, false, "autoplace", force, opts); err != nil {
			return err
		}
	}
	return nil
}

// giveDisk turns diskless replica r into a diskful one on pool. A diskless replica
// holds nothing: it gets fresh metadata and a full sync, never a seed that could skip
// data its peers hold.
func (p *resourcePlan) giveDisk(r *projections.Replica, sp replicas.StoragePool) error {
	if err := p.claimNode(r.Node, "disk for the replica of "+p.rd.Name); err != nil {
		return err
	}
	p.emit(&events.ReplicaDiskToggled{Resource: p.rd.Name, Node: r.Node, Diskless: false,
		StoragePool: sp.Name, Provider: sp.Provider, Pool: sp.Pool, FullSync: true, Replaces: p.replaces})
	r.Diskless, r.Tiebreaker, r.StoragePool, r.Provider, r.Pool = false, false, sp.Name, sp.Provider, sp.Pool
	r.Replaces = p.replaces
	if c, ok := p.candidate(r.Node); ok {
		for i := range c.Pools {
			if c.Pools[i].Name == sp.Name {
				c.Pools[i].FreeKiB -= min(c.Pools[i].FreeKiB, p.rd.SizeKiB())
			}
		}
	}
	return nil
}

// claimPort makes the append conditional on the port's subject and records the claim
// there (port.claimed): two commands that picked the same free port conflict.
func (p *resourcePlan) claimPort(port int) error {
	subject := p.names.Event("port", strconv.Itoa(port))
	if err := p.read(subject); err != nil {
		return err
	}
	p.claims = append(p.claims, events.Draft{Subject: subject, Payload: &events.PortClaimed{Port: port, Resource: p.rd.Name}})
	return nil
}

// takePort picks the lowest free port no other command of this process is about to
// claim (the lowest free one when all of the first few are).
func (p *resourcePlan) takePort() (int, error) {
	const choices = 64
	// Unchecked: the port chosen is claimed on its own subject (claimPort), which is
	// what keeps two definitions off one port; the rest of the allocator is advice.
	st, err := p.v.Unchecked().PortAllocator(p.cfg.Ports.Min, choices)
	if err != nil {
		return 0, err
	}
	free := replicas.Lowest(replicas.Pool(st), p.cfg.Ports, choices)
	if len(free) == 0 {
		_, err := replicas.Take(replicas.Pool(st), p.cfg.Ports, 1, "TCP port")
		return 0, err
	}
	for _, port := range free {
		if !p.cfg.Busy(p.names.Event("port", strconv.Itoa(port))) {
			return port, nil
		}
	}
	return free[0], nil
}
