package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backing"
)

// snapshot starts a snapshot of the definition: every diskful replica takes a copy, and
// every active diskless replica suspends and resumes I/O with them (a diskless Primary
// writes to every disk: were it not suspended, a write could reach one disk before its
// copy and another after). Refuses already_exists (the name), precondition_failed when
// the definition has no disk, a disk is on a provider without snapshots (thick lvm,
// file: as LINSTOR), a disk's replica is deactivated, a node taking part is offline
// (its agent could neither suspend nor take), or another snapshot of the definition is
// under way (one at a time: each suspends the definition's I/O).
func (p *resourcePlan) snapshot(name string) error { return p.snapshotIn(name, nil) }

// snapshotIn starts snapshot name of the definition as a member of group (nil: alone).
func (p *resourcePlan) snapshotIn(name string, group []events.RDSnapshotRef) error {
	if _, exists := p.rd.Snapshot(name); exists {
		return cairn.Errorf(cairn.CodeAlreadyExists, "resource definition %s already has a snapshot %s", p.rd.Name, name)
	}
	for _, s := range p.rd.Snapshots {
		if s.Phase == projections.SnapshotSuspending || s.Phase == projections.SnapshotTaking {
			return cairn.Errorf(cairn.CodePreconditionFailed, "snapshot %s of %s is under way; one snapshot of a definition at a time", s.Name, p.rd.Name)
		}
	}
	var size uint64
	for _, vd := range p.rd.Volumes {
		size += vd.SizeKiB
	}
	var nodes, diskless, thick, inactive, offline, copies []string
	for _, r := range p.rd.Replicas {
		if r.Diskless {
			if r.Inactive {
				continue // not up there: it cannot write
			}
			diskless = append(diskless, r.Node)
		} else {
			nodes = append(nodes, r.Node)
			if !backing.CanSnapshot(r.Provider) {
				thick = append(thick, fmt.Sprintf("%s (%s)", r.Node, r.Provider))
			}
			if r.Inactive {
				inactive = append(inactive, r.Node)
			}
			// Observed state, not a read to check: what the pool's file system can do.
			if rep, ok, err := p.v.StoragePoolReport(r.Node, r.StoragePool); err != nil {
				return err
			} else if ok && rep.Reflink != nil && !*rep.Reflink && size > backing.FullCopySnapshotMaxKiB {
				copies = append(copies, fmt.Sprintf("%s (pool %s)", r.Node, r.StoragePool))
			}
		}
		if c, ok := p.candidate(r.Node); ok && !c.Online {
			offline = append(offline, r.Node)
		}
	}
	switch {
	case len(nodes) == 0:
		return cairn.Errorf(cairn.CodePreconditionFailed, "resource definition %s has no replica with a disk to snapshot", p.rd.Name)
	case len(thick) > 0:
		return cairn.Errorf(cairn.CodePreconditionFailed, "resource definition %s has disks on providers without snapshots: %s (thick lvm and file volumes are not snapshotted; lvm_thin, zfs, zfs_thin and file_thin are)",
			p.rd.Name, strings.Join(thick, ", ")).WithDetails(map[string]any{"nodes": thick})
	case len(copies) > 0:
		return cairn.Errorf(cairn.CodePreconditionFailed, "resource definition %s has disks on file systems without reflinks: %s; a snapshot there is a full copy of %d MiB while I/O is suspended, "+
			"and only definitions of up to %d MiB are copied within the suspension bound (put the pool on a file system with reflinks: btrfs, or XFS with reflink=1; or use lvm_thin or zfs_thin)",
			p.rd.Name, strings.Join(copies, ", "), size/1024, backing.FullCopySnapshotMaxKiB/1024).WithDetails(map[string]any{"nodes": copies, "size_kib": size})
	case len(inactive) > 0:
		return cairn.Errorf(cairn.CodePreconditionFailed, "resource definition %s is deactivated on %s; a snapshot suspends I/O of a resource that is up", p.rd.Name, strings.Join(inactive, ", "))
	case len(offline) > 0:
		for _, n := range offline { // the refusal is confirmed on what it read
			if err := p.read(p.names.Event("node", n)); err != nil {
				return err
			}
		}
		return cairn.Errorf(cairn.CodePreconditionFailed, "node(s) %s holding replicas of %s are offline; every replica takes part in a snapshot (the disks take copies, every replica suspends I/O)", strings.Join(offline, ", "), p.rd.Name).
			WithDetails(map[string]any{"nodes": offline})
	}
	p.emit(&events.RDSnapshotStarted{Resource: p.rd.Name, Name: name, Nodes: nodes, Diskless: diskless, Group: group})
	return nil
}

