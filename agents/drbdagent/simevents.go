package drbdagent

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
)

// simObj is one events2 object of the simulated kernel: its key, the object word, the
// fields that identify it and the rest.
type simObj struct {
	key, object, ident, fields string
}

func (o simObj) line(verb string) string {
	if verb == drbdutils.VerbDestroy {
		return verb + " " + o.object + " " + o.ident
	}
	return verb + " " + o.object + " " + o.ident + " " + o.fields
}

// view computes this node's events2 objects of rd from the simulated kernel state.
func (s *Sim) view(rd string) ([]simObj, *simReg) {
	reg, err := loadReg(s.regPath(rd, s.Node))
	if err != nil || reg == nil || !reg.Up {
		return nil, reg
	}
	name := "name:" + rd
	suspended := "no"
	if reg.Suspended {
		suspended = "user"
	}
	objs := []simObj{{key: "resource", object: drbdutils.ObjectResource, ident: name}}
	localUpToDate := !reg.Diskless && len(reg.Volumes) > 0
	for _, sv := range reg.Volumes {
		localUpToDate = localUpToDate && sv.DiskState == "UpToDate"
	}
	connected, peerUpToDate := 0, false
	vols := slices.Sorted(maps.Keys(reg.Volumes))
	client := "no"
	if reg.Diskless {
		client = "yes"
	}
	for _, v := range vols {
		sv := reg.Volumes[v]
		objs = append(objs, simObj{key: "device:" + strconv.Itoa(v), object: drbdutils.ObjectDevice,
			ident:  fmt.Sprintf("%s volume:%d minor:%d", name, v, sv.Minor),
			fields: fmt.Sprintf("disk:%s client:%s size:%d written:%d", sv.DiskState, client, sv.SizeKiB, sv.Written*4)})
	}
	peers := slices.Sorted(maps.Keys(reg.Peers))
	for _, p := range peers {
		host := reg.PeerHosts[p]
		if host == "" {
			host = reg.Peers[p]
		}
		c := reg.Conns[p]
		if simDead(s.Dir, reg.Peers[p]) {
			c = nil // its host is gone: the connection is lost
		}
		var peer *simReg
		state, role := "Connecting", "Unknown"
		if c != nil {
			state = c.State
			if c.State == "Connected" {
				role = "Secondary"
				peer, _ = loadReg(s.regPath(rd, reg.Peers[p]))
				if peer != nil && peer.Primary {
					role = "Primary"
				}
				connected++
				if peer != nil && !peer.Diskless && len(peer.Volumes) > 0 {
					up := true
					for _, pv := range peer.Volumes {
						up = up && pv.DiskState == "UpToDate"
					}
					peerUpToDate = peerUpToDate || up
				}
			}
		}
		ident := fmt.Sprintf("%s peer-node-id:%d conn-name:%s", name, p, host)
		objs = append(objs, simObj{key: "connection:" + strconv.Itoa(p), object: drbdutils.ObjectConnection, ident: ident,
			fields: fmt.Sprintf("connection:%s role:%s", state, role)})
		for _, v := range vols {
			rep, pdisk, pclient := "Off", "DUnknown", "no"
			if peer != nil {
				rep = "Established"
				if peer.Diskless {
					pdisk, pclient = "Diskless", "yes"
				} else if pv := peer.Volumes[v]; pv != nil {
					pdisk = pv.DiskState
				}
			}
			objs = append(objs, simObj{key: fmt.Sprintf("peer-device:%d:%d", p, v), object: drbdutils.ObjectPeerDevice,
				ident:  fmt.Sprintf("%s volume:%d", ident, v),
				fields: fmt.Sprintf("replication:%s peer-disk:%s peer-client:%s resync-suspended:no out-of-sync:0", rep, pdisk, pclient)})
		}
	}
	// The sim's model of DRBD's promotion: it may promote with up-to-date data (its own
	// disk or a connected peer's; the sim has no quorum), scoring 10000 for its own
	// up-to-date disk, plus 101, plus one per connected peer (the kernel's 10101 alone,
	// 10102 with one peer: testdata/events2_drbd_utils_v9.22.0.txt); 0 when it may not.
	may, score := "no", 0
	if localUpToDate || peerUpToDate {
		may, score = "yes", 101+connected
		if localUpToDate {
			score += 10000
		}
	}
	role := "Secondary"
	if reg.Primary {
		role, may = "Primary", "no" // DRBD's may_promote is no while it is Primary
	}
	objs[0].fields = fmt.Sprintf("role:%s suspended:%s may_promote:%s promotion_score:%d", role, suspended, may, score)
	return objs, reg
}

