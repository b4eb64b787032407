package drbdagent

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn/drbd"
)

// Plan is what remains to do for one resource on this node, decided by Decide from the
// desired state and the state file alone (no I/O).
type Plan struct {
	// Ignore is set (with the reason) when the Desired is older than what this node
	// already carried out: nothing is done.
	Ignore string
	// Refuse is set (with the reason) when the Desired cannot be carried out from the
	// state the node is in; nothing is done and the status says why.
	Refuse string
	// Remove tears the resource down: down (when Down), wipe-md of the disks, backing
	// volumes freed, resource file and state file removed.
	Remove bool

	// Retire is the state of an older incarnation to retire before starting over:
	// down first when RetireDown, then wipe-md and remove its backing volumes.
	Retire     *State
	RetireDown bool

	// Backing: create (or find) the backing volumes.
	Backing bool
	// Grow are the volumes whose backing holds less than the Desired size: grown
	// before anything else (and, while DRBD has them detached, their metadata moved to
	// the new end with drbdmeta check-resize).
	Grow []int
	// AddVolumes are volumes the Desired has that this incarnation, its metadata
	// created, does not (vd.create on a deployed definition): backing, create-md and
	// their seeds before the adjust. DropVolumes are volumes it has that the Desired no
	// longer has: after the adjust (which detaches them), wipe-md and backing removed.
	AddVolumes, DropVolumes []int
	// Rollback: take the resource down if it is up, make every backing volume hold the
	// snapshot again, create-md and apply the rollback's seeds (once per rollback).
	Rollback bool
	// Resize are the volumes DRBD has not been resized for since their backing grew:
	// drbdadm resize after the adjust (only while Active).
	Resize []int
	// CreateMD: drbdmeta create-md on every volume.
	CreateMD bool
	// Seed: apply every seed of the Desired (set-gi is idempotent), then verify.
	Seed bool
	// Adjust brings the resource up / in line with the file; Down takes it down
	// (deactivated), keeping disk, metadata and file.
	Adjust bool
	Down   bool
	// DropDisks: the replica became diskless in the same incarnation; after the adjust
	// (which detaches) wipe-md and free the backing volumes.
	DropDisks bool
	// Forget are the node ids of peers that left (or whose node id now belongs to
	// another node): del-peer, and forget-peer when this replica has a disk.
	Forget []int
}

// Steps names what the plan changes on the host, for the agent's log (fileChanged: the
// resource file differs from the installed one); nothing when it changes nothing (a
// backing volume that exists and an adjust of an unchanged file are no news).
func (p Plan) Steps(fileChanged bool) []string {
	var out []string
	add := func(on bool, step string) {
		if on {
			out = append(out, step)
		}
	}
	add(p.Remove, "tear down")
	add(p.Retire != nil, "retire an older incarnation")
	add(len(p.Grow) > 0, fmt.Sprintf("grow backing volumes %v", p.Grow))
	add(p.Rollback, "roll back to a snapshot")
	add(len(p.AddVolumes) > 0, fmt.Sprintf("add volumes %v", p.AddVolumes))
	add(p.CreateMD, "create metadata")
	add(p.Seed, "seed the generation identifiers")
	add(p.Adjust && fileChanged, "adjust to a new resource file")
	add(p.Down, "take down")
	add(len(p.Resize) > 0, fmt.Sprintf("resize volumes %v", p.Resize))
	add(len(p.DropVolumes) > 0, fmt.Sprintf("drop volumes %v", p.DropVolumes))
	add(p.DropDisks, "drop the disks")
	add(len(p.Forget) > 0, fmt.Sprintf("forget peers %v", p.Forget))
	return out
}

