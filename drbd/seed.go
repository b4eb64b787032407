package drbd

import (
	"fmt"
	"io"
	"sort"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/storage/backing"
)

// DefaultMaxPeers is the number of bitmap slots create-md reserves when the resource
// has at most that many peers, the same default as LINSTOR's peer slots.
const DefaultMaxPeers = 7

// MaxPeers returns the max-peers argument of create-md for a replica of a resource with
// `replicas` replicas (this one included): at least DefaultMaxPeers, and always one more
// bitmap slot than there are peers, capped at DRBD's 31.
//
// Why one spare slot: DRBD tracks every write in every bitmap slot not yet bound to a
// peer, so a vacant slot holds "everything written since day 0". When a replica with a
// node id this disk has never seen connects, the kernel binds a vacant slot to it and
// the day-0 bitmap UUID seeded for that node id (see PlanSeeds) lets it resync just
// those blocks. With every slot bound, the kernel refuses the peer ("Not enough free
// bitmap slots") or falls back to a full sync. Diskless peers (tiebreakers, clients)
// take no slot (drbdadm gives them --bitmap=no), and a removed peer's slot is vacant
// again only after forget-peer (see ForgetPeer), so the spare covers the next addition.
// max-peers is fixed when the metadata is created; more slots later need new metadata.
func MaxPeers(replicas int) int {
	n := max(DefaultMaxPeers, replicas)
	return min(n, MaxPeersMax)
}

// SeedInput describes one replica's new disk for PlanSeeds.
type SeedInput struct {
	// NodeID is the replica's DRBD node id (0..31).
	NodeID int
	// Provider is the replica's storage provider; only providers whose fresh volumes
	// read back zeros (backing.Provider.ZeroesUnwritten) may start from day 0.
	Provider backing.Provider
	// Volumes are the volumes to plan.
	Volumes []SeedVolume
	// ForceInitialSync asks for a full initial sync even on zeroing providers.
	ForceInitialSync bool
	// FromDiskless is set when the replica was diskless (a tiebreaker or a client) and
	// gets a disk now: its peers' slots for its node id are not day-0 slots, so it gets
	// a full sync.
	FromDiskless bool
	// Rand draws the current UUID of a volume's first replica (crypto/rand.Reader in
	// production); needed only when some volume is First.
	Rand io.Reader
}

// SeedVolume is one volume of a SeedInput.
type SeedVolume struct {
	Number int
	// Day0GI is the volume definition's day-0 UUID (Volume.Day0GI, hex).
	Day0GI string
	// First is set when no replica of the volume holds data yet and this replica is
	// the one the volume starts on: its disk is declared UpToDate as it is.
	First bool
}