// refresh emits the events2 lines that take the last emitted view of rd to the current
// one: create/change/destroy, and for every sync not emitted yet a SyncSource or
// SyncTarget line with its out-of-sync before the final Established.
func (s *Sim) refresh(rd string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.views == nil {
		s.views, s.syncSeen = map[string][]simObj{}, map[string]map[string]int64{}
	}
	objs, reg := s.view(rd)
	old := map[string]simObj{}
	for _, o := range s.views[rd] {
		old[o.key] = o
	}
	seen := s.syncSeen[rd]
	if seen == nil {
		seen = map[string]int64{}
		s.syncSeen[rd] = seen
	}
	var lines []string
	now := map[string]bool{}
	for _, o := range objs {
		now[o.key] = true
		prev, had := old[o.key]
		if o.object == drbdutils.ObjectPeerDevice && reg != nil {
			var p, v int
			fmt.Sscanf(o.key, "peer-device:%d:%d", &p, &v)
			if c := reg.Conns[p]; c != nil {
				if rec := c.Syncs[v]; rec != nil && rec.Seq > seen[o.key] && (rec.Kind == "bitmap" || rec.Kind == "full") {
					role := "SyncTarget"
					if rec.Source {
						role = "SyncSource"
					}
					sync := o
					sync.fields = strings.Replace(strings.Replace(o.fields, "replication:Established", "replication:"+role, 1),
						"out-of-sync:0", fmt.Sprintf("out-of-sync:%d done:0.00", rec.KiB), 1)
					verb := drbdutils.VerbChange
					if !had {
						verb = drbdutils.VerbCreate
					}
					lines = append(lines, sync.line(verb))
					prev, had = sync, true
				}
				if rec := c.Syncs[v]; rec != nil {
					seen[o.key] = rec.Seq
				}
			}
		}
		switch {
		case !had:
			lines = append(lines, o.line(drbdutils.VerbCreate))
		case prev.fields != o.fields || prev.ident != o.ident:
			lines = append(lines, o.line(drbdutils.VerbChange))
		}
	}
	olds := s.views[rd]
	for i := len(olds) - 1; i >= 0; i-- {
		if !now[olds[i].key] {
			lines = append(lines, olds[i].line(drbdutils.VerbDestroy))
		}
	}
	if len(objs) == 0 {
		delete(s.views, rd)
		delete(s.syncSeen, rd)
	} else {
		s.views[rd] = objs
	}
	s.send(lines)
}

// send hands lines to the running stream; a full buffer ends the stream (the next one
// starts with a fresh dump, as after a real drbdsetup restart).
func (s *Sim) send(lines []string) {
	if s.sub == nil {
		return
	}
	for _, l := range lines {
		select {
		case s.sub <- l:
		default:
			s.overflow = true
			return
		}
	}
}

