package drbd

// A small model of how DRBD decides what to sync when two disks connect, run over the
// seeding plans PlanSeeds makes. It checks the one property that matters: a replica
// is never seeded so that DRBD skips a sync that carries data (architecture.md,
// "Corrections"), and the day-0 scheme gives the bitmap resyncs it promises.
//
// The model, per volume and node:
//   - Metadata as drbdmeta keeps it (current, history, per-node-id bitmap UUIDs), the
//     content version of the disk (0 = day 0, n = after the n-th write, -1 = whatever a
//     fresh thick disk holds) and, per peer node id, the version since which the bitmap
//     slot for that node id records writes (a vacant slot records everything since
//     create-md).
//   - The UUID comparison, simplified from drbd_uuid_compare: both just created: none;
//     one just created: full sync from the other; equal current UUIDs: none; the peer's
//     bitmap UUID for me equals my current: I am bitmap sync target; my bitmap UUID for
//     the peer equals its current: I am bitmap sync source; the peer's current is in my
//     history: full sync, I am source (and the other way round); otherwise unrelated
//     data (DRBD refuses the connection). Primary bits are masked off.
//   - A write on a node rotates, as the kernel does, its current UUID into the bitmap
//     UUID of every node id that is not connected and has bitmap UUID 0, then draws a
//     new current UUID (connected peers follow); a write with every node id connected or
//     holding a bitmap UUID changes nothing but the data. A finished sync gives the
//     target the source's data, current and history UUIDs and the source's bitmap UUIDs
//     (and bitmaps) for the other node ids, and clears both sides' bitmap UUIDs for
//     each other.
//   - forget-peer (after a replica is removed) resets that node id's slot to a day-0
//     slot: the bitmap UUID and the bitmap of a never-used node id.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-io/cairn/storage/backing"
)

// The model's outcomes are the production SyncKind values (its decision is its own).
type syncKind = SyncKind

const (
	syncNone      = SyncNone
	syncBitmap    = SyncBitmap
	syncFull      = SyncFull
	syncUnrelated = SyncUnrelated
)

// decision is the outcome of a handshake; source is the sync source's node id (-1 for
// none and unrelated).
type decision struct {
	kind   syncKind
	source int
}

func (d decision) String() string {
	if d.source < 0 {
		return d.kind.String()
	}
	return fmt.Sprintf("%s from %d", d.kind, d.source)
}

type simNode struct {
	id    int
	md    Metadata
	data  int
	since [MaxNodeID + 1]int
	seen  [MaxNodeID + 1]bool // node ids this disk has been connected to
	// fresh: the disk still holds the metadata its seeding plan gave it (no handshake
	// succeeded yet). The invariants are checked on every handshake with a fresh disk.
	fresh bool
}

func (n *simNode) current() UUID { return n.md.GI(n.id).Current() &^ uuidPrimary }

// bitmapFor is n's bitmap UUID for node id peer.
func (n *simNode) bitmapFor(peer int) UUID { return n.md.GI(peer).Bitmap() &^ uuidPrimary }

func (n *simNode) history() []UUID {
	g := n.md.GI(n.id)
	return []UUID{g.UUID(GIHistory1) &^ uuidPrimary, g.UUID(GIHistory2) &^ uuidPrimary}
}

func (n *simNode) set(nodeID int, g GI) {
	if err := n.md.SetGI(nodeID, g); err != nil {
		panic(err)
	}
}

// setCurrent replaces n's current UUID, pushing the old one into the history (unless it
// is 0, UUID_JUST_CREATED or already the newest history UUID).
func (n *simNode) setCurrent(u UUID) {
	old, h := n.current(), n.history()
	g := GI{}.SetUUID(GICurrent, u)
	if old != 0 && old != UUIDJustCreated && old != h[0] {
		g = g.SetUUID(GIHistory1, old).SetUUID(GIHistory2, h[0])
	}
	n.set(n.id, g)
}