// SnapshotMulti is the body of rd.snapshot-multi.
type SnapshotMulti struct {
	Snapshots []SnapshotRef `json:"snapshots"`
}

// decideSnapshotMulti starts a snapshot of every definition c names at one moment, in
// one append: all or none (the first refusal, which names its definition, refuses the
// lot).
// One snapshot is rd.snapshot. Refuses invalid_argument for a definition named twice.
func decideSnapshotMulti(v *projections.View, names events.Names, cfg Config, c SnapshotMulti) (decide.Decision, error) {
	var group []events.RDSnapshotRef
	seen := map[string]bool{}
	for i, s := range c.Snapshots {
		if seen[s.Resource] {
			return decide.Decision{}, cairn.InvalidField(fmt.Sprintf("snapshots[%d].resource", i),
				"resource definition %s is named twice; a group snapshot takes one snapshot of each", s.Resource)
		}
		seen[s.Resource] = true
		group = append(group, events.RDSnapshotRef{Resource: s.Resource, Name: s.Name})
	}
	if len(group) == 1 {
		group = nil
	}
	var ds []decide.Decision
	for _, s := range c.Snapshots {
		p, err := newResourcePlan(v, names, cfg)
		if err == nil {
			err = p.load(s.Resource)
		}
		if err == nil {
			err = p.snapshotIn(s.Name, group)
		}
		ds = append(ds, p.decision())
		if err != nil { // every refusal of rd.snapshot names its definition
			return decide.Merge(ds...), err
		}
	}
	return decide.Merge(ds...), nil
}

// deleteSnapshot removes a snapshot from every node; one under way is abandoned (its
// nodes resume I/O and remove what they took: a way out when a node never reports).
// Refuses not_found.
func (p *resourcePlan) deleteSnapshot(name string) error {
	s, ok := p.rd.Snapshot(name)
	if !ok {
		return cairn.Errorf(cairn.CodeNotFound, "resource definition %s has no snapshot %s", p.rd.Name, name)
	}
	if err := p.refuseBackupsOf(name); err != nil {
		return err
	}
	if s.Phase == projections.SnapshotSuspending || s.Phase == projections.SnapshotTaking {
		p.warn("snapshot %s of %s was under way (%s): its nodes resume I/O and remove what they took", name, p.rd.Name, s.Phase)
	}
	p.emit(&events.RDSnapshotDeleted{Resource: p.rd.Name, Name: name})
	return nil
}

// snapshotProgress records a snapshot's next phase (take, taken, failed) as the leading
// serve saw it in its nodes' reports (SnapshotNext). Refuses not_found, and
// precondition_failed for a phase that does not follow the recorded one (a late or
// repeated report: nothing changes).
func (p *resourcePlan) snapshotProgress(c SnapshotProgress) error {
	s, ok := p.rd.Snapshot(c.Name)
	if !ok {
		return cairn.Errorf(cairn.CodeNotFound, "resource definition %s has no snapshot %s", p.rd.Name, c.Name)
	}
	ref := events.RDSnapshotRef{Resource: p.rd.Name, Name: c.Name}
	switch {
	case c.Phase == "take" && s.Phase == projections.SnapshotSuspending:
		p.emit((*events.RDSnapshotSuspended)(&ref))
	case c.Phase == "taken" && s.Phase == projections.SnapshotTaking:
		p.emit((*events.RDSnapshotTaken)(&ref))
	case c.Phase == "failed" && (s.Phase == projections.SnapshotSuspending || s.Phase == projections.SnapshotTaking):
		p.emit(&events.RDSnapshotFailed{Resource: p.rd.Name, Name: c.Name, Reason: c.Reason})
	default:
		return cairn.Errorf(cairn.CodePreconditionFailed, "snapshot %s of %s is %s; %s does not follow", c.Name, p.rd.Name, s.Phase, c.Phase)
	}
	return nil
}