// Events emits the initial dump of every resource this node has up (exists lines,
// then `exists -`) and then the changes, until ctx ends. It also reads the inbox: a
// peer's change to a resource makes it emit that resource's lines.
func (s *Sim) Events(ctx context.Context, fn func(line string)) error {
	interval := s.PollInterval
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	ch := make(chan string, 1<<14)
	s.mu.Lock()
	s.sub, s.overflow = ch, false
	s.views, s.syncSeen = map[string][]simObj{}, map[string]map[string]int64{}
	var dump []string
	entries, _ := os.ReadDir(s.Dir)
	for _, e := range entries {
		rd := e.Name()
		if !e.IsDir() || strings.HasPrefix(rd, ".") {
			continue
		}
		objs, reg := s.view(rd)
		if len(objs) == 0 {
			continue
		}
		s.views[rd] = objs
		seen := map[string]int64{}
		for p, c := range reg.Conns {
			for v, rec := range c.Syncs {
				seen[fmt.Sprintf("peer-device:%d:%d", p, v)] = rec.Seq
			}
		}
		s.syncSeen[rd] = seen
		for _, o := range objs {
			dump = append(dump, o.line(drbdutils.VerbExists))
		}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.sub == ch {
			s.sub = nil
		}
		s.mu.Unlock()
	}()
	for _, l := range dump {
		fn(l)
	}
	fn("exists -")
	tick := time.NewTicker(interval)
	defer tick.Stop()
	inbox := filepath.Join(s.Dir, ".inbox", s.Node)
	ticks := 0
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case l := <-ch:
			fn(l)
		case <-tick.C:
			if ticks++; ticks%10 == 1 {
				s.checkPeers(ctx)
			}
			entries, _ := os.ReadDir(inbox)
			for _, e := range entries {
				_ = os.Remove(filepath.Join(inbox, e.Name()))
				s.refresh(e.Name())
			}
			s.mu.Lock()
			over := s.overflow
			s.mu.Unlock()
			if over {
				return errors.New("sim: events2 stream overflowed")
			}
		}
	}
}

// SimWrite simulates an application writing blocks 4 KiB blocks to rd on the node
// whose root is root: real data (random blocks, see simdata.go) lands on that node's
// disk, if it has one, and on every diskful peer connected to it, and the blocks count
// as written there. Like the kernel, a write first rotates the current UUID into the
// bitmap UUID of every node id that is not connected and has none, drawing a new
// current UUID (the day-0 bitmap UUIDs of vacant node ids stay). While the node's I/O
// is suspended (drbdsetup suspend-io) the write waits, as an application's would, until
// it is resumed or ctx ends. Returns the blocks written since day 0 (the most any disk
// written holds). Errors: no such node, the resource not up there, a diskless node
// connected to no disk.
func SimWrite(ctx context.Context, exec execx.Executor, dir, root, rd string, blocks uint64) (uint64, error) {
	return simWriteWith(ctx, exec, dir, root, rd, -1, func(group []*simReg, v int) (uint64, error) {
		return blocks, simWriteData(group, v, blocks)
	})
}