// compare is the model's handshake between a and b, the comparison described at the top
// of this file written out on the model's own state (current, history, bitmap UUID per
// node id), not with DecideSync: TestDecideSyncAgreesWithTheModel holds the production
// decision, which the simulated kernel uses, to this one.
func compare(a, b *simNode) decision {
	ca, cb := a.current(), b.current()
	switch {
	case ca == UUIDJustCreated && cb == UUIDJustCreated:
		return decision{syncNone, -1}
	case ca == UUIDJustCreated:
		return decision{syncFull, b.id}
	case cb == UUIDJustCreated:
		return decision{syncFull, a.id}
	case ca == cb:
		return decision{syncNone, -1}
	case b.bitmapFor(a.id) == ca:
		return decision{syncBitmap, b.id}
	case a.bitmapFor(b.id) == cb:
		return decision{syncBitmap, a.id}
	case slices.Contains(a.history(), cb):
		return decision{syncFull, a.id}
	case slices.Contains(b.history(), ca):
		return decision{syncFull, b.id}
	}
	return decision{syncUnrelated, -1}
}

// TestDecideSyncAgreesWithTheModel: on random metadata of two disks (UUIDs drawn from a
// small set, so that equal currents, bitmap and history matches all occur, primary bits
// set at random), DecideSync decides what the model's compare decides.
func TestDecideSyncAgreesWithTheModel(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 11))
	uuids := []UUID{0, UUIDJustCreated, 0xA0, 0xB0, 0xC0, 0xD0}
	draw := func() UUID { return uuids[rnd.IntN(len(uuids))] | UUID(rnd.IntN(2)) }
	for i := range 20000 {
		a, b := &simNode{id: 0, md: NewMetadata()}, &simNode{id: 1, md: NewMetadata()}
		for _, n := range []*simNode{a, b} {
			cur := draw()
			for cur&^uuidPrimary == 0 {
				cur = draw()
			}
			g := GI{}.SetUUID(GICurrent, cur).SetUUID(GIHistory1, draw()).SetUUID(GIHistory2, draw())
			n.set(n.id, g)
			n.set(1-n.id, GI{}.SetUUID(GIBitmap, draw()))
		}
		want := compare(a, b)
		k, aSource := DecideSync(a.md.GI(b.id), b.md.GI(a.id))
		got := decision{k, -1}
		if k == syncBitmap || k == syncFull {
			got.source = map[bool]int{true: a.id, false: b.id}[aSource]
		}
		if got != want {
			t.Fatalf("case %d: a %s / %s, b %s / %s: DecideSync says %s, the model %s", i,
				a.md.GI(a.id), a.md.GI(b.id), b.md.GI(b.id), b.md.GI(a.id), got, want)
		}
	}
}

// cluster is one volume's replicas.
type cluster struct {
	t         testing.TB
	rnd       *rand.Rand
	day0      UUID
	nodes     map[int]*simNode
	connected map[[2]int]bool
	version   int
	started   bool // the first replica exists (Day0 "First" is over)
	log       []string
	fresh     map[syncKind]int // decisions of handshakes with a freshly seeded disk
}

func newCluster(t testing.TB, seed uint64) *cluster {
	rnd := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	day0, err := NewDay0GI(randReader{rnd})
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, rnd: rnd, day0: day0, nodes: map[int]*simNode{}, connected: map[[2]int]bool{}, fresh: map[syncKind]int{}}
}

// randReader adapts math/rand to io.Reader for NewDay0GI.
type randReader struct{ r *rand.Rand }

func (r randReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.r.Uint32())
	}
	return len(p), nil
}

func pair(a, b int) [2]int { return [2]int{min(a, b), max(a, b)} }

func (c *cluster) logf(format string, args ...any) {
	c.log = append(c.log, fmt.Sprintf(format, args...))
}

// fail reports a violated invariant with the history that led to it.
func (c *cluster) fail(format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("%s\nhistory:\n  %s", fmt.Sprintf(format, args...), strings.Join(c.log, "\n  "))
}

