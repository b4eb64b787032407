package commands

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/replicas"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
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
		Provider            *drbd.Provider    `json:"provider,omitempty"`
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
	// VolumeDefinitionCreate is the body of vd.create.
	VolumeDefinitionCreate struct {
		Resource string `json:"resource"`
		Volume   int    `json:"volume"`
		SizeKiB  uint64 `json:"size_kib"`
	}
	// VolumeDefinitionResize is the body of vd.resize.
	VolumeDefinitionResize = VolumeDefinitionCreate
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
	// ResourceDefinitionDelete is the body of rd.delete.
	ResourceDefinitionDelete struct {
		Name string `json:"name"`
	}
	// ResourceModify is the body of rd.modify.
	ResourceModify struct {
		Name            string            `json:"name"`
		DRBDOptions     drbd.Options      `json:"drbd_options"`
		Unset           []string          `json:"unset"`
		Properties      map[string]string `json:"properties"`
		UnsetProperties []string          `json:"unset_properties"`
	}
	// ReplicaRef is the body of replica.remove.
	ReplicaRef struct {
		Resource string `json:"resource"`
		Node     string `json:"node"`
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

// resourcePlan decides one command on one resource definition: it holds the state read
// from the view, applies each decided event to it, so later decisions of the same
// command see earlier ones (a tiebreaker after an autoplace), and collects the events.
type resourcePlan struct {
	v       *projections.View
	names   events.Names
	opts    Options
	rand    io.Reader
	cluster projections.Cluster
	rd      projections.ResourceDefinition
	group   *projections.ResourceGroup
	cands   []replicas.Candidate
	byNode  map[string]int // index into cands
	d       Decision
	// reads is the decision's read set: every subject whose state it depends on.
	reads *reads
	// claims are the node.claimed and port.claimed events, appended after the others.
	claims []events.Draft
	// restore, during rd.restore, gives the disks added restore seeds and the snapshot
	// to start from.
	restore *restorePlan
}

// restorePlan is what the disks of a definition restored from a snapshot share.
type restorePlan struct {
	from    drbd.SnapshotRef
	current map[int]drbd.UUID // by volume: the current UUID of every restored copy
}

// newResourcePlan starts a plan on the view. It always returns a plan, whose decision
// carries the reads made so far even when it also returns a refusal.
func newResourcePlan(v *projections.View, names events.Names, opts Options) (*resourcePlan, error) {
	p := &resourcePlan{v: v, names: names, opts: opts, rand: rand.Reader, reads: newReads(v, names)}
	cl, ok, err := v.Cluster()
	if err != nil {
		return p, err
	}
	if !ok {
		// The refusal depends on every cluster subject: cluster.create moves it.
		if err := p.reads.aggregate("cluster"); err != nil {
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
func (p *resourcePlan) read(subject string) error { return p.reads.subject(subject) }

// decision is the plan's events with its read set as the boundary.
func (p *resourcePlan) decision() Decision {
	d := p.d
	if len(d.Events) > 0 {
		d.Events = append(slices.Clip(d.Events), p.claims...)
	}
	return p.reads.decide(d)
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
	nodes, err := p.v.Nodes()
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
			Storage: n.Spec.Role == events.RoleStorage, Domain: n.Spec.FailureDomain, Props: props}
		pools, err := p.v.NodeStoragePools(n.Spec.Name)
		if err != nil {
			return nil, err
		}
		for _, sp := range pools {
			c.Pools = append(c.Pools, replicas.StoragePool{Name: sp.Name, Provider: sp.Provider, Pool: sp.Pool, FreeKiB: sp.FreeKiB(),
				NoCapacity: !sp.Known()})
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
	g, ok, err := p.v.ResourceGroup(name)
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
// disks), its volumes and its port. Refuses precondition_failed while it has snapshots
// (naming them) or an agent reports it Primary (naming the nodes).
func (p *resourcePlan) deleteDefinition() error {
	if n := len(p.rd.Snapshots); n > 0 {
		names := make([]string, 0, n)
		for _, s := range p.rd.Snapshots {
			names = append(names, s.Name)
		}
		return cairn.Errorf(cairn.CodePreconditionFailed, "resource definition %s has snapshots (%s); delete them first (rd.snapshot-delete)",
			p.rd.Name, strings.Join(names, ", ")).WithDetails(map[string]any{"snapshots": names})
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
	p.d = p.d.with(p.names.Event("rd", p.rd.Name), payload, nil)
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

func (p *resourcePlan) rules() replicas.Rules {
	r := replicas.Rules{SpreadDomains: p.cluster.FailureDomains}
	if p.group != nil {
		r.StoragePool, r.Provider = p.group.StoragePool, p.group.Provider
		r.ReplicasOnSame, r.ReplicasOnDifferent = p.group.ReplicasOnSame, p.group.ReplicasOnDifferent
	}
	return r
}

// pickPool chooses the storage pool of node for a new disk: the named one, else the
// group's, else the matching pool with most free space; refuses when none fits.
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
		Tiebreaker: tiebreaker, DRBDOptions: opts, Reason: reason}
	for i, vol := range p.rd.Volumes {
		ev.Minors = append(ev.Minors, events.VolumeMinor{Volume: vol.Volume, Minor: minors[i]})
	}
	if pool != nil {
		ev.StoragePool, ev.Provider, ev.Pool = pool.Name, pool.Provider, pool.Pool
		if p.restore != nil {
			from := p.restore.from
			ev.RestoreFrom, ev.Reason = &from, "restore"
			ev.Seeds, err = drbd.PlanRestoreSeeds(id, p.restore.current)
		} else {
			// A restored definition's data came from a snapshot, not from writes since
			// day 0: a later disk gets a full sync.
			ev.Seeds, ev.FullSync, err = p.seeds(id, pool.Provider, !p.hasDisk(), force || p.rd.RestoredFrom != nil)
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
		RestoreFrom: ev.RestoreFrom})
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
	st, err := p.v.MinorAllocator(node, p.opts.Minors.Min, n)
	if err != nil {
		return nil, err
	}
	return replicas.Take(replicas.Pool(st), p.opts.Minors, n, "minor on node "+node)
}

// seeds plans the set-gi calls of a new disk with node id id (see drbd.PlanSeeds).
// first is set when no other replica holds data: the disk is the volume's first.
func (p *resourcePlan) seeds(id int, provider drbd.Provider, first, force bool) ([]drbd.Seed, bool, error) {
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
		if !p.opts.claims.busy(p.names.Event("node", c.Node)) {
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
		StoragePool: sp.Name, Provider: sp.Provider, Pool: sp.Pool, FullSync: true})
	r.Diskless, r.Tiebreaker, r.StoragePool, r.Provider, r.Pool = false, false, sp.Name, sp.Provider, sp.Pool
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
	st, err := p.v.PortAllocator(p.opts.Ports.Min, choices)
	if err != nil {
		return 0, err
	}
	free := replicas.Lowest(replicas.Pool(st), p.opts.Ports, choices)
	if len(free) == 0 {
		_, err := replicas.Take(replicas.Pool(st), p.opts.Ports, 1, "TCP port")
		return 0, err
	}
	for _, port := range free {
		if !p.opts.claims.busy(p.names.Event("port", strconv.Itoa(port))) {
			return port, nil
		}
	}
	return free[0], nil
}

// createDefinition emits rd.created with a fresh port, and rd.properties-changed with
// its free-form properties, if any. Refuses already_exists, invalid_argument for a DRBD
// option among the properties.
func (p *resourcePlan) createDefinition(name, group string, opts drbd.Options, props map[string]string) error {
	if err := freeProperties(nil, props, nil, "properties"); err != nil {
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

// createVolume emits vd.created with a random day-0 GI and, on a deployed definition,
// replica.volume-added for every replica: a minor on its node and, for a disk, room in
// its pool and the volume's seeds (the first disk's volume is the first, the others
// day-0 seeded on thin providers, fully synced otherwise or on a restored definition).
// Refuses already_exists for a taken number, precondition_failed when a disk's pool has
// no room or a node no free minor.
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
				Volumes: []drbd.SeedVolume{{Number: volume, Day0GI: gi.String(), First: first}}, ForceInitialSync: p.rd.RestoredFrom != nil, Rand: p.rand})
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
	if c.Node == "" {
		if c.Diskless {
			return cairn.InvalidField("node", "node is required for a diskless replica (autoplace places disks)")
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
	if r, exists := p.rd.Replica(c.Node); exists {
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
	if r.Diskless {
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

// resourceHandlers decide the storage-pool, group, definition and replica verbs.
// Definition and replica verbs allocate cluster-wide (ports) and per node (minors) and
// read nodes and pools, so their boundary is the whole stream; rg.create and sp.create
// depend only on their own subject.
func resourceHandlers(opts Options) []Handler {
	// onResource runs fn on a plan for an existing definition.
	onResource := func(verb string, cmd func() any, name func(any) string, fn func(*resourcePlan, any) error) Handler {
		return Handler{Verb: verb, Decide: func(v *projections.View, names events.Names, body []byte) (Decision, error) {
			c := cmd()
			if err := decodeBody(body, c); err != nil {
				return Decision{}, err
			}
			p, err := newResourcePlan(v, names, opts)
			if err == nil {
				err = p.load(name(c))
			}
			if err == nil {
				err = fn(p, c)
			}
			return p.decision(), err
		}}
	}
	return []Handler{
		{Verb: "sp.create", Decide: func(v *projections.View, names events.Names, body []byte) (Decision, error) {
			var c StoragePoolCreate
			if err := decodeBody(body, &c); err != nil {
				return Decision{}, err
			}
			subject := names.Event("node", c.Node)
			exp, err := subjectBoundary(v, subject)
			d := Decision{Expect: exp}
			if err != nil {
				return d, err
			}
			if _, ok, err := v.Node(c.Node); err != nil || !ok {
				if err == nil {
					err = cairn.Errorf(cairn.CodeNotFound, "node %s is not in the cluster", c.Node).About(cairn.ObjNode)
				}
				return d, err
			}
			if sp, ok, err := v.StoragePool(c.Node, c.Name); err != nil || ok {
				if err == nil {
					err = cairn.Errorf(cairn.CodeAlreadyExists, "node %s already has storage pool %s (%s on %s)", c.Node, c.Name, sp.Provider, sp.Pool).About(cairn.ObjStoragePool)
				}
				return d, err
			}
			return d.with(subject, &c, nil), nil
		}},
		{Verb: "rg.create", Decide: func(v *projections.View, names events.Names, body []byte) (Decision, error) {
			var c ResourceGroupCreate
			if err := decodeBody(body, &c); err != nil {
				return Decision{}, err
			}
			subject := names.Event("rg", c.Name)
			exp, err := subjectBoundary(v, subject)
			d := Decision{Expect: exp}
			if err != nil {
				return d, err
			}
			if _, ok, err := v.ResourceGroup(c.Name); err != nil || ok {
				if err == nil {
					err = cairn.Errorf(cairn.CodeAlreadyExists, "resource group %s already exists", c.Name).About(cairn.ObjResourceGroup)
				}
				return d, err
			}
			if err := freeProperties(nil, c.Properties, nil, "properties"); err != nil {
				return d, err
			}
			d = d.with(subject, &c.ResourceGroupCreated, nil)
			if len(c.Properties) > 0 {
				d = d.with(subject, &events.GroupPropertiesChanged{Name: c.Name, Set: c.Properties}, nil)
			}
			return d, nil
		}},
		{Verb: "sp.modify", Decide: func(v *projections.View, names events.Names, body []byte) (Decision, error) {
			// The node's subject: placements on the node claim it (node.claimed).
			var c StoragePoolModify
			d, err := decodeWithBoundary(body, &c, func() (events.Expect, error) { return subjectBoundary(v, names.Event("node", c.Node)) })
			if err != nil {
				return d, err
			}
			ev, warnings, err := decideStoragePoolModify(v, c)
			return d.with(names.Event("node", c.Node), ev, warnings), err
		}},
		{Verb: "sp.capacity-report", Decide: func(v *projections.View, names events.Names, body []byte) (Decision, error) {
			// The node's subject: placements on the node claim it (node.claimed).
			var c events.StoragePoolCapacityReported
			d, err := decodeWithBoundary(body, &c, func() (events.Expect, error) { return subjectBoundary(v, names.Event("node", c.Node)) })
			if err != nil {
				return d, err
			}
			ev, warnings, err := decideCapacityReport(v, c)
			return d.with(names.Event("node", c.Node), ev, warnings), err
		}},
		{Verb: "sp.delete", Decide: func(v *projections.View, names events.Names, body []byte) (Decision, error) {
			// The node's subject: placements on the node claim it (node.claimed).
			var c StoragePoolDelete
			d, err := decodeWithBoundary(body, &c, func() (events.Expect, error) { return subjectBoundary(v, names.Event("node", c.Node)) })
			if err != nil {
				return d, err
			}
			ev, err := decideStoragePoolDelete(v, c)
			return d.with(names.Event("node", c.Node), ev, nil), err
		}},
		{Verb: "rg.delete", Decide: func(v *projections.View, names events.Names, body []byte) (Decision, error) {
			// The group and every definition: an rd.create joining the group must make
			// this decision again (and reads the group, so it makes its own again).
			var c NameOnly
			if err := decodeBody(body, &c); err != nil {
				return Decision{}, err
			}
			r := newReads(v, names)
			if err := errors.Join(r.of("rg", c.Name), r.aggregate("rd")); err != nil {
				return Decision{}, err
			}
			d := r.decide(Decision{})
			if _, ok, err := v.ResourceGroup(c.Name); err != nil || !ok {
				if err == nil {
					err = cairn.Errorf(cairn.CodeNotFound, "resource group %s does not exist", c.Name).About(cairn.ObjResourceGroup)
				}
				return d, err
			}
			rds, err := v.GroupDefinitions(c.Name, 10)
			if err != nil {
				return d, err
			}
			if len(rds) > 0 {
				more := ""
				if len(rds) == 10 {
					more = ", …"
				}
				return d, cairn.Errorf(cairn.CodePreconditionFailed, "resource group %s has resource definitions (%s%s); delete them first",
					c.Name, strings.Join(rds, ", "), more).WithDetails(map[string]any{"resources": rds, "in_use": true})
			}
			return r.decide(d.with(names.Event("rg", c.Name), &events.ResourceGroupDeleted{Name: c.Name}, nil)), nil
		}},
		{Verb: "rg.modify", Decide: func(v *projections.View, names events.Names, body []byte) (Decision, error) {
			var c ResourceGroupModify
			d, err := decodeWithBoundary(body, &c, func() (events.Expect, error) { return subjectBoundary(v, names.Event("rg", c.Name)) })
			if err != nil {
				return d, err
			}
			subject := names.Event("rg", c.Name)
			g, ok, err := v.ResourceGroup(c.Name)
			if err != nil || !ok {
				if err == nil {
					err = cairn.Errorf(cairn.CodeNotFound, "resource group %s does not exist", c.Name).About(cairn.ObjResourceGroup)
				}
				return d, err
			}
			mod, warnings, err := DecideGroupModify(g, c)
			if err != nil {
				return d, err
			}
			d = d.with(subject, mod, nil)
			if len(c.Properties) > 0 || len(c.UnsetProperties) > 0 {
				ev, w, err := decidePropertiesPatch(c.Name, "resource group", g.Properties, c.Properties, c.UnsetProperties)
				if err != nil {
					return d, err
				}
				d, warnings = d.with(subject, (*events.GroupPropertiesChanged)(ev), nil), append(warnings, w...)
			}
			if len(d.Events) > 0 {
				warnings = nil
			}
			return d.with(subject, (*events.GroupPropertiesChanged)(nil), warnings), nil
		}},
		{Verb: "rd.create", Decide: func(v *projections.View, names events.Names, body []byte) (Decision, error) {
			var c ResourceDefinitionCreate
			if err := decodeBody(body, &c); err != nil {
				return Decision{}, err
			}
			p, err := newResourcePlan(v, names, opts)
			if err == nil {
				err = p.createDefinition(c.Name, c.ResourceGroup, c.DRBDOptions, c.Properties)
			}
			return p.decision(), err
		}},
		{Verb: "rd.restore", Decide: func(v *projections.View, names events.Names, body []byte) (Decision, error) {
			var c SnapshotRestore
			if err := decodeBody(body, &c); err != nil {
				return Decision{}, err
			}
			p, err := newResourcePlan(v, names, opts)
			if err == nil {
				err = p.restoreSnapshot(c)
			}
			return p.decision(), err
		}},
		{Verb: "rg.spawn", Decide: func(v *projections.View, names events.Names, body []byte) (Decision, error) {
			var c ResourceGroupSpawn
			if err := decodeBody(body, &c); err != nil {
				return Decision{}, err
			}
			sizes, err := spawnSizes(c.SizeKiB)
			if err != nil {
				return Decision{}, err
			}
			p, err := newResourcePlan(v, names, opts)
			if err == nil {
				err = p.spawn(c, sizes)
			}
			return p.decision(), err
		}},
		{Verb: "rd.modify", Decide: func(v *projections.View, names events.Names, body []byte) (Decision, error) {
			var c ResourceModify
			d, err := decodeWithBoundary(body, &c, func() (events.Expect, error) { return subjectBoundary(v, names.Event("rd", c.Name)) })
			if err != nil {
				return d, err
			}
			subject := names.Event("rd", c.Name)
			rd, ok, err := v.ResourceDefinition(c.Name)
			if err != nil {
				return d, err
			}
			if !ok {
				return d, cairn.Errorf(cairn.CodeNotFound, "resource definition %s does not exist", c.Name).About(cairn.ObjResourceDefinition)
			}
			var warnings []string
			if !reflect.DeepEqual(c.DRBDOptions, drbd.Options{}) || len(c.Unset) > 0 {
				ev, w, err := DecideResourceModify(rd.DRBDOptions, c)
				if err != nil {
					return d, err
				}
				d, warnings = d.with(subject, ev, nil), append(warnings, w...)
			}
			if len(c.Properties) > 0 || len(c.UnsetProperties) > 0 {
				ev, w, err := decidePropertiesPatch(c.Name, "resource definition", rd.Properties, c.Properties, c.UnsetProperties)
				if err != nil {
					return d, err
				}
				if ev != nil {
					d = d.with(subject, (*events.DefinitionPropertiesChanged)(ev), nil)
				}
				warnings = append(warnings, w...)
			}
			if len(d.Events) > 0 {
				warnings = nil // a no-op warning of one half is noise when the other half changed
			}
			return d.with(subject, (*events.ResourceOptionsChanged)(nil), warnings), nil
		}},
		onResource("rd.delete", func() any { return new(ResourceDefinitionDelete) },
			func(c any) string { return c.(*ResourceDefinitionDelete).Name },
			func(p *resourcePlan, _ any) error { return p.deleteDefinition() }),
		onResource("vd.create", func() any { return new(VolumeDefinitionCreate) },
			func(c any) string { return c.(*VolumeDefinitionCreate).Resource },
			func(p *resourcePlan, c any) error {
				vc := c.(*VolumeDefinitionCreate)
				return p.createVolume(vc.Volume, vc.SizeKiB)
			}),
		onResource("rd.snapshot", func() any { return new(SnapshotRef) },
			func(c any) string { return c.(*SnapshotRef).Resource },
			func(p *resourcePlan, c any) error { return p.snapshot(c.(*SnapshotRef).Name) }),
		onResource("rd.rollback", func() any { return new(SnapshotRollback) },
			func(c any) string { return c.(*SnapshotRollback).Resource },
			func(p *resourcePlan, c any) error { return p.rollback(c.(*SnapshotRollback).Snapshot) }),
		onResource("rd.clone", func() any { return new(SnapshotClone) },
			func(c any) string { return c.(*SnapshotClone).Resource },
			func(p *resourcePlan, c any) error { return p.clone(c.(*SnapshotClone).Target) }),
		onResource("rd.snapshot-delete", func() any { return new(SnapshotRef) },
			func(c any) string { return c.(*SnapshotRef).Resource },
			func(p *resourcePlan, c any) error { return p.deleteSnapshot(c.(*SnapshotRef).Name) }),
		onResource("rd.snapshot-progress", func() any { return new(SnapshotProgress) },
			func(c any) string { return c.(*SnapshotProgress).Resource },
			func(p *resourcePlan, c any) error { return p.snapshotProgress(*c.(*SnapshotProgress)) }),
		onResource("vd.resize", func() any { return new(VolumeDefinitionResize) },
			func(c any) string { return c.(*VolumeDefinitionResize).Resource },
			func(p *resourcePlan, c any) error {
				vc := c.(*VolumeDefinitionResize)
				return p.resizeVolume(vc.Volume, vc.SizeKiB)
			}),
		onResource("vd.delete", func() any { return new(VolumeDefinitionDelete) },
			func(c any) string { return c.(*VolumeDefinitionDelete).Resource },
			func(p *resourcePlan, c any) error { return p.deleteVolume(c.(*VolumeDefinitionDelete).Volume) }),
		onResource("replica.add", func() any { return new(ReplicaAdd) },
			func(c any) string { return c.(*ReplicaAdd).Resource },
			func(p *resourcePlan, c any) error { return p.replicaAdd(*c.(*ReplicaAdd)) }),
		onResource("replica.remove", func() any { return new(ReplicaRef) },
			func(c any) string { return c.(*ReplicaRef).Resource },
			func(p *resourcePlan, c any) error { return p.replicaRemove(*c.(*ReplicaRef)) }),
		onResource("replica.toggle-disk", func() any { return new(ReplicaToggleDisk) },
			func(c any) string { return c.(*ReplicaToggleDisk).Resource },
			func(p *resourcePlan, c any) error { return p.toggleDisk(*c.(*ReplicaToggleDisk)) }),
		onResource("resource.activate", func() any { return new(ResourceActivate) },
			func(c any) string { return c.(*ResourceActivate).Resource },
			func(p *resourcePlan, c any) error { return p.activate(*c.(*ResourceActivate), true) }),
		onResource("resource.deactivate", func() any { return new(ResourceActivate) },
			func(c any) string { return c.(*ResourceActivate).Resource },
			func(p *resourcePlan, c any) error { return p.activate(*c.(*ResourceActivate), false) }),
	}
}

// decideStoragePoolModify gives a pool its capacity and/or a thin pool its
// over-provisioning ratio; what the command leaves out keeps its value. Refuses
// not_found (node, pool), invalid_argument naming overprovision on a thick pool, and
// precondition_failed below what replicas already take; nothing different is a no-op
// with a warning.
func decideStoragePoolModify(v *projections.View, c StoragePoolModify) (*events.StoragePoolModified, []string, error) {
	sp, ok, err := v.StoragePool(c.Node, c.Name)
	if err != nil || !ok {
		if err == nil {
			err = cairn.Errorf(cairn.CodeNotFound, "node %s has no storage pool %s", c.Node, c.Name).About(cairn.ObjStoragePool)
		}
		return nil, nil, err
	}
	if c.CapacityKiB == nil && c.Overprovision == nil {
		return nil, nil, cairn.InvalidField("capacity_kib", "give capacity_kib and/or overprovision")
	}
	ev := events.StoragePoolModified{Node: c.Node, Name: c.Name, CapacityKiB: sp.CapacityKiB}
	if c.Overprovision != nil {
		if !sp.Thin() {
			return nil, nil, cairn.InvalidField("overprovision", "storage pool %s on node %s is %s, a thick provider: only thin pools (lvm_thin, zfs_thin, file_thin) promise more than they hold",
				c.Name, c.Node, sp.Provider)
		}
		ev.Overprovision = *c.Overprovision
	}
	if c.CapacityKiB != nil {
		ev.CapacityKiB = *c.CapacityKiB
		if ev.CapacityKiB < sp.AllocatedKiB {
			return nil, nil, cairn.Errorf(cairn.CodePreconditionFailed, "storage pool %s on node %s: replicas take %d KiB, more than %d KiB",
				c.Name, c.Node, sp.AllocatedKiB, ev.CapacityKiB).WithDetails(map[string]any{"allocated_kib": sp.AllocatedKiB, "in_use": true})
		}
	}
	if ev.CapacityKiB == sp.CapacityKiB && (c.Overprovision == nil || *c.Overprovision == sp.Overprovision) {
		return nil, []string{fmt.Sprintf("storage pool %s on node %s already has %d KiB and this ratio; nothing changed", c.Name, c.Node, sp.CapacityKiB)}, nil
	}
	return &ev, nil, nil
}

// CapacityChanged reports whether an agent's report is news for sp: its first, one
// whose total differs, or one whose free moved by more than 1% of the total since the
// recorded report. Smaller moves are noise a report every 30 s would turn into events.
func CapacityChanged(sp projections.StoragePool, total, free uint64) bool {
	r := sp.Reported
	if r == nil || r.TotalKiB != total {
		return true
	}
	diff := max(free, r.FreeKiB) - min(free, r.FreeKiB)
	return diff*100 > total
}

// decideCapacityReport records an agent's report of a pool (sp.capacity-report, sent
// by the leading serve for the agent). Refuses not_found (node, pool) and
// invalid_argument naming free_kib above total_kib; a report that is no news
// (CapacityChanged) is a no-op with a warning.
func decideCapacityReport(v *projections.View, c events.StoragePoolCapacityReported) (*events.StoragePoolCapacityReported, []string, error) {
	sp, ok, err := v.StoragePool(c.Node, c.Name)
	if err != nil || !ok {
		if err == nil {
			err = cairn.Errorf(cairn.CodeNotFound, "node %s has no storage pool %s", c.Node, c.Name).About(cairn.ObjStoragePool)
		}
		return nil, nil, err
	}
	if c.FreeKiB > c.TotalKiB {
		return nil, nil, cairn.InvalidField("free_kib", "free_kib %d is more than total_kib %d", c.FreeKiB, c.TotalKiB)
	}
	if !CapacityChanged(sp, c.TotalKiB, c.FreeKiB) {
		return nil, []string{fmt.Sprintf("storage pool %s on node %s: within 1%% of the recorded report; nothing changed", c.Name, c.Node)}, nil
	}
	return &c, nil, nil
}

// decideStoragePoolDelete removes a storage pool no disk uses. Refuses not_found
// (node, pool) and precondition_failed naming the resources whose disks are on it.
func decideStoragePoolDelete(v *projections.View, c StoragePoolDelete) (*events.StoragePoolDeleted, error) {
	if _, ok, err := v.Node(c.Node); err != nil || !ok {
		if err == nil {
			err = cairn.Errorf(cairn.CodeNotFound, "node %s is not in the cluster", c.Node).About(cairn.ObjNode)
		}
		return nil, err
	}
	if _, ok, err := v.StoragePool(c.Node, c.Name); err != nil || !ok {
		if err == nil {
			err = cairn.Errorf(cairn.CodeNotFound, "node %s has no storage pool %s", c.Node, c.Name).About(cairn.ObjStoragePool)
		}
		return nil, err
	}
	rds, err := v.NodeResources(c.Node)
	if err != nil {
		return nil, err
	}
	var users []string
	for _, name := range rds {
		rd, ok, err := v.ResourceDefinition(name)
		if err != nil {
			return nil, err
		}
		if rep, has := rd.Replica(c.Node); ok && has && !rep.Diskless && rep.StoragePool == c.Name {
			users = append(users, name)
		}
	}
	if len(users) > 0 {
		return nil, cairn.Errorf(cairn.CodePreconditionFailed, "storage pool %s on node %s holds the disks of %d resource(s) (%s); remove them or make them diskless first",
			c.Name, c.Node, len(users), strings.Join(users[:min(len(users), 10)], ", ")).WithDetails(map[string]any{"resources": users, "in_use": true})
	}
	return &events.StoragePoolDeleted{Node: c.Node, Name: c.Name}, nil
}

// decidePropertiesPatch patches the free-form properties of the object name (a kind, for
// messages): the keys set and removed that change something, or nil and a warning when
// nothing changes.
// Refuses invalid_argument for a key both set and removed (unset_properties[i]), a DRBD
// option among them, or more than 128.
func decidePropertiesPatch(name, kind string, current, set map[string]string, unset []string) (*events.PropertiesChanged, []string, error) {
	changed, removed, err := patchMap(current, set, unset, "unset_properties")
	if err != nil {
		return nil, nil, err
	}
	if err := freeProperties(current, changed, removed, "properties"); err != nil {
		return nil, nil, err
	}
	if len(changed) == 0 && len(removed) == 0 {
		return nil, []string{kind + " " + name + " already has these properties; nothing changed"}, nil
	}
	return &events.PropertiesChanged{Name: name, Set: changed, Unset: removed}, nil, nil
}

// DecideGroupModify patches a group's placement (place count, pool, provider, the
// replicas_on lists) and DRBD options; what it does not name keeps its value. Existing
// definitions keep their replicas (the next autoplace uses the new placement), and their
// nodes get the new options. Refuses invalid_argument for an option both set and unset
// or an unknown unset name; nothing changed is nil and a warning (none when the patch
// named no placement or option at all).
func DecideGroupModify(g projections.ResourceGroup, c ResourceGroupModify) (*events.ResourceGroupModified, []string, error) {
	ev := &events.ResourceGroupModified{Name: c.Name}
	named := false
	if c.PlaceCount != 0 {
		named = true
		if c.PlaceCount != g.PlaceCount {
			ev.PlaceCount = c.PlaceCount
		}
	}
	if c.StoragePool != nil {
		named = true
		if *c.StoragePool != g.StoragePool {
			ev.StoragePool = c.StoragePool
		}
	}
	if c.Provider != nil {
		named = true
		if *c.Provider != g.Provider {
			ev.Provider = c.Provider
		}
	}
	if c.ReplicasOnSame != nil {
		named = true
		if !slices.Equal(*c.ReplicasOnSame, g.ReplicasOnSame) {
			ev.ReplicasOnSame = c.ReplicasOnSame
		}
	}
	if c.ReplicasOnDifferent != nil {
		named = true
		if !slices.Equal(*c.ReplicasOnDifferent, g.ReplicasOnDifferent) {
			ev.ReplicasOnDifferent = c.ReplicasOnDifferent
		}
	}
	if !reflect.DeepEqual(c.DRBDOptions, drbd.Options{}) || len(c.Unset) > 0 {
		named = true
		changed, err := optionsPatch(g.DRBDOptions, c.DRBDOptions, c.Unset)
		if err != nil {
			return nil, nil, err
		}
		if changed {
			ev.Set, ev.Unset = c.DRBDOptions, c.Unset
		}
	}
	if reflect.DeepEqual(*ev, events.ResourceGroupModified{Name: c.Name}) {
		if !named {
			return nil, nil, nil
		}
		return nil, []string{fmt.Sprintf("resource group %s already has this placement and these options; nothing changed", c.Name)}, nil
	}
	return ev, nil, nil
}

// optionsPatch reports whether setting set and unsetting unset changes current.
// Refuses invalid_argument (unset[i]) for an option both set and unset, or a name that
// is no option.
func optionsPatch(current, set drbd.Options, unset []string) (bool, error) {
	next, err := drbd.Resolve(current, set).Without(unset)
	if err != nil {
		return false, err
	}
	both := drbd.Resolve(set)
	for i, n := range unset {
		if without, _ := both.Without([]string{n}); !reflect.DeepEqual(without, both) {
			return false, cairn.InvalidField(fmt.Sprintf("unset[%d]", i), "%s is both set and unset", n)
		}
	}
	return !reflect.DeepEqual(next, drbd.Resolve(current)), nil
}

// DecideResourceModify patches a definition's options: fields in c.DRBDOptions are set,
// names in c.Unset inherit again, everything else keeps its value. Refuses
// invalid_argument for an unknown unset name or a field both set and unset; a patch
// that changes nothing is a no-op with a warning.
func DecideResourceModify(current drbd.Options, c ResourceModify) (*events.ResourceOptionsChanged, []string, error) {
	changed, err := optionsPatch(current, c.DRBDOptions, c.Unset)
	if err != nil {
		return nil, nil, err
	}
	if !changed {
		return nil, []string{fmt.Sprintf("resource %s already has these options; nothing changed", c.Name)}, nil
	}
	return &events.ResourceOptionsChanged{Name: c.Name, Set: c.DRBDOptions, Unset: c.Unset}, nil, nil
}

// controllerHandler decides controller.modify: the deployment's DRBD options (the
// broadest level of the inheritance: every node of every definition gets desired state
// again) and free-form properties, bounded by their one subject.
func controllerHandler() Handler {
	return Handler{Verb: "controller.modify", Decide: func(v *projections.View, names events.Names, body []byte) (Decision, error) {
		var c ControllerModify
		subject := names.Event("controller", "settings")
		d, err := decodeWithBoundary(body, &c, func() (events.Expect, error) { return subjectBoundary(v, subject) })
		if err != nil {
			return d, err
		}
		var warnings []string
		if !reflect.DeepEqual(c.DRBDOptions, drbd.Options{}) || len(c.Unset) > 0 {
			current, err := v.ControllerOptions()
			if err != nil {
				return d, err
			}
			changed, err := optionsPatch(current.Options, c.DRBDOptions, c.Unset)
			if err != nil {
				return d, err
			}
			if changed {
				d = d.with(subject, &events.ControllerOptionsChanged{Set: c.DRBDOptions, Unset: c.Unset}, nil)
			} else {
				warnings = append(warnings, "the controller already has these options; nothing changed")
			}
		}
		if len(c.Properties) > 0 || len(c.UnsetProperties) > 0 {
			current, err := v.ControllerProperties()
			if err != nil {
				return d, err
			}
			ev, w, err := decidePropertiesPatch("controller", "the", current, c.Properties, c.UnsetProperties)
			if err != nil {
				return d, err
			}
			d, warnings = d.with(subject, (*events.ControllerPropertiesChanged)(ev), nil), append(warnings, w...)
		}
		if len(d.Events) > 0 {
			warnings = nil
		}
		return d.with(subject, (*events.ControllerPropertiesChanged)(nil), warnings), nil
	}}
}