// simWriteWith is SimWrite with what is written given by write: called once per volume
// (only volume only, unless it is -1) with the disks the write lands on, it writes
// their data and returns the 4 KiB blocks written.
func simWriteWith(ctx context.Context, exec execx.Executor, dir, root, rd string, only int, write func(group []*simReg, v int) (uint64, error)) (uint64, error) {
	for {
		n, err := simWriteOnce(ctx, exec, dir, root, rd, only, write)
		if !errors.Is(err, errSimSuspended) {
			return n, err
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("sim write: %s: I/O suspended: %w", rd, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

var errSimSuspended = errors.New("suspended")

func simWriteOnce(ctx context.Context, exec execx.Executor, dir, root, rd string, only int, write func(group []*simReg, v int) (uint64, error)) (uint64, error) {
	unlock, err := lockRD(dir, rd)
	if err != nil {
		return 0, err
	}
	defer unlock()
	regs, me, err := simNodeOf(dir, root, rd)
	if err != nil {
		return 0, fmt.Errorf("sim write: %w (`cairn wait resource %s` waits for the agents)", err, rd)
	}
	if me.Suspended {
		return 0, errSimSuspended
	}
	var group []*simReg // the disks the write lands on
	if !me.Diskless {
		group = append(group, me)
	}
	ids := map[int]bool{me.NodeID: true}
	lost := false
	for p, c := range me.Conns {
		peer := regs[me.Peers[p]]
		if peer != nil && simDead(dir, peer.Node) {
			// Its host is gone: the write does not reach it, and the connection is
			// lost on both ends, so the two resync when it is back (Sim.reconnect).
			delete(me.Conns, p)
			delete(peer.Conns, me.NodeID)
			if err := saveReg(dir, peer); err != nil {
				return 0, err
			}
			lost = true
			continue
		}
		if c.State == "Connected" && peer != nil && peer.Up && !peer.Diskless {
			group = append(group, peer)
			ids[p] = true
		}
	}
	if len(group) == 0 {
		return 0, fmt.Errorf("sim write: %s is diskless on node %s and connected to no disk", rd, me.Node)
	}
	slices.SortFunc(group, func(a, b *simReg) int { return a.NodeID - b.NodeID })
	meta := simMeta{exec}
	for v := range me.Volumes {
		if only >= 0 && v != only {
			continue
		}
		rotated := false
		var prev drbd.GI
		for _, n := range group {
			nv := n.Volumes[v]
			if nv == nil {
				continue
			}
			uu, err := meta.dump(ctx, nv)
			if err != nil {
				return 0, err
			}
			prev = drbd.GI{}.SetUUID(drbd.GICurrent, uu.current).SetUUID(drbd.GIHistory1, uu.history[0])
			for p := 0; p <= drbd.MaxNodeID; p++ {
				if ids[p] || uu.bitmap[p] != 0 {
					continue
				}
				if err := meta.set(ctx, nv, p, drbd.GI{}.SetUUID(drbd.GIBitmap, uu.current)); err != nil {
					return 0, err
				}
				rotated = true
			}
		}
		if rotated {
			next, err := drbd.NewDay0GI(rand.Reader, prev.Current())
			if err != nil {
				return 0, err
			}
			g := drbd.GI{}.SetUUID(drbd.GICurrent, next).SetUUID(drbd.GIHistory1, prev.Current()).SetUUID(drbd.GIHistory2, prev.UUID(drbd.GIHistory1))
			for _, n := range group {
				if nv := n.Volumes[v]; nv != nil {
					if err := meta.set(ctx, nv, n.NodeID, g); err != nil {
						return 0, err
					}
				}
			}
		}
		blocks, err := write(group, v)
		if err != nil {
			return 0, err
		}
		for _, n := range group {
			if nv := n.Volumes[v]; nv != nil {
				nv.Written += blocks
			}
		}
	}
	for _, n := range group {
		if err := saveReg(dir, n); err != nil {
			return 0, err
		}
		notify(dir, n.Node, rd)
	}
	if lost && me.Diskless { // not in the group, but its connections changed
		if err := saveReg(dir, me); err != nil {
			return 0, err
		}
		notify(dir, me.Node, rd)
	}
	var total uint64
	for _, n := range group {
		for _, v := range n.Volumes {
			total = max(total, v.Written)
		}
	}
	return total, nil
}

// simWriteData writes blocks random 4 KiB blocks of volume v to every disk of group at
// the same place: from block (written so far) on, wrapping at the device's end.
func simWriteData(group []*simReg, v int, blocks uint64) error {
	var paths []string
	var written, size uint64
	for _, n := range group {
		if nv := n.Volumes[v]; nv != nil && nv.Disk != "" {
			paths = append(paths, nv.Disk)
			written = max(written, nv.Written)
			if size == 0 || nv.SizeKiB < size {
				size = nv.SizeKiB
			}
		}
	}
	nblocks := size / 4
	if nblocks == 0 || len(paths) == 0 {
		return nil
	}
	buf := make([]byte, 4096)
	for i := uint64(0); i < blocks; i++ {
		if _, err := rand.Read(buf); err != nil {
			return err
		}
		if err := writeData(paths, int64((written+i)%nblocks)*4096, buf); err != nil {
			return fmt.Errorf("sim write: %w", err)
		}
	}
	return nil
}

// checkPeers looks at the liveness of every resource's peers (simlive.go): when a peer
// died or came back since the last look (or at the first look), it connects to the
// peers that are back and emits the resource's lines again.
func (s *Sim) checkPeers(ctx context.Context) {
	s.mu.Lock()
	rds := slices.Collect(maps.Keys(s.views))
	if s.deadPeers == nil {
		s.deadPeers = map[string]string{}
	}
	s.mu.Unlock()
	for _, rd := range rds {
		reg, err := loadReg(s.regPath(rd, s.Node))
		if err != nil || reg == nil {
			continue
		}
		var dead []string
		for _, node := range reg.Peers {
			if simDead(s.Dir, node) {
				dead = append(dead, node)
			}
		}
		slices.Sort(dead)
		key := strings.Join(dead, ",")
		s.mu.Lock()
		prev, seen := s.deadPeers[rd]
		s.deadPeers[rd] = key
		s.mu.Unlock()
		if seen && prev == key {
			continue
		}
		if err := s.reconnect(ctx, rd); err != nil {
			s.Log.Warn().Err(err).Str("resource", rd).Msg("sim: reconnecting to a peer that is back failed")
		}
		s.refresh(rd)
	}
}

// SimSetRole promotes (an application opens the device) or demotes rd on the node whose
// root is root, as drbdsetup primary/secondary would. Promotion needs UpToDate data, on
// its own disk or a connected peer's, and no connected peer Primary (DRBD's single
// Primary). Errors: no such node, rd not up there, and those refusals.
func SimSetRole(dir, root, rd string, primary bool) error {
	return changeSimNode(dir, root, rd, func(regs map[string]*simReg, me *simReg) error {
		if primary {
			data := !me.Diskless && len(me.Volumes) > 0
			for _, v := range me.Volumes {
				data = data && v.DiskState == "UpToDate"
			}
			for p, c := range me.Conns {
				peer := regs[me.Peers[p]]
				if c.State != "Connected" || peer == nil || !peer.Up || simDead(dir, peer.Node) {
					continue
				}
				if peer.Primary {
					return fmt.Errorf("sim: %s is Primary on %s: one Primary at a time", rd, peer.Node)
				}
				up := !peer.Diskless && len(peer.Volumes) > 0
				for _, v := range peer.Volumes {
					up = up && v.DiskState == "UpToDate"
				}
				data = data || up
			}
			if !data {
				return fmt.Errorf("sim: %s on %s has no UpToDate data to promote on (its own or a connected peer's)", rd, me.Node)
			}
		}
		me.Primary = primary
		return nil
	})
}

// simNodeOf reads every node's state of rd and finds the one whose root is root, which
// must have rd up (the caller holds rd's lock).
func simNodeOf(dir, root, rd string) (map[string]*simReg, *simReg, error) {
	entries, err := os.ReadDir(filepath.Join(dir, rd))
	if err != nil {
		return nil, nil, fmt.Errorf("sim: resource %s: %w", rd, err)
	}
	regs := map[string]*simReg{}
	var me *simReg
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		r, err := loadReg(filepath.Join(dir, rd, e.Name()))
		if err != nil || r == nil {
			continue
		}
		regs[r.Node] = r
		if filepath.Clean(r.Root) == filepath.Clean(root) {
			me = r
		}
	}
	switch {
	case me == nil:
		return nil, nil, fmt.Errorf("sim: no node with root %s has resource %s", root, rd)
	case !me.Up:
		return nil, nil, fmt.Errorf("sim: %s is not up on node %s", rd, me.Node)
	}
	return regs, me, nil
}

// SimFailDisk simulates an I/O error on the disk of rd on the node whose root is root:
// DRBD detaches it (on-io-error detach), so every volume shows Diskless there and its
// peers see the peer disk Diskless, while the replica stays up and connected. Errors:
// no such node, rd not up or diskless there.
func SimFailDisk(dir, root, rd string) error {
	return changeSimNode(dir, root, rd, func(_ map[string]*simReg, me *simReg) error {
		if me.Diskless {
			return fmt.Errorf("sim: %s is diskless on %s: no disk to fail", rd, me.Node)
		}
		for _, v := range me.Volumes {
			v.DiskState = "Diskless"
		}
		return nil
	})
}

// changeSimNode runs change on the state of rd of the node whose root is root (and every
// node's, to read), under rd's lock, then saves it and tells the node and its peers to
// look again. Nothing is saved when change fails.
func changeSimNode(dir, root, rd string, change func(regs map[string]*simReg, me *simReg) error) error {
	unlock, err := lockRD(dir, rd)
	if err != nil {
		return err
	}
	defer unlock()
	regs, me, err := simNodeOf(dir, root, rd)
	if err != nil {
		return err
	}
	if err := change(regs, me); err != nil {
		return err
	}
	if err := saveReg(dir, me); err != nil {
		return err
	}
	notify(dir, me.Node, rd)
	for _, node := range me.Peers {
		notify(dir, node, rd)
	}
	return nil
}