// SnapshotRestore is the body of rd.restore.
type SnapshotRestore struct {
	Resource string `json:"resource"`
	Snapshot string `json:"snapshot"`
	Target   string `json:"target"`
	// Nodes, when given, are the nodes to restore on (each holding a copy): the others
	// are added later (autoplace) with a full sync. Default: every node holding one.
	Nodes []string `json:"nodes,omitempty"`
}

// restoreSnapshot creates definition c.Target from a taken snapshot: the source's group
// and DRBD options, its volumes at the snapshot's sizes (new day-0 GIs), a disk on every
// node holding the snapshot (or on c.Nodes of them; the source's pool there), each
// starting as that node's copy of the snapshot with restore seeds (one current UUID per
// volume shared by all: no resync between them), and the tiebreaker rule. A target that
// exists already (LINSTOR's clients create it first) gets the disks when it has no
// replica (prepareRestoreTarget). Refuses not_found (definition, snapshot),
// invalid_argument naming nodes[i] (a node without a copy), already_exists (a target
// with replicas), precondition_failed (a snapshot not taken; a node gone, offline or
// without room), and what rd.create refuses for the target name.
func (p *resourcePlan) restoreSnapshot(c SnapshotRestore) error {
	src, snap, err := p.takenSnapshot(c)
	if err != nil {
		return err
	}
	from := drbd.SnapshotRef{Resource: c.Resource, Snapshot: c.Snapshot}
	p.restoring = &from
	if err := p.read(p.names.Event("rd", c.Target)); err != nil {
		return err
	}
	if _, exists, err := p.v.ResourceDefinition(c.Target); err != nil {
		return err
	} else if exists {
		// LINSTOR's way: the client created the target (and maybe its volumes, with
		// rd.restore-volumes); the disks come into it.
		if err := p.load(c.Target); err != nil {
			return err
		}
		if err := p.prepareRestoreTarget(snap, from, true); err != nil {
			return err
		}
	} else {
		if err := p.createDefinition(c.Target, src.ResourceGroup, src.DRBDOptions, nil); err != nil {
			return err
		}
		p.rd.RestoredFrom = &from
		for i := range p.d.Events {
			if ev, ok := p.d.Events[i].Payload.(*events.ResourceDefinitionCreated); ok && ev.Name == c.Target {
				ev.RestoredFrom = &from
			}
		}
		for _, vol := range snap.Volumes {
			if err := p.createVolume(vol.Volume, vol.SizeKiB); err != nil {
				return err
			}
		}
	}
	current, err := p.restoreCurrents()
	if err != nil {
		return err
	}
	nodes := snap.Nodes
	if len(c.Nodes) > 0 {
		for i, n := range c.Nodes {
			if !slices.Contains(snap.Nodes, n) {
				return cairn.InvalidField(fmt.Sprintf("nodes[%d]", i), "node %s holds no copy of snapshot %s of %s (nodes: %s)", n, c.Snapshot, c.Resource, strings.Join(snap.Nodes, ", "))
			}
		}
		nodes = c.Nodes
	}
	p.restore = &restorePlan{from: from, current: current}
	for _, node := range nodes {
		r, ok := src.Replica(node)
		if !ok || r.Diskless {
			return cairn.Errorf(cairn.CodePreconditionFailed, "node %s no longer holds a disk of %s with snapshot %s", node, c.Resource, c.Snapshot)
		}
		cand, ok := p.candidate(node)
		if !ok {
			return cairn.Errorf(cairn.CodeNotFound, "node %s is not in the cluster", node).About(cairn.ObjNode)
		}
		if !cand.Online {
			if err := p.read(p.names.Event("node", node)); err != nil { // confirmed on what it read
				return err
			}
			return cairn.Errorf(cairn.CodePreconditionFailed, "node %s holding a copy of snapshot %s is offline", node, c.Snapshot)
		}
		pool, err := p.pickPool(node, r.StoragePool)
		if err != nil {
			return err
		}
		if err := p.addReplica(node, &pool, false, "restore", false, drbd.Options{}); err != nil {
			return err
		}
	}
	p.restore = nil
	return p.tiebreaker()
}