// add creates a replica as the agent would: create-md, the plan's set-gi calls, then
// adjust (a handshake with every replica that is up, in node id order).
func (c *cluster) add(id int, p backing.Provider, fromDiskless, force bool) map[int]decision {
	c.t.Helper()
	if _, dup := c.nodes[id]; dup {
		c.t.Fatalf("node id %d already in use", id)
	}
	first := !c.started
	seeds, fullSync, err := PlanSeeds(SeedInput{NodeID: id, Provider: p, FromDiskless: fromDiskless, ForceInitialSync: force,
		Volumes: []SeedVolume{{Number: 0, Day0GI: c.day0.String(), First: first}}, Rand: randReader{c.rnd}})
	if err != nil {
		c.t.Fatal(err)
	}
	n := &simNode{id: id, md: NewMetadata(), fresh: !first}
	if err := n.md.Apply(seeds, 0); err != nil {
		c.t.Fatal(err)
	}
	switch {
	case first:
		n.data = 0 // the volume's day-0 content is whatever its first replica holds
	case fullSync || !p.ZeroesUnwritten():
		n.data = -1 // a fresh disk that is not known to read zeros
	default:
		n.data = 0 // zeros, the day-0 content
	}
	for m := range n.since {
		n.since[m] = n.data
	}
	c.started = true
	c.nodes[id] = n
	c.logf("add node id %d on %s (first %v, from diskless %v, forced %v): %d seeds, full sync %v", id, p, first, fromDiskless, force, len(seeds), fullSync)
	out := map[int]decision{}
	for _, m := range c.ids() {
		if m != id {
			out[m] = c.connect(id, m)
		}
	}
	return out
}