// Decide returns the plan for desired d (nil: removal) given the state file st (nil:
// none) and whether a resource file is installed. The rules (docs/agent.md):
//
//   - No Desired, or no Local: Remove when anything is left (state or file); Down when
//     the resource may be up (adjusted, or a file without state).
//   - A Desired of an older incarnation than st's, or an older revision: Ignore.
//   - A newer incarnation than st's: Retire st (RetireDown when it was adjusted and
//     had disks) and plan the new incarnation from scratch. The old disk and metadata
//     belong to the old incarnation: a plan is never applied to them.
//   - Diskful: Backing always (idempotent); CreateMD while not md-created, Seed while
//     not seeded — both only while not adjusted. Grow the volumes whose recorded size
//     is below the Desired's (a volume never shrinks: a smaller size grows nothing);
//     Resize, while Active, those grown and not yet resized. Adjusted with no metadata recorded is
//     refused (the metadata of a live replica is missing).
//   - Diskless with disks recorded (toggled to diskless): DropDisks after the adjust.
//   - Adjust when Active; Down when not Active and it was adjusted.
//   - Forget (only while Active: del-peer and forget-peer need the resource up): peers
//     of the last adjusted configuration whose node id is gone from the replicas or now
//     names another node.
func Decide(d *drbd.Desired, st *State, installed bool) Plan {
	if d == nil || d.Local == nil {
		if st == nil && !installed {
			return Plan{}
		}
		return Plan{Remove: true, Down: installed || st != nil && st.Adjusted}
	}
	l := d.Local
	var p Plan
	cur := st
	if st != nil {
		switch {
		case l.Incarnation < st.Incarnation:
			return Plan{Ignore: fmt.Sprintf("desired incarnation %d is older than incarnation %d on this node", l.Incarnation, st.Incarnation)}
		case l.Incarnation == st.Incarnation && d.Revision < st.Revision:
			return Plan{Ignore: fmt.Sprintf("desired revision %d is older than revision %d carried out", d.Revision, st.Revision)}
		case l.Incarnation > st.Incarnation:
			p.Retire = st
			p.RetireDown = st.Adjusted && len(st.Disks) > 0
			cur = nil
		}
	}
	if cur == nil {
		cur = &State{}
	}
	if l.Diskless {
		p.DropDisks = len(cur.Disks) > 0
	} else {
		p.Backing = true
		switch {
		case cur.Adjusted && !cur.MDCreated:
			return Plan{Refuse: fmt.Sprintf("incarnation %d was adjusted diskless or without metadata; a disk needs a new incarnation (replica.toggle-disk)", l.Incarnation)}
		case !cur.Adjusted && !cur.MDCreated:
			p.CreateMD, p.Seed = true, true
		case !cur.Adjusted && !cur.Seeded:
			p.Seed = true
		}
	}
	if !l.Diskless {
		p.Rollback = l.Rollback != nil && cur.MDCreated && cur.RolledBack < l.Rollback.Seq
		if cur.MDCreated && len(d.Volumes) > 0 { // a deployed definition always has a volume
			p.AddVolumes, p.DropVolumes = volumeChanges(d.Volumes, cur)
		}
		p.Grow, p.Resize = growth(d.Volumes, cur)
		if !d.Active {
			p.Resize = nil
		}
	}
	if d.Active {
		p.Adjust = true
	} else {
		p.Down = cur.Adjusted
	}
	if p.Retire == nil && d.Active {
		p.Forget = leftPeers(cur.Peers, d)
	}
	return p
}

// volumeChanges returns the volumes of vols that st has no disk for (or is still
// adding), and the disks of st whose volume vols no longer has, both sorted.
func volumeChanges(vols []drbd.Volume, st *State) (add, drop []int) {
	want := map[int]bool{}
	for _, v := range vols {
		want[v.Number] = true
		if _, ok := st.Disks[v.Number]; !ok || slices.Contains(st.Adding, v.Number) {
			add = append(add, v.Number)
		}
	}
	for v := range st.Disks {
		if !want[v] {
			drop = append(drop, v)
		}
	}
	sort.Ints(add)
	sort.Ints(drop)
	return add, drop
}

// growth returns the volumes of vols whose backing in st holds less than their size
// (grow) and those DRBD was not resized for since (resize; the grown ones included).
// A volume without a recorded size (a new one, or a state from before resizes) grows
// nothing.
func growth(vols []drbd.Volume, st *State) (grow, resize []int) {
	for _, v := range vols {
		if _, ok := st.Disks[v.Number]; !ok {
			continue
		}
		if have := st.Sizes[v.Number]; have != 0 && have < v.SizeKiB {
			grow = append(grow, v.Number)
		}
		if done := st.Resized[v.Number]; done != 0 && done < v.SizeKiB || slices.Contains(grow, v.Number) {
			resize = append(resize, v.Number)
		}
	}
	return grow, resize
}

// leftPeers returns the node ids in peers that d no longer has, that now belong to
// another node, or whose replica is a new incarnation (removed and added again under
// the same node id), sorted. A recorded peer without an incarnation (state written
// before desired states carried one) matches any incarnation of the same node.
func leftPeers(peers map[int]string, d *drbd.Desired) []int {
	now := PeerKeysOf(d)
	var out []int
	for id, was := range peers {
		is, ok := now[id]
		if !ok || !samePeer(was, is) {
			out = append(out, id)
		}
	}
	sort.Ints(out)
	return out
}

// samePeer compares two recorded peers ("node" or "node#incarnation").
func samePeer(was, is string) bool {
	if was == is {
		return true
	}
	wn, _, wok := strings.Cut(was, "#")
	in, _, iok := strings.Cut(is, "#")
	return wn == in && (!wok || !iok)
}

// PeerKeysOf returns d's replicas other than d.Node's as the state file records them:
// node id -> "node#incarnation" ("node" when the desired state names none).
func PeerKeysOf(d *drbd.Desired) map[int]string {
	out := map[int]string{}
	for _, r := range d.Replicas {
		if r.Node == d.Node {
			continue
		}
		out[r.NodeID] = r.Node
		if r.Incarnation != 0 {
			out[r.NodeID] = r.Node + "#" + strconv.FormatUint(r.Incarnation, 10)
		}
	}
	return out
}

// PeersOf returns d's replicas other than d.Node's, node id -> node.
func PeersOf(d *drbd.Desired) map[int]string {
	out := map[int]string{}
	for _, r := range d.Replicas {
		if r.Node != d.Node {
			out[r.NodeID] = r.Node
		}
	}
	return out
}