// restoreCurrents draws the current UUID every restored disk of a volume shares (a new
// one per volume: restored data is no day-0 data).
func (p *resourcePlan) restoreCurrents() (map[int]drbd.UUID, error) {
	current := map[int]drbd.UUID{}
	for _, vol := range p.rd.Volumes {
		day0, _ := drbd.ParseUUID(vol.Day0GI)
		u, err := drbd.NewDay0GI(p.rand, day0)
		if err != nil {
			return nil, err
		}
		current[vol.Volume] = u
	}
	return current, nil
}

// takenSnapshot reads c's source definition and its taken snapshot. Refuses not_found
// (definition, snapshot) and precondition_failed (not taken, on no node any more).
func (p *resourcePlan) takenSnapshot(c SnapshotRestore) (projections.ResourceDefinition, projections.RDSnapshot, error) {
	if err := p.read(p.names.Event("rd", c.Resource)); err != nil {
		return projections.ResourceDefinition{}, projections.RDSnapshot{}, err
	}
	src, ok, err := p.v.ResourceDefinition(c.Resource)
	if err != nil {
		return src, projections.RDSnapshot{}, err
	}
	if !ok {
		return src, projections.RDSnapshot{}, cairn.Errorf(cairn.CodeNotFound, "resource definition %s does not exist", c.Resource).About(cairn.ObjResourceDefinition)
	}
	snap, ok := src.Snapshot(c.Snapshot)
	if !ok {
		return src, projections.RDSnapshot{}, cairn.Errorf(cairn.CodeNotFound, "resource definition %s has no snapshot %s", c.Resource, c.Snapshot)
	}
	if snap.Phase != projections.SnapshotTaken {
		return src, *snap, cairn.Errorf(cairn.CodePreconditionFailed, "snapshot %s of %s is %s; only a taken snapshot is restored", c.Snapshot, c.Resource, snap.Phase)
	}
	if len(snap.Nodes) == 0 {
		return src, *snap, cairn.Errorf(cairn.CodePreconditionFailed, "no node holds snapshot %s of %s any more", c.Snapshot, c.Resource)
	}
	return src, *snap, nil
}

