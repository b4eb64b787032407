// Package dispatch turns the resource views into per-node desired state: for every
// (node, resource) the projector queued in its outbox it publishes the node's
// drbd.Desired on <prefix>.node.<node>.drbd.<resource> (CAIRN_NODES keeps the latest per
// subject), and an empty message when the node no longer holds the resource; likewise a
// node's storage pools (<prefix>.node.<node>.sp.<pool>, backing.PoolSpec) and shared pools
// (<prefix>.node.<node>.zpool.<pool>).
package dispatch

import (
	"slices"
	"strconv"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/cairn-io/cairn/storage/zpool"
)

// AutoQuorum is the DrbdOptions/auto-quorum in force for rd: the definition's property,
// else its group's, else the controller's ("" when none: the default policy).
func AutoQuorum(rd projections.ResourceDefinition, group *projections.ResourceGroup, controller projections.ControllerOptions) string {
	if v := rd.Properties[drbd.AutoQuorumKey]; v != "" {
		return v
	}
	if group != nil {
		if v := group.Properties[drbd.AutoQuorumKey]; v != "" {
			return v
		}
	}
	return controller.AutoQuorum
}

// Desired builds the desired state of rd on node. ok is false when node holds no
// replica of rd: the node must tear the resource down. Options resolve controller ->
// group -> definition -> the node's replica, over Cairn's quorum default for the number
// of voters as DrbdOptions/auto-quorum says (AutoQuorum). nodes gives every replica's host name and address.
func Desired(rd projections.ResourceDefinition, group *projections.ResourceGroup, nodes map[string]projections.NodeSpec,
	controller projections.ControllerOptions, node string) (d drbd.Desired, ok bool) {
	local, has := rd.Replica(node)
	if !has {
		return drbd.Desired{}, false
	}
	// The revision is the newest of every input: a change of the group's or the
	// controller's options, or of a peer's address, is newer desired state too.
	d = drbd.Desired{Resource: rd.Name, Node: node, Revision: max(rd.Seq, controller.Seq), Active: !local.Inactive, Port: rd.Port}
	if group != nil {
		d.Revision = max(d.Revision, group.OptionsSeq)
	}
	for _, r := range rd.Replicas {
		spec := nodes[r.Node]
		d.Revision = max(d.Revision, spec.AddressSeq)
		rep := drbd.Replica{Node: r.Node, Host: spec.Host, Address: spec.Address, NodeID: r.NodeID,
			Diskless: r.Diskless, Tiebreaker: r.Tiebreaker, Minors: map[int]int{}, Incarnation: r.Incarnation}
		for _, m := range r.Minors {
			rep.Minors[m.Volume] = m.Minor
		}
		d.Replicas = append(d.Replicas, rep)
	}
	for _, v := range rd.Volumes {
		d.Volumes = append(d.Volumes, drbd.Volume{Number: v.Volume, SizeKiB: v.SizeKiB, Day0GI: v.Day0GI})
	}
	var groupOpts drbd.Options
	if group != nil {
		groupOpts = group.DRBDOptions
	}
	d.Options = drbd.WithQuorumPolicy(drbd.Resolve(controller.Options, groupOpts, rd.DRBDOptions, local.DRBDOptions), d.Replicas,
		AutoQuorum(rd, group, controller))
	d.Local = &drbd.Local{NodeID: local.NodeID, Diskless: local.Diskless, Provider: local.Provider, Pool: local.Pool,
		Incarnation: local.Incarnation, Seeds: local.Seeds, FullSync: local.FullSync, RestoreFrom: local.RestoreFrom,
		RestoreBackup: local.RestoreBackup}
	d.Local.Filesystems = FilesystemOrders(rd, group, node)
	if rb := rd.Rollback; rb != nil && !local.Diskless && local.Incarnation < rb.Seq {
		current := map[int]drbd.UUID{}
		for v, hex := range rb.Current {
			n, _ := strconv.Atoi(v)
			current[n], _ = drbd.ParseUUID(hex)
		}
		seeds, _ := drbd.PlanRestoreSeeds(local.NodeID, current) // checked when the event was decided
		d.Local.Rollback = &drbd.Rollback{Snapshot: rb.Snapshot, Seq: rb.Seq, Seeds: seeds}
		d.Revision = max(d.Revision, rb.Seq)
	}
	for _, s := range rd.Snapshots {
		if slices.Contains(s.Nodes, node) || slices.Contains(s.Diskless, node) {
			d.Snapshots = append(d.Snapshots, drbd.SnapshotOrder{Name: s.Name, Seq: s.StartedSeq, Phase: snapshotOrders[s.Phase]})
		}
	}
	for _, b := range rd.Backups {
		if b.Node == node && b.Phase == projections.BackupUploading {
			o := drbd.BackupOrder{ID: b.ID, Seq: b.StartedSeq, Snapshot: b.Snapshot, Remote: b.Remote, Base: b.Base}
			if base, ok := rd.Backup(b.Remote, b.Base); ok {
				o.BaseManifestSHA256 = base.ManifestSHA256
			}
			d.Backups = append(d.Backups, o)
		}
	}
	return d, true
}

// FilesystemOrders are the filesystems node makes on rd's volumes: every volume that
// wants one (projections.VolumeDefinition.FilesystemWanted) and has none recorded yet,
// when node holds the definition's first disk (the diskful replica with the lowest node
// id); none elsewhere. MkfsParams, User and Group resolve like the type (volume,
// definition, group).
func FilesystemOrders(rd projections.ResourceDefinition, group *projections.ResourceGroup, node string) []drbd.FilesystemOrder {
	first := slices.IndexFunc(rd.Replicas, func(r projections.Replica) bool { return !r.Diskless })
	if first < 0 || rd.Replicas[first].Node != node {
		return nil
	}
	var out []drbd.FilesystemOrder
	for _, v := range rd.Volumes {
		if v.FilesystemWanted == "" || v.Filesystem != nil {
			continue
		}
		out = append(out, drbd.FilesystemOrder{Volume: v.Volume, Type: v.FilesystemWanted,
			Params: projections.FilesystemProperty(v, rd, group, "FileSystem/MkfsParams"),
			User:   projections.FilesystemProperty(v, rd, group, "FileSystem/User"),
			Group:  projections.FilesystemProperty(v, rd, group, "FileSystem/Group")})
	}
	return out
}

// snapshotOrders maps a snapshot's phase to what its nodes do.
var snapshotOrders = map[string]string{
	projections.SnapshotSuspending: drbd.SnapSuspend,
	projections.SnapshotTaking:     drbd.SnapTake,
	projections.SnapshotTaken:      drbd.SnapKeep,
	projections.SnapshotFailed:     drbd.SnapAbort,
}

// PoolDesired builds the desired pool state of node: an import for the node holding the
// grant of an uncontested pool; ok is false for every other node (export if imported).
func PoolDesired(p projections.Pool, node string) (zpool.Desired, bool) {
	if p.Owner != node || p.Contested {
		return zpool.Desired{}, false
	}
	return zpool.Desired{Pool: p.Name, Node: node, Devices: p.Devices, GrantSeq: p.GrantSeq, Revision: p.Seq}, true
}

// PoolSpec is what node's agent needs of a storage pool to measure and report it.
func PoolSpec(sp projections.StoragePool) backing.PoolSpec {
	return backing.PoolSpec{Node: sp.Node, Name: sp.Name, Provider: sp.Provider, Pool: sp.Pool, Revision: sp.CreatedSeq, Devices: sp.Devices}
}
