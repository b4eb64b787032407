package resources

import (
	"fmt"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// Decisions of the storage-pool verbs that read one pool.

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
// (node, pool) and precondition_failed naming the resources whose disks are on it (and
// reading them: a refusal is confirmed on each).
func decideStoragePoolDelete(r *decide.Reads, c StoragePoolDelete) (*events.StoragePoolDeleted, error) {
	v := r.View()
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
		// Unchecked: a definition that would take a disk in the pool claims the node;
		// the ones that use it now are read below.
		rd, ok, err := v.Unchecked().ResourceDefinition(name)
		if err != nil {
			return nil, err
		}
		if rep, has := rd.Replica(c.Node); ok && has && !rep.Diskless && rep.StoragePool == c.Name {
			users = append(users, name)
		}
	}
	for _, name := range users {
		if err := r.Of("rd", name); err != nil {
			return nil, err
		}
	}
	if len(users) > 0 {
		return nil, cairn.Errorf(cairn.CodePreconditionFailed, "storage pool %s on node %s holds the disks of %d resource(s) (%s); remove them or make them diskless first",
			c.Name, c.Node, len(users), strings.Join(users[:min(len(users), 10)], ", ")).WithDetails(map[string]any{"resources": users, "in_use": true})
	}
	return &events.StoragePoolDeleted{Node: c.Node, Name: c.Name}, nil
}