// prepareRestoreTarget makes the loaded, existing definition the target of a restore
// from snap: it must hold no replica (already_exists: a restore goes into an empty
// definition once), nor come from another snapshot; its volumes are created from the
// snapshot's (rd.restore-begun first), or, when it has some already (withVolumes: a
// second step), must be the snapshot's, number and size. Refuses already_exists for
// volumes when !withVolumes (rd.restore-volumes done twice).
func (p *resourcePlan) prepareRestoreTarget(snap projections.RDSnapshot, from drbd.SnapshotRef, withVolumes bool) error {
	if len(p.rd.Replicas) > 0 {
		return cairn.Errorf(cairn.CodeAlreadyExists, "resource definition %s already has replicas; a snapshot is restored into a definition without any", p.rd.Name).About(cairn.ObjResource)
	}
	if rf := p.rd.RestoredFrom; rf != nil && *rf != from {
		return cairn.Errorf(cairn.CodePreconditionFailed, "resource definition %s is being restored from snapshot %s of %s, not %s of %s",
			p.rd.Name, rf.Snapshot, rf.Resource, from.Snapshot, from.Resource)
	}
	if len(p.rd.Volumes) == 0 {
		if p.rd.RestoredFrom == nil {
			p.emit(&events.RDRestoreBegun{Resource: p.rd.Name, From: from})
			p.rd.RestoredFrom = &from
		}
		for _, vol := range snap.Volumes {
			if err := p.createVolume(vol.Volume, vol.SizeKiB); err != nil {
				return err
			}
		}
		return nil
	}
	if !withVolumes {
		return cairn.Errorf(cairn.CodeAlreadyExists, "resource definition %s already has volume definitions", p.rd.Name).About(cairn.ObjVolumeDefinition)
	}
	if p.rd.RestoredFrom == nil || !slices.EqualFunc(p.rd.Volumes, snap.Volumes, func(a, b projections.VolumeDefinition) bool {
		return a.Volume == b.Volume && a.SizeKiB == b.SizeKiB
	}) {
		return cairn.Errorf(cairn.CodePreconditionFailed, "resource definition %s has volumes of its own; restore into a definition without volumes, or after rd.restore-volumes from the same snapshot", p.rd.Name)
	}
	return nil
}

// restoreVolumes is LINSTOR's first restore step (snapshot-restore-volume-definition):
// the existing, empty definition c.Target gets the snapshot's volumes and is marked as
// restored from it; its disks come with rd.restore into it. Refuses not_found (source,
// snapshot, target), already_exists (volumes, replicas), precondition_failed (not
// taken, restored from another snapshot).
func (p *resourcePlan) restoreVolumes(c SnapshotRestore) error {
	_, snap, err := p.takenSnapshot(c)
	if err != nil {
		return err
	}
	if err := p.load(c.Target); err != nil {
		return err
	}
	return p.prepareRestoreTarget(snap, drbd.SnapshotRef{Resource: c.Resource, Snapshot: c.Snapshot}, false)
}

// rollback rolls every disk of the definition back to its latest snapshot, name.
// Refuses not_found (snapshot), precondition_failed: not taken, not the latest taken
// snapshot (a rollback to an older one would silently drop the newer ones), a replica
// still active (deactivate the resource everywhere first), a disk without the snapshot
// (added after it: remove it first), a snapshot under way.
func (p *resourcePlan) rollback(name string) error {
	s, ok := p.rd.Snapshot(name)
	if !ok {
		return cairn.Errorf(cairn.CodeNotFound, "resource definition %s has no snapshot %s", p.rd.Name, name)
	}
	if s.Phase != projections.SnapshotTaken {
		return cairn.Errorf(cairn.CodePreconditionFailed, "snapshot %s of %s is %s; only a taken snapshot is rolled back to", name, p.rd.Name, s.Phase)
	}
	for _, o := range p.rd.Snapshots {
		switch {
		case o.Phase == projections.SnapshotSuspending || o.Phase == projections.SnapshotTaking:
			return cairn.Errorf(cairn.CodePreconditionFailed, "snapshot %s of %s is under way", o.Name, p.rd.Name)
		case o.Phase == projections.SnapshotTaken && o.StartedSeq > s.StartedSeq:
			return cairn.Errorf(cairn.CodePreconditionFailed, "snapshot %s of %s is newer than %s: a rollback goes to the latest snapshot only (delete %s first)", o.Name, p.rd.Name, name, o.Name)
		}
	}
	var added []string
	for _, v := range p.rd.Volumes {
		if !slices.ContainsFunc(s.Volumes, func(sv projections.VolumeDefinition) bool { return sv.Volume == v.Volume }) {
			added = append(added, strconv.Itoa(v.Volume))
		}
	}
	if len(added) > 0 {
		return cairn.Errorf(cairn.CodePreconditionFailed, "volume(s) %s of %s were added after snapshot %s, which holds no copy of them; delete them first (vd.delete)", strings.Join(added, ", "), p.rd.Name, name)
	}
	var active, missing []string
	for _, r := range p.rd.Replicas {
		if !r.Inactive {
			active = append(active, r.Node)
		}
		if !r.Diskless && !slices.Contains(s.Nodes, r.Node) {
			missing = append(missing, r.Node)
		}
	}
	slices.Sort(active)
	slices.Sort(missing)
	if len(active) > 0 {
		return cairn.Errorf(cairn.CodePreconditionFailed, "resource %s is active on %s; deactivate it everywhere first (resource.deactivate)", p.rd.Name, strings.Join(active, ", ")).
			WithDetails(map[string]any{"nodes": active})
	}
	if len(missing) > 0 {
		return cairn.Errorf(cairn.CodePreconditionFailed, "the disks of %s on %s were added after snapshot %s and do not hold it; remove them first", p.rd.Name, strings.Join(missing, ", "), name)
	}
	current := map[string]string{}
	for _, v := range p.rd.Volumes {
		day0, _ := drbd.ParseUUID(v.Day0GI)
		u, err := drbd.NewDay0GI(p.rand, day0)
		if err != nil {
			return err
		}
		current[strconv.Itoa(v.Volume)] = u.String()
	}
	p.emit(&events.RDRolledBack{Resource: p.rd.Name, Name: name, Current: current})
	p.warn("every disk of %s goes back to snapshot %s: what was written since is lost; activate the resource when the agents report it rolled back", p.rd.Name, name)
	return nil
}