// PlanSeeds decides, per volume, the set-gi calls to make on a replica's new disk
// after `drbdmeta create-md` (with MaxPeers) and before the first adjust — Cairn's day-0
// scheme (facts.md, architecture.md "Corrections"):
//
//   - The volume's first replica (First): its own node id gets `RANDOM:DAY0:::1:1`
//     (a fresh current UUID, bitmap UUID day 0, consistent, was-up-to-date) and every
//     other node id `:DAY0::::` (bitmap UUID day 0 and nothing else). The first
//     replica's content is the data, whatever its provider; ForceInitialSync and
//     FromDiskless do not apply (there is nothing to sync from). RANDOM is drawn from
//     Rand and never equals day 0, so a later day-0 replica never looks in sync. (On a
//     thick first replica, blocks nobody ever wrote keep whatever the disk held, and a
//     later zeroing replica reads zeros there: no written data differs, but drbdadm
//     verify reports those blocks.)
//   - A later replica on a provider whose fresh volumes read zeros, not forced, not
//     promoted from diskless: own node id `DAY0::::1:1`, every other `DAY0:::::`. Its
//     disk then equals the volume as it was at day 0; each existing replica holds the
//     day-0 bitmap UUID for its node id and a bitmap of everything written since, and
//     resyncs just that (a bitmap resync, it is the sync source).
//   - Otherwise (thick provider, ForceInitialSync, FromDiskless): no seeds for the
//     volume. The metadata stays as create-md left it (UUID_JUST_CREATED) and DRBD does
//     a full sync from an UpToDate peer.
//
// Which node ids: all of 0..31, not just the replicas that exist now. drbdmeta keeps a
// bitmap UUID for every node id whether or not it has a bitmap slot, so the first
// replica's day-0 bitmap UUID is already in place for any node id a replica gets later
// (a third replica, a re-added one under a new node id); a node id left at 0 would
// match nothing in the handshake and cost a full sync, or leave the peers unable to
// agree at all. Seeds are ordered by volume (as given), then node id.
//
// fullSync is true when at least one volume gets no seeds (that volume syncs fully);
// seeds are then still returned for the other volumes. Errors: invalid_argument naming
// the field for a node id out of 0..31, a Day0GI that is not a valid day-0 UUID (see
// ValidDay0), a First volume without Rand or a duplicate volume number; the error of
// NewDay0GI when Rand fails.
func PlanSeeds(in SeedInput) (seeds []Seed, fullSync bool, err error) {
	if in.NodeID < 0 || in.NodeID > MaxNodeID {
		return nil, false, cairn.InvalidField("node_id", "node id must be 0..%d, got %d", MaxNodeID, in.NodeID)
	}
	seen := map[int]bool{}
	for i, v := range in.Volumes {
		field := fmt.Sprintf("volumes[%d]", i)
		if seen[v.Number] {
			return nil, false, cairn.InvalidField(field+".number", "volume %d is listed twice", v.Number)
		}
		seen[v.Number] = true
		day0, err := ParseUUID(v.Day0GI)
		if err == nil {
			err = ValidDay0(day0)
		}
		if err != nil {
			return nil, false, cairn.InvalidField(field+".day0_gi", "volume %d: %v", v.Number, err)
		}
		own, other, ok := GI{}, GI{}, true
		switch {
		case v.First:
			if in.Rand == nil {
				return nil, false, cairn.InvalidField("rand", "volume %d is the first replica's and needs a random source for its current UUID", v.Number)
			}
			current, err := NewDay0GI(in.Rand, day0)
			if err != nil {
				return nil, false, fmt.Errorf("planning the seeds of volume %d: %w", v.Number, err)
			}
			own = own.SetUUID(GICurrent, current).SetUUID(GIBitmap, day0).
				SetFlag(GIConsistent, true).SetFlag(GIWasUpToDate, true)
			other = other.SetUUID(GIBitmap, day0)
		case in.Provider.ZeroesUnwritten() && !in.ForceInitialSync && !in.FromDiskless:
			own = own.SetUUID(GICurrent, day0).SetFlag(GIConsistent, true).SetFlag(GIWasUpToDate, true)
			other = other.SetUUID(GICurrent, day0)
		default:
			ok = false
		}
		if !ok {
			fullSync = true
			continue
		}
		for n := 0; n <= MaxNodeID; n++ {
			g := other
			if n == in.NodeID {
				g = own
			}
			seeds = append(seeds, Seed{Volume: v.Number, NodeID: n, GI: g.String()})
		}
	}
	return seeds, fullSync, nil
}

// SnapshotRef names a snapshot of a resource definition a new replica's disks are
// restored from (Local.RestoreFrom).
type SnapshotRef struct {
	Resource string `json:"resource"`
	Snapshot string `json:"snapshot"`
}

// PlanRestoreSeeds plans the set-gi calls of a disk restored from a snapshot, on node
// id id: fresh metadata (create-md) whose own GI has current (one UUID per volume, the
// same on every replica restored from the same snapshot), consistent and up to date.
// The snapshot's copies are identical, so replicas restored together connect without a
// resync; every bitmap UUID stays 0 (create-md's), so any replica added later is no
// day-0 replica of this data and gets a full sync (the definition forces it).
func PlanRestoreSeeds(id int, current map[int]UUID) ([]Seed, error) {
	if id < 0 || id > MaxNodeID {
		return nil, fmt.Errorf("node id must be 0..%d, got %d", MaxNodeID, id)
	}
	vols := make([]int, 0, len(current))
	for v := range current {
		vols = append(vols, v)
	}
	sort.Ints(vols)
	var seeds []Seed
	for _, v := range vols {
		if current[v] == 0 || current[v] == UUIDJustCreated {
			return nil, fmt.Errorf("volume %d: restore current UUID %s is not a data UUID", v, current[v])
		}
		g := GI{}.SetUUID(GICurrent, current[v]).SetFlag(GIConsistent, true).SetFlag(GIWasUpToDate, true)
		seeds = append(seeds, Seed{Volume: v, NodeID: id, GI: g.String()})
	}
	return seeds, nil
}
