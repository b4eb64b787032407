package drbdagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/rs/zerolog"
)

// Sim is the simulated kernel (cairn agent --kernel sim). It replaces only what needs
// the DRBD module; everything else is real: drbdadm checks the files (`drbdadm -d
// adjust` logs the plan a real adjust would carry out), drbdmeta writes and reads the
// metadata on the file-backed disks.
//
// The simulated DRBD network is a directory shared by every simulated node on the
// machine (Dir; by default <parent of the root>/sim, so agents whose roots are
// siblings share it):
//
//	<Dir>/<rd>/<node>.json   one node's kernel state of rd (a simReg): up, its disks
//	                         (paths of the real metadata files), configured peers,
//	                         connections and the syncs they did, blocks written
//	<Dir>/<rd>/.lock         flock held while a handshake, a write or a get-gi runs
//	<Dir>/.inbox/<node>/<rd> "look at rd again": a peer changed something
//
// Why a shared directory and not the peers' published status: an agent may only read
// its own node's subjects (serve --auth), and the handshake needs the peer's metadata
// as DRBD's does, not a summary. Each node's kernel state names its disks, so the sim
// reads the peer's REAL metadata with the real drbdmeta, as the peer's kernel would
// send its UUIDs in the handshake.
//
// A connection is made when both ends are up and each lists the other in its resource
// file; whichever end comes up second runs the handshake, once per connection, under
// the lock: for every volume it reads both ends' GIs (drbdmeta get-gi for the other's
// node id) and decides with drbd.DecideSync. A bitmap resync copies the blocks the
// source has and the target lacks (blocks written since day 0, counted per disk by
// `cairn sim write`), a full sync the whole volume; afterwards the target's metadata
// holds the source's current and history UUIDs and the source's bitmap UUIDs for third
// node ids, and both clear their bitmap UUID for each other, as the kernel writes it.
// The sim emits events2 lines in the real format for every change of its own node, so
// the agent observes it with the same parser and fold as a real kernel.
type Sim struct {
	Node string
	// Root is this node's root (recorded so `cairn sim write --root` finds the node).
	Root string
	// Dir is the shared simulation directory.
	Dir string
	// Exec runs drbdadm and drbdmeta; MainConf is drbdadm's -c file.
	Exec     execx.Executor
	MainConf string
	Log      zerolog.Logger
	// PollInterval is how often the inbox is read (100 ms).
	PollInterval time.Duration

	mu       sync.Mutex
	sub      chan string
	overflow bool
	views    map[string][]simObj
	syncSeen map[string]map[string]int64
	// deadPeers are the dead peers (simlive.go) of each resource at the last look.
	deadPeers map[string]string
}

var _ Kernel = (*Sim)(nil)

// DefaultSimDir is the shared simulation directory of agents under root: a "sim"
// directory beside root.
func DefaultSimDir(root string) string {
	return filepath.Join(filepath.Dir(filepath.Clean(root)), "sim")
}

// simReg is one node's simulated kernel state of one resource.
type simReg struct {
	Resource    string             `json:"resource"`
	Node        string             `json:"node"`
	NodeID      int                `json:"node_id"`
	Host        string             `json:"host"`
	Root        string             `json:"root"`
	Incarnation uint64             `json:"incarnation"`
	Up          bool               `json:"up"`
	Diskless    bool               `json:"diskless"`
	Peers       map[int]string     `json:"peers"`      // configured peers: node id -> node
	PeerHosts   map[int]string     `json:"peer_hosts"` // node id -> host (conn-name)
	Volumes     map[int]*simVolume `json:"volumes"`
	Conns       map[int]*simConn   `json:"conns"` // handshakes done, by peer node id
	Suspended   bool               `json:"suspended,omitempty"`
	// Primary: an application opened the device (cairn sim promote): the role events2
	// shows, kept when the replica gets or gives up its disk; down refuses it, as the
	// kernel refuses to take down a device in use.
	Primary bool         `json:"primary,omitempty"`
	Seen    map[int]bool `json:"seen"` // node ids this disk has connected to
}