// snapshotName is what a snapshot name may be (the volume providers' rule).
var snapshotName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$`)

// CloneSnapshot is the name of the snapshot rd.clone takes for target.
// It is "clone-<target>", or, where that would pass the 48 characters a snapshot name
// may have (a target may have LINSTOR's 48 too), "clone-", the first 33 characters of
// target, "-" and 8 hex digits of target's SHA-256: still one name per target.
func CloneSnapshot(target string) string {
	name := "clone-" + target
	if len(name) <= 48 {
		return name
	}
	sum := sha256.Sum256([]byte(target))
	return "clone-" + strings.TrimRight(target[:33], "-_") + "-" + hex.EncodeToString(sum[:4])
}

// clone starts a snapshot of the definition (CloneSnapshot(target)) that the serve
// holding the lease restores into target once it is taken (rd.restore). Refuses
// already_exists (target), invalid_argument naming target when its snapshot name would
// not be valid, and what rd.snapshot refuses.
func (p *resourcePlan) clone(target string) error {
	// The target's subject is read and claimed (events.TargetClaimed): a concurrent
	// rd.create of target conflicts with this append, and one decided later is refused
	// until the clone's restore creates it (or its snapshot fails or is deleted).
	if err := p.read(p.names.Event("rd", target)); err != nil {
		return err
	}
	if _, exists, err := p.v.ResourceDefinition(target); err != nil || exists {
		if err == nil {
			err = cairn.Errorf(cairn.CodeAlreadyExists, "resource definition %s already exists", target).About(cairn.ObjResourceDefinition)
		}
		return err
	}
	if err := p.unclaimed(target); err != nil {
		return err
	}
	name := CloneSnapshot(target)
	if !snapshotName.MatchString(name) {
		return cairn.InvalidField("target", "target %q is too long for its snapshot's name %q (1-48 letters, digits, '_' or '-')", target, name)
	}
	if err := p.snapshot(name); err != nil {
		return err
	}
	for i := range p.d.Events {
		if ev, ok := p.d.Events[i].Payload.(*events.RDSnapshotStarted); ok && ev.Name == name {
			ev.CloneTo = target
		}
	}
	p.d = p.d.With(p.names.Event("rd", target), &events.TargetClaimed{Name: target, Resource: p.rd.Name, Snapshot: name}, nil)
	return nil
}

// unclaimed refuses (already_exists) a definition name a clone under way holds, unless
// this command is that clone's own restore (p.restoring).
func (p *resourcePlan) unclaimed(name string) error {
	c, claimed, err := p.v.TargetClaim(name)
	switch {
	case err != nil:
		return err
	case !claimed:
		return nil
	case p.restoring != nil && p.restoring.Resource == c.Resource && p.restoring.Snapshot == c.Snapshot:
		return nil
	}
	return cairn.Errorf(cairn.CodeAlreadyExists, "resource definition %s is the target of a clone of %s under way (snapshot %s): it is created when that snapshot is taken",
		name, c.Resource, c.Snapshot).About(cairn.ObjResourceDefinition)
}

// ClonesDue returns the rd.restore commands of the clones whose snapshot is taken and
// whose target was never created (exists reports whether a definition exists; a clone
// restored once is never restored again, even after its target was deleted).
func ClonesDue(rd projections.ResourceDefinition, exists func(string) bool) []SnapshotRestore {
	var out []SnapshotRestore
	for _, s := range rd.Snapshots {
		if s.CloneTo != "" && s.Phase == projections.SnapshotTaken && !s.Cloned && !exists(s.CloneTo) {
			out = append(out, SnapshotRestore{Resource: rd.Name, Snapshot: s.Name, Target: s.CloneTo})
		}
	}
	return out
}

// CloneRetryAfter is how long after its snapshot failed at the suspension bound a clone
// is started again: I/O on the source is suspended at most once per this interval plus
// the bound while a loaded machine misses the bound.
const CloneRetryAfter = 5 * time.Second

// CloneRetry is a clone to start again: its failed snapshot deleted, then rd.clone.
type CloneRetry struct {
	Resource, Snapshot, Target string
	StartedSeq                 uint64
}

// ClonesToRetry returns the clones of rd whose snapshot failed at the suspension bound
// (a node too slow to suspend or take its copy in time: no refusal that would fail
// again) at least CloneRetryAfter before now and whose target was never created. A
// clone is a promise to a client that waits for it (linstor-csi polls its status until
// COMPLETE, whatever it says meanwhile): the snapshot is taken again, until it is.
func ClonesToRetry(rd projections.ResourceDefinition, exists func(string) bool, now time.Time) []CloneRetry {
	var out []CloneRetry
	for _, s := range rd.Snapshots {
		if s.CloneTo != "" && s.Phase == projections.SnapshotFailed && strings.Contains(s.Reason, "bound") &&
			!exists(s.CloneTo) && now.Sub(s.DoneAt) >= CloneRetryAfter {
			out = append(out, CloneRetry{Resource: rd.Name, Snapshot: s.Name, Target: s.CloneTo, StartedSeq: s.StartedSeq})
		}
	}
	return out
}

// CloneCleanupDue returns the clone snapshots of src to delete now: restored once into
// their target (Cloned), and either the target is gone, or every disk of it that starts
// from the snapshot reports its desired state carried out at its incarnation (its
// backing volume was made from the snapshot). A source with a disk on ZFS keeps them
// (a ZFS clone depends on its snapshot). target returns a definition and its replicas'
// latest reports.
func CloneCleanupDue(src projections.ResourceDefinition, target func(name string) (projections.ResourceDefinition, bool, map[string]drbd.Status)) []string {
	if src.OnZFS() {
		return nil
	}
	var out []string
	for _, s := range src.Snapshots {
		if s.CloneTo == "" || !s.Cloned {
			continue
		}
		rd, exists, statuses := target(s.CloneTo)
		done := true
		for _, r := range rd.Replicas {
			if !exists || r.RestoreFrom == nil || r.RestoreFrom.Resource != src.Name || r.RestoreFrom.Snapshot != s.Name {
				continue
			}
			st, ok := statuses[r.Node]
			if !ok || st.Phase != drbd.PhaseApplied || st.Incarnation != r.Incarnation {
				done = false
			}
		}
		if done {
			out = append(out, s.Name)
		}
	}
	return out
}

// SnapshotNext decides, from the latest report of every node of a snapshot under way
// (its disks' nodes and its diskless ones), what comes next: "take" once all report I/O
// suspended, "taken" once all report it taken (each still holding I/O suspended: none
// resumes before the order that follows "taken"), "failed" (with the reason) as soon as
// one reports it aborted or failed. ok is false while some node has not reported (or
// the snapshot is not under way).
func SnapshotNext(s projections.RDSnapshot, statuses map[string]drbd.Status) (phase, reason string, ok bool) {
	if s.Phase != projections.SnapshotSuspending && s.Phase != projections.SnapshotTaking {
		return "", "", false
	}
	want := drbd.SnapSuspended
	if s.Phase == projections.SnapshotTaking {
		want = drbd.SnapTaken
	}
	all := true
	nodes := append(slices.Clone(s.Nodes), s.Diskless...)
	sort.Strings(nodes)
	for _, n := range nodes {
		var mine *drbd.SnapshotStatus
		st := statuses[n]
		for i := range st.Snapshots {
			if st.Snapshots[i].Name == s.Name && st.Snapshots[i].Seq == s.StartedSeq {
				mine = &st.Snapshots[i]
			}
		}
		switch {
		case mine == nil:
			all = false
		case mine.Phase == drbd.SnapAborted || mine.Phase == drbd.SnapFailed:
			return "failed", fmt.Sprintf("node %s: %s: %s", n, mine.Phase, mine.Error), true
		case mine.Phase != want && !(want == drbd.SnapSuspended && mine.Phase == drbd.SnapTaken):
			all = false
		}
	}
	if !all {
		return "", "", false
	}
	if want == drbd.SnapSuspended {
		return "take", "", true
	}
	return "taken", "", true
}

// GroupMember is one snapshot of a group snapshot as SnapshotGroupNext sees it: Found
// is false when its definition or snapshot is gone (or is another snapshot of the same
// name, from another group); Statuses are its replicas' latest reports by node.
type GroupMember struct {
	Ref      events.RDSnapshotRef
	Snapshot projections.RDSnapshot
	Found    bool
	Statuses map[string]drbd.Status
}

// SnapshotGroupNext is SnapshotNext for a group snapshot: the members move as one. It
// returns the phase every member still before it is to record: "take" once every
// member's nodes all report suspended (or it already takes), "taken" once every member's
// nodes all report taken (or it is taken), "failed" as soon as one member failed, is
// gone, or has a node reporting a failure. ok is false while nothing is due.
func SnapshotGroupNext(members []GroupMember) (phase, reason string, ok bool) {
	take, taken, suspending := true, true, false
	for _, m := range members {
		name := m.Ref.Resource + "/" + m.Ref.Name
		if !m.Found {
			return "failed", fmt.Sprintf("group snapshot: %s is gone", name), true
		}
		s := m.Snapshot
		next, why, due := SnapshotNext(s, m.Statuses)
		switch {
		case s.Phase == projections.SnapshotFailed:
			return "failed", fmt.Sprintf("group snapshot: %s failed: %s", name, s.Reason), true
		case due && next == "failed":
			return "failed", fmt.Sprintf("group snapshot: %s: %s", name, why), true
		case s.Phase == projections.SnapshotSuspending:
			take = take && due && next == "take"
			taken, suspending = false, true
		case s.Phase == projections.SnapshotTaking:
			taken = taken && due && next == "taken"
		}
	}
	switch {
	case taken:
		return "taken", "", true
	case take && suspending:
		return "take", "", true
	}
	return "", "", false
}

// InGroup reports whether s belongs to the group that names ref (a snapshot of the same
// name from another group, or alone, does not).
func InGroup(s projections.RDSnapshot, group []events.RDSnapshotRef) bool {
	return len(s.Group) > 0 && slices.Equal(s.Group, group)
}