func (c *cluster) ids() []int {
	var ids []int
	for id := range c.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// connect runs the handshake between a and b, checks the decision against the data
// and carries out the sync. It returns the decision.
func (c *cluster) connect(a, b int) decision {
	c.t.Helper()
	na, nb := c.nodes[a], c.nodes[b]
	if c.connected[pair(a, b)] {
		return decision{syncNone, -1}
	}
	d := compare(na, nb)
	c.logf("connect %d (data v%d, current %s) and %d (data v%d, current %s): %s", a, na.data, na.current(), b, nb.data, nb.current(), d)
	if na.fresh || nb.fresh {
		c.fresh[d.kind]++
	} else {
		// Two replicas that have both synced before: outside this model (DRBD also uses
		// bitmap contents and dagtags here). Sync from the newer data.
		switch {
		case na.data > nb.data:
			d = decision{syncBitmap, a}
		case nb.data > na.data:
			d = decision{syncBitmap, b}
		default:
			d = decision{syncNone, -1}
		}
		c.logf("  (both synced before: %s)", d)
	}
	switch d.kind {
	case syncUnrelated:
		return d
	case syncNone:
		if na.data != nb.data {
			c.fail("DRBD would skip the sync between node ids %d (data v%d) and %d (data v%d)", a, na.data, b, nb.data)
		}
	default:
		src, tgt := na, nb
		if d.source == b {
			src, tgt = nb, na
		}
		if src.data < tgt.data || src.data < 0 && tgt.data != src.data {
			c.fail("node id %d (data v%d) would overwrite node id %d (data v%d)", src.id, src.data, tgt.id, tgt.data)
		}
		if d.kind == syncBitmap && (na.fresh || nb.fresh) && (tgt.data < 0 || src.since[tgt.id] > tgt.data) {
			c.fail("bitmap resync from node id %d to %d misses writes: the bitmap starts at v%d, the target holds v%d",
				src.id, tgt.id, src.since[tgt.id], tgt.data)
		}
		// The target now holds the source's data: it takes the source's UUIDs, and the
		// source's bitmaps for third node ids describe it as well as they describe the
		// source (DRBD copies bitmap UUIDs and slots after a resync).
		tgt.data = src.data
		h := src.history()
		tgt.set(tgt.id, GI{}.SetUUID(GICurrent, src.current()).SetUUID(GIHistory1, h[0]).SetUUID(GIHistory2, h[1]).
			SetFlag(GIConsistent, true).SetFlag(GIWasUpToDate, true))
		for m := 0; m <= MaxNodeID; m++ {
			if m != src.id && m != tgt.id {
				tgt.set(m, GI{}.SetUUID(GIBitmap, src.bitmapFor(m)))
				tgt.since[m] = src.since[m]
			}
		}
	}
	na.set(b, GI{}.SetUUID(GIBitmap, 0))
	nb.set(a, GI{}.SetUUID(GIBitmap, 0))
	na.since[b], nb.since[a] = na.data, nb.data
	na.seen[b], nb.seen[a] = true, true
	na.fresh, nb.fresh = false, false
	c.connected[pair(a, b)] = true
	return d
}

// group returns the node ids connected to id, id included.
func (c *cluster) group(id int) []int {
	g := []int{id}
	for _, m := range c.ids() {
		if m != id && c.connected[pair(id, m)] {
			g = append(g, m)
		}
	}
	return g
}

// write is an application write on node id (which must hold the newest data), seen by
// every replica connected to it.
func (c *cluster) write(id int) {
	g := c.group(id)
	c.version++
	rotated := false
	var prev UUID
	for _, m := range g {
		n := c.nodes[m]
		prev = n.current()
		for p := 0; p <= MaxNodeID; p++ {
			if p == m || slices.Contains(g, p) {
				continue
			}
			if n.bitmapFor(p) == 0 {
				n.set(p, GI{}.SetUUID(GIBitmap, prev))
				rotated = true
			}
		}
	}
	var next UUID
	if rotated {
		var err error
		if next, err = NewDay0GI(randReader{c.rnd}, prev); err != nil {
			c.t.Fatal(err)
		}
	}
	for _, m := range g {
		n := c.nodes[m]
		if rotated {
			n.setCurrent(next)
		}
		n.data = c.version
		for _, p := range g {
			n.since[p] = c.version
		}
	}
	c.logf("write v%d on node id %d, seen by %v (new current UUID: %v)", c.version, id, g, rotated)
}

// disconnect takes node id off the network (it keeps its disk).
func (c *cluster) disconnect(id int) {
	for k := range c.connected {
		if k[0] == id || k[1] == id {
			delete(c.connected, k)
		}
	}
	c.logf("disconnect node id %d", id)
}

// reconnect runs the handshakes of every pair that is not connected, in order.
func (c *cluster) reconnect() map[[2]int]decision {
	out := map[[2]int]decision{}
	ids := c.ids()
	for i, a := range ids {
		for _, b := range ids[i+1:] {
			if !c.connected[pair(a, b)] {
				out[pair(a, b)] = c.connect(a, b)
			}
		}
	}
	return out
}

// remove deletes the replica on node id; with forget, every other replica runs
// del-peer and forget-peer for it.
func (c *cluster) remove(id int, forget bool) {
	c.disconnect(id)
	delete(c.nodes, id)
	if forget {
		for _, n := range c.nodes {
			unused := -1
			for p := 0; p <= MaxNodeID; p++ {
				if p != n.id && p != id && !n.seen[p] {
					unused = p
					break
				}
			}
			if unused < 0 {
				n.set(id, GI{}.SetUUID(GIBitmap, 0))
				n.since[id] = -2 // every bit set
			} else {
				n.set(id, GI{}.SetUUID(GIBitmap, n.bitmapFor(unused)))
				n.since[id] = n.since[unused]
			}
			n.seen[id] = false
		}
	}
	c.logf("remove node id %d (forget-peer %v)", id, forget)
}

// newest returns a node id holding the newest data (the one to write on).
func (c *cluster) newest() int {
	best := -1
	for _, id := range c.ids() {
		if best < 0 || c.nodes[id].data > c.nodes[best].data {
			best = id
		}
	}
	return best
}

func TestSyncModelScenarios(t *testing.T) {
	type step func(c *cluster) decision
	add := func(id int, p backing.Provider, fromDiskless, force bool, with int) step {
		return func(c *cluster) decision {
			// Connect to `with` first, then to the rest.
			first := !c.started
			if first {
				c.add(id, p, fromDiskless, force)
				return decision{syncNone, -1}
			}
			others := c.ids()
			// add connects in node id order; to control which peer is first, take the
			// others down and bring them back after.
			var down []int
			for _, m := range others {
				if m != with {
					down = append(down, m)
				}
			}
			saved := map[int]*simNode{}
			for _, m := range down {
				saved[m] = c.nodes[m]
				delete(c.nodes, m)
			}
			d := c.add(id, p, fromDiskless, force)[with]
			for m, n := range saved {
				c.nodes[m] = n
			}
			for _, m := range down {
				c.connect(id, m)
			}
			return d
		}
	}
	write := func(c *cluster) decision { c.write(c.newest()); return decision{syncNone, -1} }
	tests := []struct {
		name  string
		steps []step
		want  decision // the decision of the last step
	}{
		{"add second on zfs_thin after writes: bitmap from the first",
			[]step{add(0, backing.ProviderZFSThin, false, false, -1), write, write, add(1, backing.ProviderZFSThin, false, false, 0)},
			decision{syncBitmap, 0}},
		{"add second before any write: still a (empty) bitmap resync, never none",
			[]step{add(0, backing.ProviderLVMThin, false, false, -1), add(1, backing.ProviderLVMThin, false, false, 0)},
			decision{syncBitmap, 0}},
		{"add second on thick lvm: full sync",
			[]step{add(0, backing.ProviderLVM, false, false, -1), write, add(1, backing.ProviderLVM, false, false, 0)},
			decision{syncFull, 0}},
		{"add second with force_initial_sync: full sync",
			[]step{add(0, backing.ProviderZFSThin, false, false, -1), write, add(1, backing.ProviderZFSThin, false, true, 0)},
			decision{syncFull, 0}},
		{"add third: bitmap from the first replica",
			[]step{add(0, backing.ProviderZFSThin, false, false, -1), write, add(1, backing.ProviderZFSThin, false, false, 0), write,
				func(c *cluster) decision { c.disconnect(1); return decision{syncNone, -1} }, write,
				func(c *cluster) decision { c.reconnect(); return decision{syncNone, -1} }, write,
				add(2, backing.ProviderZFSThin, false, false, 0)},
			decision{syncBitmap, 0}},
		{"add third meeting the second replica first: bitmap from it (it copied the day-0 slot)",
			[]step{add(0, backing.ProviderZFSThin, false, false, -1), write, add(1, backing.ProviderZFSThin, false, false, 0), write, write,
				add(2, backing.ProviderZFSThin, false, false, 1)},
			decision{syncBitmap, 1}},
		{"re-add under the same node id after forget-peer: bitmap",
			[]step{add(0, backing.ProviderZFSThin, false, false, -1), write, add(1, backing.ProviderZFSThin, false, false, 0), write,
				func(c *cluster) decision { c.remove(1, true); return decision{syncNone, -1} }, write,
				add(1, backing.ProviderZFSThin, false, false, 0)},
			decision{syncBitmap, 0}},
		{"re-add under the same node id without forget-peer: no bitmap resync, but never none",
			[]step{add(0, backing.ProviderZFSThin, false, false, -1), write, add(1, backing.ProviderZFSThin, false, false, 0), write,
				func(c *cluster) decision { c.remove(1, false); return decision{syncNone, -1} }, write,
				add(1, backing.ProviderZFSThin, false, false, 0)},
			decision{syncUnrelated, -1}},
		{"re-add under a new node id: bitmap from the day-0 slot",
			[]step{add(0, backing.ProviderZFSThin, false, false, -1), write, add(1, backing.ProviderZFSThin, false, false, 0), write,
				func(c *cluster) decision { c.remove(1, true); return decision{syncNone, -1} }, write,
				add(5, backing.ProviderZFSThin, false, false, 0)},
			decision{syncBitmap, 0}},
		{"tiebreaker promoted to diskful: full sync",
			[]step{add(0, backing.ProviderZFSThin, false, false, -1), write, add(1, backing.ProviderZFSThin, false, false, 0), write,
				add(2, backing.ProviderZFSThin, true, false, 0)},
			decision{syncFull, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, 1)
			var last decision
			for _, s := range tt.steps {
				last = s(c)
			}
			if last != tt.want {
				t.Fatalf("decision %s, want %s\nhistory:\n  %s", last, tt.want, strings.Join(c.log, "\n  "))
			}
			// Whatever happened, once everything is connected all replicas agree.
			c.reconnect()
			for _, id := range c.ids() {
				if c.nodes[id].data != c.version && !tt.want.isUnrelated() {
					t.Fatalf("node id %d holds v%d after reconnecting, want v%d\nhistory:\n  %s", id, c.nodes[id].data, c.version, strings.Join(c.log, "\n  "))
				}
			}
		})
	}
}