type simVolume struct {
	Minor int    `json:"minor"`
	Disk  string `json:"disk,omitempty"`
	// SizeKiB is the device's size (what events2 reports); BackingKiB what the local
	// backing holds as the kernel knows it (the volume size at attach, raised by Resize).
	SizeKiB    uint64 `json:"size_kib"`
	BackingKiB uint64 `json:"backing_kib,omitempty"`
	// FileBytes is the disk file's size where the kernel has its metadata (at attach,
	// and after each resize).
	FileBytes uint64 `json:"file_bytes,omitempty"`
	Written   uint64 `json:"written_blocks"` // 4 KiB blocks written since day 0 that this disk holds
	DiskState string `json:"disk_state"`
}

type simConn struct {
	State string              `json:"state"` // Connected | StandAlone
	Syncs map[int]*simSyncRec `json:"syncs"` // by volume
}

type simSyncRec struct {
	Kind   string `json:"kind"`
	KiB    uint64 `json:"kib"`
	Source bool   `json:"source"`
	Seq    int64  `json:"seq"`
	// Diverged is the data oracle's finding when the handshake declared the disks in
	// sync while their data differ (see simdata.go).
	Diverged string `json:"diverged,omitempty"`
}

func (s *Sim) regPath(rd, node string) string { return filepath.Join(s.Dir, rd, node+".json") }

func loadReg(path string) (*simReg, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r simReg
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("sim state %s: %w", path, err)
	}
	if r.Conns == nil {
		r.Conns = map[int]*simConn{}
	}
	if r.Seen == nil {
		r.Seen = map[int]bool{}
	}
	if r.Volumes == nil {
		r.Volumes = map[int]*simVolume{}
	}
	return &r, nil
}