func (d decision) isUnrelated() bool { return d.kind == syncUnrelated }

// Random histories of the operations the control plane performs: adding replicas
// (every provider, promotions, forced syncs, new and reused node ids), writes,
// disconnects and removals. connect checks on every handshake of a freshly seeded disk
// that no data-carrying sync is skipped, no older disk overwrites a newer one and a
// bitmap resync covers every write the new disk lacks. With forget-peer after every
// removal no handshake of a new disk ends in "unrelated data"; skipping it (as a
// crashed agent might) costs that, never data.
func TestSyncModelProperty(t *testing.T) {
	for _, tt := range []struct {
		name       string
		skipForget int // one removal in skipForget skips forget-peer; 0 = never
	}{{"forget-peer after every removal", 0}, {"forget-peer sometimes skipped", 5}} {
		t.Run(tt.name, func(t *testing.T) {
			counts := map[syncKind]int{}
			for seed := uint64(0); seed < 2000; seed++ {
				c := newCluster(t, seed)
				c.add(0, backing.Providers[c.rnd.IntN(len(backing.Providers))], false, false)
				for range 25 {
					switch op := c.rnd.IntN(10); {
					case op < 3 && len(c.nodes) < 5:
						id := c.rnd.IntN(8)
						if _, used := c.nodes[id]; used {
							continue
						}
						p := backing.Providers[c.rnd.IntN(len(backing.Providers))]
						c.add(id, p, c.rnd.IntN(8) == 0, c.rnd.IntN(8) == 0)
					case op < 6:
						c.write(c.newest())
					case op < 7 && len(c.nodes) > 1:
						c.disconnect(c.ids()[c.rnd.IntN(len(c.nodes))])
					case op < 8 && len(c.nodes) > 1:
						id := c.ids()[c.rnd.IntN(len(c.nodes))]
						if id == c.newest() {
							continue // keep the newest data alive
						}
						c.remove(id, tt.skipForget == 0 || c.rnd.IntN(tt.skipForget) != 0)
					default:
						c.reconnect()
					}
				}
				c.reconnect()
				for k, n := range c.fresh {
					counts[k] += n
				}
			}
			t.Logf("handshakes of new replicas: %d none, %d bitmap, %d full, %d unrelated",
				counts[syncNone], counts[syncBitmap], counts[syncFull], counts[syncUnrelated])
			if counts[syncBitmap] == 0 {
				t.Fatal("the day-0 scheme never produced a bitmap resync")
			}
			if tt.skipForget == 0 && counts[syncUnrelated] > 0 {
				t.Fatalf("%d handshakes of new replicas ended in unrelated data although forget-peer always ran", counts[syncUnrelated])
			}
		})
	}
}