func saveReg(dir string, r *simReg) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	// Replaced atomically (readers never see half a file) but not fsynced: it is the
	// state of a simulated kernel, lost on a crash of the machine like a real one's.
	path := filepath.Join(dir, r.Resource, r.Node+".json")
	tmp := fmt.Sprintf("%s.%d.%d.tmp", path, os.Getpid(), time.Now().UnixNano())
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// lockRD takes the resource's simulation lock (flock: it holds across processes).
func lockRD(dir, rd string) (func(), error) {
	if err := os.MkdirAll(filepath.Join(dir, rd), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, rd, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

func notify(dir, node, rd string) {
	in := filepath.Join(dir, ".inbox", node)
	if os.MkdirAll(in, 0o755) == nil {
		_ = os.WriteFile(filepath.Join(in, rd), nil, 0o644)
	}
}

// simMeta reads and writes GIs with the real drbdmeta. Every access first finds the
// metadata where drbdmeta looks for it (follow); callers save the registry afterwards.
type simMeta struct{ exec execx.Executor }

// follow moves an attached disk's internal metadata to the end of its file when the
// file grew since the metadata was placed there (v.FileBytes), as drbdmeta check-resize
// does, and records the new size in v. The kernel keeps an attached disk's metadata in
// memory, so a forget-peer or a handshake between growing the backing and resizing the
// device works on it; the sim keeps it in the file, where drbdmeta would otherwise find
// "No valid meta data". A disk whose size was never recorded is left alone.
func (m simMeta) follow(ctx context.Context, v *simVolume) error {
	if v.FileBytes == 0 {
		return nil
	}
	now, err := deviceBytes(v.Disk)
	if err != nil || now <= v.FileBytes {
		return err
	}
	if err := moveMetadata(ctx, m.exec, v.Minor, v.Disk, v.FileBytes); err != nil {
		return err
	}
	v.FileBytes = now
	return nil
}

func (m simMeta) get(ctx context.Context, v *simVolume, nodeID int) (drbd.GI, error) {
	if err := m.follow(ctx, v); err != nil {
		return drbd.GI{}, err
	}
	// No minor: the sim's metadata is never attached to a kernel, and the flock of
	// lockRD (held by every caller) serialises it.
	out, err := m.exec.Run(ctx, drbdutils.GetGIOfFile(v.Disk, nodeID), execx.Options{})
	if err != nil {
		return drbd.GI{}, err
	}
	return drbdutils.ParseGetGI(out)
}

func (m simMeta) set(ctx context.Context, v *simVolume, nodeID int, g drbd.GI) error {
	if err := m.follow(ctx, v); err != nil {
		return err
	}
	_, err := m.exec.Run(ctx, drbdutils.SetGI(v.Minor, v.Disk, nodeID, g.String()), execx.Options{})
	return err
}

// Adjust logs drbdadm's plan (`drbdadm -d adjust`, when the file changed), marks the
// resource up with the file's peers and volumes, and runs the handshakes with every
// peer that is up and configures this node.
func (s *Sim) Adjust(ctx context.Context, r Resource) error {
	d := r.Desired
	host := ""
	for _, rep := range d.Replicas {
		if rep.Node == d.Node {
			host = rep.Host
		}
	}
	if r.ConfigChanged {
		out, err := s.Exec.Run(ctx, drbdutils.Adm{Config: s.MainConf, DryRun: true}.Adjust(d.Resource), execx.Options{Env: []string{"__DRBD_NODE__=" + host}})
		if err != nil {
			return err
		}
		s.Log.Debug().Str("resource", d.Resource).Str("plan", strings.TrimSpace(string(out))).Msg("sim: drbdadm -d adjust")
	}
	unlock, err := lockRD(s.Dir, d.Resource)
	if err != nil {
		return err
	}
	defer s.refresh(d.Resource)
	defer unlock()
	meta := simMeta{s.Exec}
	reg, err := loadReg(s.regPath(d.Resource, s.Node))
	if err != nil {
		return err
	}
	if reg == nil || reg.Incarnation != d.Local.Incarnation {
		primary := reg != nil && reg.Up && reg.Primary // the device stays open across a new disk
		reg = &simReg{Conns: map[int]*simConn{}, Seen: map[int]bool{}, Volumes: map[int]*simVolume{}, Primary: primary}
	}
	reg.Resource, reg.Node, reg.NodeID, reg.Host, reg.Root, reg.Incarnation = d.Resource, s.Node, d.Local.NodeID, host, s.Root, d.Local.Incarnation
	minors := localMinors(&d)
	changed := !reg.Up || reg.Diskless != d.Local.Diskless
	vols := map[int]*simVolume{}
	for _, v := range d.Volumes {
		old := reg.Volumes[v.Number]
		nv := &simVolume{Minor: minors[v.Number], Disk: r.Disks[v.Number], SizeKiB: v.SizeKiB, BackingKiB: v.SizeKiB}
		if old != nil && old.Disk == nv.Disk && old.Minor == nv.Minor {
			nv.Written, nv.DiskState = old.Written, old.DiskState
			if old.SizeKiB > 0 { // a grown backing shows only after a resize
				nv.SizeKiB, nv.BackingKiB, nv.FileBytes = old.SizeKiB, max(old.BackingKiB, old.SizeKiB), old.FileBytes
			}
		} else {
			changed = true
		}
		if !d.Local.Diskless && (nv.FileBytes == 0 || changed) {
			if nv.FileBytes, err = deviceBytes(nv.Disk); err != nil {
				return err
			}
		}
		if d.Local.Diskless {
			nv.DiskState = "Diskless"
		} else if nv.DiskState == "" || changed {
			g, err := meta.get(ctx, nv, d.Local.NodeID)
			if err != nil {
				return err
			}
			nv.DiskState = "Inconsistent"
			if g.Flag(drbd.GIConsistent) && g.Current() != drbd.UUIDJustCreated {
				nv.DiskState = "UpToDate"
			}
		}
		vols[v.Number] = nv
	}
	reg.Volumes, reg.Up, reg.Diskless = vols, true, d.Local.Diskless
	reg.Peers, reg.PeerHosts = PeersOf(&d), map[int]string{}
	for _, rep := range d.Replicas {
		if rep.Node != d.Node {
			reg.PeerHosts[rep.NodeID] = rep.Host
		}
	}
	for p := range reg.Conns {
		if _, still := reg.Peers[p]; changed || !still {
			s.dropConn(d.Resource, reg, p)
		}
	}
	if err := s.connect(ctx, reg); err != nil {
		return err
	}
	if err := saveReg(s.Dir, reg); err != nil {
		return err
	}
	// Only now that both ends are saved: the peers' views read this node's state.
	for _, node := range reg.Peers {
		notify(s.Dir, node, d.Resource)
	}
	return nil
}

// connect runs the handshake with every configured peer reg has no connection to that
// is up, lists reg's node and is alive (simDead), saving each peer (the caller holds
// the resource's lock and saves reg).
func (s *Sim) connect(ctx context.Context, reg *simReg) error {
	for _, p := range slices.Sorted(maps.Keys(reg.Peers)) {
		if reg.Conns[p] != nil {
			continue
		}
		peer, err := loadReg(s.regPath(reg.Resource, reg.Peers[p]))
		if err != nil {
			return err
		}
		if peer == nil || !peer.Up || peer.Peers[reg.NodeID] != s.Node || simDead(s.Dir, peer.Node) {
			continue
		}
		if err := s.handshake(ctx, reg, peer); err != nil {
			return fmt.Errorf("sim handshake with node id %d: %w", p, err)
		}
		if err := saveReg(s.Dir, peer); err != nil {
			return err
		}
	}
	return nil
}

// reconnect connects rd to the peers that came back (a peer's agent restarted after
// its host was gone: the writes meanwhile dropped the connection, see simWriteOnce).
func (s *Sim) reconnect(ctx context.Context, rd string) error {
	unlock, err := lockRD(s.Dir, rd)
	if err != nil {
		return err
	}
	defer unlock()
	reg, err := loadReg(s.regPath(rd, s.Node))
	if err != nil || reg == nil || !reg.Up {
		return err
	}
	before := len(reg.Conns)
	if err := s.connect(ctx, reg); err != nil || len(reg.Conns) == before {
		return err
	}
	if err := saveReg(s.Dir, reg); err != nil {
		return err
	}
	for _, node := range reg.Peers {
		notify(s.Dir, node, rd)
	}
	return nil
}

// dropConn removes the connection between reg and peer id p on both ends (the
// caller saves reg).
func (s *Sim) dropConn(rd string, reg *simReg, p int) {
	delete(reg.Conns, p)
	node := reg.Peers[p]
	if node == "" {
		return
	}
	if peer, err := loadReg(s.regPath(rd, node)); err == nil && peer != nil {
		if _, ok := peer.Conns[reg.NodeID]; ok {
			delete(peer.Conns, reg.NodeID)
			_ = saveReg(s.Dir, peer)
			notify(s.Dir, node, rd)
		}
	}
}

// handshake connects a and b: per volume DecideSync over both ends' real metadata,
// then the sync's effect on the target's metadata and data.
func (s *Sim) handshake(ctx context.Context, a, b *simReg) error {
	meta := simMeta{s.Exec}
	ca := &simConn{State: "Connected", Syncs: map[int]*simSyncRec{}}
	cb := &simConn{State: "Connected", Syncs: map[int]*simSyncRec{}}
	seq := time.Now().UnixNano()
	vols := slices.Sorted(maps.Keys(a.Volumes))
	for _, v := range vols {
		av, bv := a.Volumes[v], b.Volumes[v]
		if bv == nil || a.Diskless || b.Diskless {
			continue
		}
		ga, err := meta.get(ctx, av, b.NodeID)
		if err != nil {
			return err
		}
		gb, err := meta.get(ctx, bv, a.NodeID)
		if err != nil {
			return err
		}
		kind, aSource := drbd.DecideSync(ga, gb)
		s.Log.Info().Str("resource", a.Resource).Int("volume", v).Int("node_id", a.NodeID).Int("peer_node_id", b.NodeID).
			Str("gi", ga.String()).Str("peer_gi", gb.String()).Str("sync", kind.String()).Bool("source", aSource).Msg("sim: handshake")
		switch kind {
		case drbd.SyncUnrelated:
			ca.State, cb.State = "StandAlone", "StandAlone"
			ca.Syncs[v] = &simSyncRec{Kind: kind.String(), Seq: seq}
			cb.Syncs[v] = &simSyncRec{Kind: kind.String(), Seq: seq}
			continue
		case drbd.SyncNone:
			ca.Syncs[v] = &simSyncRec{Kind: kind.String(), Seq: seq}
			cb.Syncs[v] = &simSyncRec{Kind: kind.String(), Seq: seq}
			at, err := compareData(av.Disk, bv.Disk, int64(min(av.SizeKiB, bv.SizeKiB))*1024)
			if err != nil {
				return fmt.Errorf("sim data oracle: %w", err)
			}
			if at >= 0 {
				why := fmt.Sprintf("declared in sync (no resync) but the data differ at byte %d", at)
				ca.Syncs[v].Diverged, cb.Syncs[v].Diverged = why, why
				s.Log.Error().Str("resource", a.Resource).Int("volume", v).Str("node", a.Node).Str("peer", b.Node).Int64("offset", at).Msg("sim data oracle: disks declared in sync hold different data")
				line := fmt.Sprintf("%s volume %d: %s and %s: %s", a.Resource, v, a.Node, b.Node, why)
				if err := recordDivergence(s.Dir, line); err != nil {
					return err
				}
			}
		default:
			src, tgt, sc, tc := a, b, ca, cb
			if !aSource {
				src, tgt, sc, tc = b, a, cb, ca
			}
			sv, tv := src.Volumes[v], tgt.Volumes[v]
			kib := sv.SizeKiB
			if kind == drbd.SyncBitmap {
				kib = 0
				if sv.Written > tv.Written {
					kib = (sv.Written - tv.Written) * 4
				}
			}
			if err := syncMetadata(ctx, meta, src, tgt, v); err != nil {
				return err
			}
			// The data a correct sync leaves (the oracle does not check the bitmap: the
			// sync model's tests do; a bitmap sync copies what differs).
			if err := copyData(sv.Disk, tv.Disk, int64(min(sv.SizeKiB, tv.SizeKiB))*1024); err != nil {
				return fmt.Errorf("sim sync data: %w", err)
			}
			tv.Written, tv.DiskState = sv.Written, "UpToDate"
			sc.Syncs[v] = &simSyncRec{Kind: kind.String(), KiB: kib, Source: true, Seq: seq}
			tc.Syncs[v] = &simSyncRec{Kind: kind.String(), KiB: kib, Source: false, Seq: seq}
		}
		if err := meta.set(ctx, av, b.NodeID, drbd.GI{}.SetUUID(drbd.GIBitmap, 0)); err != nil {
			return err
		}
		if err := meta.set(ctx, bv, a.NodeID, drbd.GI{}.SetUUID(drbd.GIBitmap, 0)); err != nil {
			return err
		}
		a.Seen[b.NodeID], b.Seen[a.NodeID] = true, true
	}
	a.Conns[b.NodeID], b.Conns[a.NodeID] = ca, cb
	return nil
}

// syncMetadata writes what a finished sync leaves in the target's metadata: the
// source's current and history UUIDs (consistent, was up to date) and the source's
// bitmap UUIDs for every third node id.
func syncMetadata(ctx context.Context, meta simMeta, src, tgt *simReg, v int) error {
	sv, tv := src.Volumes[v], tgt.Volumes[v]
	su, err := meta.dump(ctx, sv)
	if err != nil {
		return err
	}
	tu, err := meta.dump(ctx, tv)
	if err != nil {
		return err
	}
	own := drbd.GI{}.SetUUID(drbd.GICurrent, su.current).SetUUID(drbd.GIHistory1, su.history[0]).
		SetUUID(drbd.GIHistory2, su.history[1]).SetFlag(drbd.GIConsistent, true).SetFlag(drbd.GIWasUpToDate, true)
	if err := meta.set(ctx, tv, tgt.NodeID, own); err != nil {
		return err
	}
	for m := 0; m <= drbd.MaxNodeID; m++ {
		if m == src.NodeID || m == tgt.NodeID || tu.bitmap[m] == su.bitmap[m] {
			continue
		}
		if err := meta.set(ctx, tv, m, drbd.GI{}.SetUUID(drbd.GIBitmap, su.bitmap[m])); err != nil {
			return err
		}
	}
	return nil
}

// Resize grows volume vol as DRBD does: it moves the local disk's internal metadata to
// the new end of a file that grew (simMeta.follow: the real drbdmeta check-resize, see moveMetadata:
// the kernel does that on an online resize, and the sim reads metadata from the file
// where the kernel would keep it in memory), records the local backing as holding r's volume size, refuses while a
// diskful peer of r is not connected, and otherwise sets the device size of this node
// and every connected peer to the smallest backing of all (never smaller than before).
func (s *Sim) Resize(ctx context.Context, r Resource, vol int) error {
	d := r.Desired
	var want uint64
	for _, v := range d.Volumes {
		if v.Number == vol {
			want = v.SizeKiB
		}
	}
	unlock, err := lockRD(s.Dir, d.Resource)
	if err != nil {
		return err
	}
	defer s.refresh(d.Resource)
	defer unlock()
	reg, err := loadReg(s.regPath(d.Resource, s.Node))
	if err != nil {
		return err
	}
	if reg == nil || !reg.Up || reg.Volumes[vol] == nil {
		return fmt.Errorf("sim: resize %s/%d: resource is not up", d.Resource, vol)
	}
	own := reg.Volumes[vol]
	if !reg.Diskless {
		if err := (simMeta{s.Exec}).follow(ctx, own); err != nil {
			return err
		}
		own.BackingKiB = max(own.BackingKiB, want)
		if err := saveReg(s.Dir, reg); err != nil {
			return err
		}
	}
	size := own.BackingKiB
	if reg.Diskless {
		size = 0
	}
	var peers []*simReg
	for _, rep := range d.Replicas {
		if rep.Node == d.Node {
			continue
		}
		c := reg.Conns[rep.NodeID]
		if c == nil || c.State != "Connected" {
			if rep.Diskless {
				continue
			}
			return fmt.Errorf("sim: resize %s/%d: diskful peer %s (node id %d) is not connected; DRBD grows a device only with every diskful peer connected", d.Resource, vol, rep.Node, rep.NodeID)
		}
		peer, err := loadReg(s.regPath(d.Resource, rep.Node))
		if err != nil || peer == nil || peer.Volumes[vol] == nil {
			return fmt.Errorf("sim: resize %s/%d: peer %s: %v", d.Resource, vol, rep.Node, err)
		}
		if !peer.Diskless {
			if b := peer.Volumes[vol].BackingKiB; size == 0 || b < size {
				size = b
			}
		}
		peers = append(peers, peer)
	}
	if size <= own.SizeKiB {
		return nil // some diskful replica's backing has not grown yet
	}
	s.Log.Info().Str("resource", d.Resource).Int("volume", vol).Uint64("from_kib", own.SizeKiB).Uint64("to_kib", size).Msg("sim: device grown")
	// DRBD resyncs the space a grow adds (unless told --assume-clean, which Cairn never
	// is): what a backing device held there before (zeros, or internal metadata that
	// moved to the new end) is made the same on every disk, from one of them.
	if err := syncGrown(append([]*simReg{reg}, peers...), vol, int64(own.SizeKiB)*1024, int64(size)*1024); err != nil {
		return err
	}
	own.SizeKiB = size
	for _, peer := range peers {
		peer.Volumes[vol].SizeKiB = size
		if err := saveReg(s.Dir, peer); err != nil {
			return err
		}
	}
	if err := saveReg(s.Dir, reg); err != nil {
		return err
	}
	for _, peer := range peers {
		notify(s.Dir, peer.Node, d.Resource)
	}
	return nil
}

// syncGrown copies [from, to) of volume vol from the first disk of regs to the others:
// the resync of the space a grow added.
func syncGrown(regs []*simReg, vol int, from, to int64) error {
	var disks []string
	for _, r := range regs {
		if v := r.Volumes[vol]; !r.Diskless && v != nil && v.Disk != "" {
			disks = append(disks, v.Disk)
		}
	}
	for _, dst := range disks[min(1, len(disks)):] {
		if err := copyRange(disks[0], dst, from, to); err != nil {
			return fmt.Errorf("sim: resync of the grown space: %w", err)
		}
	}
	return nil
}

// SuspendIO marks the resource's I/O suspended (events2: suspended:user).
func (s *Sim) SuspendIO(ctx context.Context, rd string, minors []int) error {
	return s.setSuspended(rd, true)
}

// ResumeIO marks it resumed.
func (s *Sim) ResumeIO(ctx context.Context, rd string, minors []int) error {
	return s.setSuspended(rd, false)
}

func (s *Sim) setSuspended(rd string, on bool) error {
	unlock, err := lockRD(s.Dir, rd)
	if err != nil {
		return err
	}
	defer s.refresh(rd)
	defer unlock()
	reg, err := loadReg(s.regPath(rd, s.Node))
	if err != nil {
		return err
	}
	if reg == nil || !reg.Up {
		return fmt.Errorf("sim: %s is not up", rd)
	}
	reg.Suspended = on
	return saveReg(s.Dir, reg)
}

// Down marks the resource down and drops its connections.
func (s *Sim) Down(ctx context.Context, rd string) error {
	unlock, err := lockRD(s.Dir, rd)
	if err != nil {
		return err
	}
	defer s.refresh(rd)
	defer unlock()
	reg, err := loadReg(s.regPath(rd, s.Node))
	if err != nil || reg == nil || !reg.Up {
		return err
	}
	if reg.Primary {
		return fmt.Errorf("sim: %s is Primary on %s (in use): demote it first (cairn sim demote)", rd, s.Node)
	}
	for p := range reg.Conns {
		s.dropConn(rd, reg, p)
	}
	reg.Up, reg.Suspended = false, false
	if err := saveReg(s.Dir, reg); err != nil {
		return err
	}
	for _, node := range reg.Peers {
		notify(s.Dir, node, rd)
	}
	return nil
}

// DelPeer drops the connection to node id p.
func (s *Sim) DelPeer(ctx context.Context, rd string, p int) error {
	unlock, err := lockRD(s.Dir, rd)
	if err != nil {
		return err
	}
	defer s.refresh(rd)
	defer unlock()
	reg, err := loadReg(s.regPath(rd, s.Node))
	if err != nil || reg == nil {
		return err
	}
	if _, ok := reg.Conns[p]; ok {
		s.dropConn(rd, reg, p)
	}
	delete(reg.Peers, p)
	return saveReg(s.Dir, reg)
}

// ForgetPeer gives node id p's bitmap UUID the value of a node id this disk never
// connected to (a day-0 slot), as the kernel's forget-peer frees and resets the slot.
func (s *Sim) ForgetPeer(ctx context.Context, rd string, p int) error {
	unlock, err := lockRD(s.Dir, rd)
	if err != nil {
		return err
	}
	defer unlock()
	reg, err := loadReg(s.regPath(rd, s.Node))
	if err != nil || reg == nil || reg.Diskless {
		return err
	}
	meta := simMeta{s.Exec}
	for _, v := range reg.Volumes {
		uu, err := meta.dump(ctx, v)
		if err != nil {
			return err
		}
		bm := drbd.UUID(0)
		for u := 0; u <= drbd.MaxNodeID; u++ {
			if _, peer := reg.Peers[u]; u == reg.NodeID || u == p || reg.Seen[u] || peer {
				continue
			}
			bm = uu.bitmap[u]
			break
		}
		if err := meta.set(ctx, v, p, drbd.GI{}.SetUUID(drbd.GIBitmap, bm)); err != nil {
			return err
		}
	}
	delete(reg.Seen, p)
	return saveReg(s.Dir, reg)
}

// GetGI reads the attached volume's GI from its metadata file (under the lock, so a
// peer's handshake is not halfway through writing it).
func (s *Sim) GetGI(ctx context.Context, rd string, vol, peer int) (drbd.GI, error) {
	unlock, err := lockRD(s.Dir, rd)
	if err != nil {
		return drbd.GI{}, err
	}
	defer unlock()
	reg, err := loadReg(s.regPath(rd, s.Node))
	if err != nil {
		return drbd.GI{}, err
	}
	if reg == nil || reg.Volumes[vol] == nil || reg.Diskless {
		return drbd.GI{}, fmt.Errorf("sim: %s volume %d is not attached", rd, vol)
	}
	was := reg.Volumes[vol].FileBytes
	g, err := simMeta{s.Exec}.get(ctx, reg.Volumes[vol], peer)
	if err == nil && reg.Volumes[vol].FileBytes != was {
		err = saveReg(s.Dir, reg) // the metadata moved (follow)
	}
	return g, err
}
