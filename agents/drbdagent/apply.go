package drbdagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/agents/fsx"
	"github.com/cairn-io/cairn/agents/volume"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/cairn-io/cairn/storage/backing"
)

// apply carries out d (nil: removal) and returns the state it left.
func (r *Reconciler) apply(ctx context.Context, rd string, d *drbd.Desired) (*State, error) {
	paths := r.cfg.Paths
	st, err := LoadState(paths.StateFile(rd))
	if err != nil {
		return nil, err
	}
	var written []byte // the state file's content as loaded or last saved
	if st != nil {
		written, _ = json.Marshal(st)
	}
	save := func(s *State) error {
		b, _ := json.Marshal(s)
		if bytes.Equal(b, written) {
			return nil // unchanged: no write, no fsync
		}
		if err := SaveState(paths.StateFile(rd), s); err != nil {
			return err
		}
		written = b
		return nil
	}
	installed, err := os.ReadFile(paths.ResFile(rd))
	if err != nil && !os.IsNotExist(err) {
		return st, fmt.Errorf("installed resource file: %w", err)
	}
	isInstalled := err == nil
	plan := Decide(d, st, isInstalled)
	switch {
	case plan.Ignore != "":
		return st, ignored(plan.Ignore)
	case plan.Refuse != "":
		return st, errors.New(plan.Refuse)
	case plan.Remove:
		r.stopUploads(rd, nil)
		r.cfg.Log.Info().Str("resource", rd).Strs("steps", plan.Steps(true)).Msg("carrying out desired state")
		return nil, r.remove(ctx, rd, st, plan.Down)
	case d == nil || d.Local == nil:
		return nil, nil // nothing here, nothing wanted
	}
	l := d.Local

	// 1. Checks that change nothing on the host.
	var prov volume.Provider
	maxPeers := drbd.MaxPeers(len(d.Replicas))
	if plan.Retire == nil && st != nil && st.MaxPeers > 0 {
		maxPeers = st.MaxPeers
	}
	disks := map[int]string{}
	if !l.Diskless {
		if prov, err = r.provider(ctx, l, rd, d.Volumes); err != nil {
			return st, err
		}
		for _, v := range d.Volumes {
			disks[v.Number] = prov.Path(backing.VolumeName(rd, v.Number))
		}
	}
	minors := localMinors(d)
	rendered, err := drbdutils.Render(*d, disks)
	if err != nil {
		return st, fmt.Errorf("render: %w", err)
	}
	changed := !isInstalled || !bytes.Equal(installed, rendered)
	if steps := plan.Steps(changed); len(steps) > 0 {
		r.cfg.Log.Info().Str("resource", rd).Uint64("revision", d.Revision).Strs("steps", steps).Msg("carrying out desired state")
	}
	if changed {
		if err := r.check(ctx, d, rendered, isInstalled); err != nil {
			return st, err
		}
	}

	if plan.Retire != nil || plan.CreateMD || plan.Seed {
		r.pending(ctx, rd, d) // long steps ahead: say so
	}

	// 2. Retire an older incarnation.
	if plan.Retire != nil {
		if err := r.retire(ctx, rd, plan.Retire, plan.RetireDown); err != nil {
			return st, err
		}
		st = nil
	}
	if st == nil {
		st = &State{Resource: rd, Incarnation: l.Incarnation}
	}
	st.Diskless = l.Diskless
	if !l.Diskless && !st.MDCreated {
		st.Provider, st.Pool, st.MaxPeers = l.Provider, l.Pool, maxPeers
		st.Minors = minors
	}
	if len(plan.AddVolumes) > 0 { // recorded first: a crash halfway repeats them
		for _, v := range plan.AddVolumes {
			st.Minors[v] = minors[v]
			if !slices.Contains(st.Adding, v) {
				st.Adding = append(st.Adding, v)
			}
		}
	}
	if err := save(st); err != nil {
		return st, err
	}

	// 3. Backing volumes.
	if plan.Backing {
		if st.Disks == nil {
			st.Disks = map[int]string{}
		}
		if st.Sizes == nil {
			st.Sizes, st.Resized = map[int]uint64{}, map[int]uint64{}
		}
		for _, v := range d.Volumes {
			name := backing.VolumeName(rd, v.Number)
			want := drbd.BackingKiB(v.SizeKiB, st.MaxPeers)
			if slices.Contains(plan.Grow, v.Number) {
				if err := r.recordGrowFrom(st, v.Number, save); err != nil {
					return st, err
				}
				if err := prov.Grow(ctx, name, want); err != nil {
					return st, fmt.Errorf("grow backing volume %s to %d KiB: %w", name, want, err)
				}
			}
			if from := l.RestoreFrom; from != nil && st.Sizes[v.Number] == 0 && !st.MDCreated {
				// A restored disk starts as this node's copy of the snapshot.
				snapper, err := volume.SnapshotsOf(prov, l.Provider)
				if err != nil {
					return st, err
				}
				if err := snapper.Restore(ctx, name, backing.VolumeName(from.Resource, v.Number), from.Snapshot, want); err != nil {
					return st, err
				}
			}
			path, err := prov.Create(ctx, name, want)
			if err != nil {
				return st, fmt.Errorf("backing volume %s: %w", name, err)
			}
			if ref := l.RestoreBackup; ref != nil && !st.MDCreated && !st.Filled[v.Number] {
				// A disk restored from a backup: its data, every chunk checked, before
				// its metadata (which seeds it as in sync with the other restored disks).
				if err := r.fill(ctx, rd, ref, v, path, readsZeros(l.Provider)); err != nil {
					return st, err
				}
				if st.Filled == nil {
					st.Filled = map[int]bool{}
				}
				st.Filled[v.Number] = true
				if err := save(st); err != nil {
					return st, err
				}
			}
			st.Disks[v.Number] = path
			if st.Sizes[v.Number] == 0 {
				st.Resized[v.Number] = v.SizeKiB // created at this size: nothing to resize
			}
			st.Sizes[v.Number] = max(st.Sizes[v.Number], v.SizeKiB)
		}
		if err := save(st); err != nil {
			return st, err
		}
		if err := r.step(rd, "backing"); err != nil {
			return st, err
		}
		if len(st.GrowFrom) > 0 && !r.fold.Up(rd) {
			// Detached: DRBD cannot move the metadata, so drbdmeta does, before any attach.
			for _, v := range slices.Sorted(maps.Keys(st.GrowFrom)) {
				if err := moveMetadata(ctx, r.cfg.Exec, st.Minors[v], st.Disks[v], st.GrowFrom[v]); err != nil {
					return st, fmt.Errorf("volume %d: %w", v, err)
				}
				delete(st.GrowFrom, v)
			}
			if err := save(st); err != nil {
				return st, err
			}
		}
		if len(plan.Grow) > 0 {
			if err := r.step(rd, "grown"); err != nil {
				return st, err
			}
		}
	}
	if plan.Rollback {
		if err := r.rollback(ctx, rd, d, st, prov, save); err != nil {
			return st, err
		}
	}
	// 4. The resource file, with the devices DRBD attaches (inert until the adjust).
	if r.cfg.LoopDevices && !l.Diskless && isFile(l.Provider) {
		for v, path := range st.Disks {
			dev, err := volume.Loop{Exec: r.cfg.Exec}.Attach(ctx, path)
			if err != nil {
				return st, err
			}
			disks[v] = dev
		}
		if rendered, err = drbdutils.Render(*d, disks); err != nil {
			return st, fmt.Errorf("render: %w", err)
		}
		changed = !isInstalled || !bytes.Equal(installed, rendered)
		if changed {
			if err := r.check(ctx, d, rendered, isInstalled); err != nil {
				return st, err
			}
		}
	}
	if changed {
		if err := fsx.WriteAtomic(paths.ResFile(rd), rendered, 0o644); err != nil {
			return st, fmt.Errorf("install %s: %w", paths.ResFile(rd), err)
		}
		if err := r.step(rd, "installed"); err != nil {
			return st, err
		}
	}

	// 5. Metadata and seeds.
	if plan.CreateMD {
		for _, v := range d.Volumes {
			if _, err := r.run(ctx, drbdutils.CreateMD(st.Minors[v.Number], st.Disks[v.Number], st.MaxPeers)); err != nil {
				return st, fmt.Errorf("create-md volume %d: %w", v.Number, err)
			}
		}
		st.MDCreated = true
		if err := save(st); err != nil {
			return st, err
		}
		if err := r.step(rd, "md-created"); err != nil {
			return st, err
		}
	}
	if len(plan.AddVolumes) > 0 {
		only := map[int]bool{}
		for _, v := range plan.AddVolumes {
			only[v] = true
			if _, err := r.run(ctx, drbdutils.CreateMD(st.Minors[v], st.Disks[v], st.MaxPeers)); err != nil {
				return st, fmt.Errorf("create-md of added volume %d: %w", v, err)
			}
		}
		if err := r.seed(ctx, rd, d, st, only); err != nil {
			return st, err
		}
		st.Adding = nil
		if err := save(st); err != nil {
			return st, err
		}
		if err := r.step(rd, "volumes-added"); err != nil {
			return st, err
		}
	}
	if plan.Seed {
		if err := r.seed(ctx, rd, d, st, nil); err != nil {
			return st, err
		}
		st.Seeded = true
		if err := save(st); err != nil {
			return st, err
		}
		if err := r.step(rd, "seeded"); err != nil {
			return st, err
		}
	}

	// 6. Adjust (or down), peers that left, a dropped disk. A peer that came back as a
	// new incarnation under the same node id is forgotten before the adjust, which then
	// connects it afresh; peers gone from the file after it.
	var back, gone []int
	present := PeerKeysOf(d)
	for _, id := range plan.Forget {
		if _, ok := present[id]; ok && plan.Adjust {
			back = append(back, id)
		} else {
			gone = append(gone, id)
		}
	}
	if err := r.forget(ctx, rd, l.Diskless, st, back); err != nil {
		return st, err
	}
	switch {
	case plan.Adjust:
		if !st.Adjusted {
			st.Adjusted = true // before the adjust: from now on DRBD may use the metadata
			if err := save(st); err != nil {
				return st, err
			}
			if err := r.step(rd, "adjusting"); err != nil {
				return st, err
			}
		}
		if err := r.cfg.Kernel.Adjust(ctx, Resource{Desired: *d, Disks: disks, ConfigChanged: changed}); err != nil {
			return st, fmt.Errorf("adjust: %w", err)
		}
		if err := r.step(rd, "adjusted"); err != nil {
			return st, err
		}
	case plan.Down:
		if err := r.cfg.Kernel.Down(ctx, rd); err != nil {
			return st, fmt.Errorf("down (deactivated): %w", err)
		}
		metricSteps.WithLabelValues("down").Inc()
	}
	if err := r.forget(ctx, rd, l.Diskless, st, gone); err != nil {
		return st, err
	}
	for _, v := range plan.Resize {
		if err := r.cfg.Kernel.Resize(ctx, Resource{Desired: *d, Disks: disks}, v); err != nil {
			return st, fmt.Errorf("drbd resize volume %d: %w", v, err)
		}
		for _, vol := range d.Volumes {
			if vol.Number == v {
				st.Resized[v] = vol.SizeKiB
			}
		}
		delete(st.GrowFrom, v) // DRBD moved the metadata
		if err := save(st); err != nil {
			return st, err
		}
		if err := r.step(rd, "resized"); err != nil {
			return st, err
		}
	}
	if plan.DropDisks {
		if err := r.freeDisks(ctx, rd, st); err != nil {
			return st, err
		}
	}
	if len(plan.DropVolumes) > 0 && (plan.Adjust || plan.Down || !st.Adjusted) {
		if err := r.dropVolumes(ctx, rd, st, plan.DropVolumes); err != nil {
			return st, err
		}
		if err := save(st); err != nil {
			return st, err
		}
	}
	if plan.Adjust || len(st.Snapshots) > 0 {
		if err := r.snapshots(ctx, rd, d, st, prov, save); err != nil {
			return st, err
		}
	}
	if plan.Adjust {
		st.Peers = PeerKeysOf(d)
	}
	r.startUploads(rd, d, st, prov)
	st.Revision = d.Revision
	return st, save(st)
}

// recordGrowFrom saves, before volume v's backing grows, the size it has now: where its
// internal metadata is (only with metadata, and only the first time: after a crash
// halfway the disk may have grown already).
func (r *Reconciler) recordGrowFrom(st *State, v int, save func(*State) error) error {
	if !st.MDCreated {
		return nil
	}
	if _, done := st.GrowFrom[v]; done {
		return nil
	}
	n, err := deviceBytes(st.Disks[v])
	if err != nil {
		return fmt.Errorf("grow volume %d: %w", v, err)
	}
	if st.GrowFrom == nil {
		st.GrowFrom = map[int]uint64{}
	}
	st.GrowFrom[v] = n
	return save(st)
}

// forget runs del-peer and, on a replica with a disk, forget-peer for each node id, so
// its bitmap slot is free for whatever replica gets the node id next.
func (r *Reconciler) forget(ctx context.Context, rd string, diskless bool, st *State, ids []int) error {
	for _, id := range ids {
		if err := r.cfg.Kernel.DelPeer(ctx, rd, id); err != nil {
			// adjust already dropped the connection of a peer gone from the file
			r.cfg.Log.Debug().Str("resource", rd).Int("peer", id).Err(err).Msg("del-peer")
		}
		if !diskless {
			if err := r.cfg.Kernel.ForgetPeer(ctx, rd, id); err != nil {
				return fmt.Errorf("forget-peer node id %d: %w", id, err)
			}
		}
		delete(st.Peers, id)
		metricSteps.WithLabelValues("forget-peer").Inc()
	}
	return nil
}

func isFile(p backing.Provider) bool {
	return p == backing.ProviderFile || p == backing.ProviderFileThin
}

// provider returns the volume provider of l after checking that its pool exists (a
// file pool's directory; a volume group or zpool the tool can read): the agent never
// creates a storage pool.
func (r *Reconciler) provider(ctx context.Context, l *drbd.Local, rd string, vols []drbd.Volume) (volume.Provider, error) {
	prov, err := volume.For(l.Provider, l.Pool, r.cfg.Paths.Root, r.cfg.Exec)
	if err != nil {
		return nil, err
	}
	if f, ok := prov.(*volume.File); ok {
		fi, err := os.Stat(f.Dir)
		if err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("local.pool %q: storage pool directory %s does not exist", l.Pool, f.Dir)
		}
		return prov, nil
	}
	if len(vols) > 0 {
		if _, err := prov.Exists(ctx, backing.VolumeName(rd, vols[0].Number)); err != nil {
			return nil, fmt.Errorf("local.pool %q: %w", l.Pool, err)
		}
	}
	return prov, nil
}

// check stages the rendered file and has drbdadm check it against the node's other
// resources (-E the installed version). The staged file is removed either way.
func (r *Reconciler) check(ctx context.Context, d *drbd.Desired, rendered []byte, installed bool) error {
	staged := filepath.Join(r.cfg.Paths.StagedDir, d.Resource+".res")
	if err := fsx.WriteAtomic(staged, rendered, 0o644); err != nil {
		return fmt.Errorf("stage resource file: %w", err)
	}
	defer os.Remove(staged)
	exclude := ""
	if installed {
		exclude = r.cfg.Paths.ResFile(d.Resource)
	}
	if _, err := r.run(ctx, r.adm.CheckNew(staged, exclude), r.admEnv(d)...); err != nil {
		var e *execx.Error
		if errors.As(err, &e) && e.Stderr != "" {
			return fmt.Errorf("drbdadm refused the resource file: %s", e.Stderr)
		}
		return fmt.Errorf("drbdadm refused the resource file: %w", err)
	}
	return nil
}

// seed applies every seed of d (one set-gi per seed, always --force) and verifies the
// result with get-gi for every node id against drbd.Metadata.
func (r *Reconciler) seed(ctx context.Context, rd string, d *drbd.Desired, st *State, only map[int]bool) error {
	for _, s := range d.Local.Seeds {
		if only != nil && !only[s.Volume] {
			continue
		}
		disk, ok := st.Disks[s.Volume]
		if !ok {
			return fmt.Errorf("local.seeds: volume %d has no backing disk", s.Volume)
		}
		if _, err := r.run(ctx, drbdutils.SeedArgv(st.Minors[s.Volume], disk, s)); err != nil {
			return fmt.Errorf("set-gi volume %d node id %d: %w", s.Volume, s.NodeID, err)
		}
	}
	for _, v := range d.Volumes {
		if only != nil && !only[v.Number] {
			continue
		}
		want := drbd.NewMetadata()
		if err := want.Apply(d.Local.Seeds, v.Number); err != nil {
			return fmt.Errorf("local.seeds: %w", err)
		}
		for n := 0; n <= drbd.MaxNodeID; n++ {
			out, err := r.run(ctx, drbdutils.GetGI(st.Minors[v.Number], st.Disks[v.Number], n))
			if err != nil {
				return fmt.Errorf("verify seeds: %w", err)
			}
			got, err := drbdutils.ParseGetGI(out)
			if err != nil {
				return fmt.Errorf("verify seeds: %w", err)
			}
			if got != want.GI(n) {
				return fmt.Errorf("verify seeds: volume %d node id %d: get-gi %s, want %s", v.Number, n, got, want.GI(n))
			}
		}
	}
	return nil
}

// dropVolumes wipes the metadata of volumes the definition no longer has (DRBD detached
// them at the adjust) and removes their backing volumes and snapshots, then forgets them
// in st (the caller saves it).
func (r *Reconciler) dropVolumes(ctx context.Context, rd string, st *State, vols []int) error {
	prov, err := volume.For(st.Provider, st.Pool, r.cfg.Paths.Root, r.cfg.Exec)
	if err != nil {
		return err
	}
	snapper, _ := volume.SnapshotsOf(prov, st.Provider)
	for _, v := range vols {
		if disk, ok := st.Disks[v]; ok {
			if _, err := r.run(ctx, drbdutils.WipeMD(st.Minors[v], disk)); err != nil {
				return fmt.Errorf("wipe-md of dropped volume %d: %w", v, err)
			}
		}
		for name := range st.Snapshots {
			if err := deleteAll(ctx, snapper, rd, []int{v}, name); err != nil {
				return err
			}
		}
		if r.cfg.LoopDevices && isFile(st.Provider) {
			if err := (volume.Loop{Exec: r.cfg.Exec}).Detach(ctx, st.Disks[v]); err != nil {
				return err
			}
		}
		if err := prov.Remove(ctx, backing.VolumeName(rd, v)); err != nil {
			return err
		}
		delete(st.Disks, v)
		delete(st.Minors, v)
		delete(st.Sizes, v)
		delete(st.Resized, v)
		metricSteps.WithLabelValues("drop-volume").Inc()
	}
	return nil
}

// retire takes an older incarnation off the host: down (if it was up with disks),
// wipe-md and removal of its backing volumes.
func (r *Reconciler) retire(ctx context.Context, rd string, old *State, down bool) error {
	if down {
		if err := r.cfg.Kernel.Down(ctx, rd); err != nil {
			return fmt.Errorf("retire incarnation %d: down: %w", old.Incarnation, err)
		}
	}
	if err := r.freeDisks(ctx, rd, old); err != nil {
		return fmt.Errorf("retire incarnation %d: %w", old.Incarnation, err)
	}
	metricSteps.WithLabelValues("retire").Inc()
	return nil
}

// freeDisks wipes the metadata of st's disks and removes the backing volumes, then
// records that in st (the caller saves it).
func (r *Reconciler) freeDisks(ctx context.Context, rd string, st *State) error {
	if len(st.Disks) == 0 {
		return nil
	}
	prov, err := volume.For(st.Provider, st.Pool, r.cfg.Paths.Root, r.cfg.Exec)
	if err != nil {
		return err
	}
	snapper, _ := volume.SnapshotsOf(prov, st.Provider)
	for name := range st.Snapshots { // a volume goes with its snapshots
		if err := deleteAll(ctx, snapper, rd, diskVolumes(st), name); err != nil {
			return err
		}
	}
	st.Snapshots = nil
	for v, disk := range st.Disks {
		if st.MDCreated {
			if _, err := os.Stat(disk); err == nil || !isFile(st.Provider) {
				if _, err := r.run(ctx, drbdutils.WipeMD(st.Minors[v], disk)); err != nil {
					return fmt.Errorf("wipe-md volume %d: %w", v, err)
				}
				metricSteps.WithLabelValues("wipe").Inc()
			}
		}
		if r.cfg.LoopDevices && isFile(st.Provider) {
			if err := (volume.Loop{Exec: r.cfg.Exec}).Detach(ctx, disk); err != nil {
				return err
			}
		}
		if err := prov.Remove(ctx, backing.VolumeName(rd, v)); err != nil {
			return err
		}
		metricSteps.WithLabelValues("remove-backing").Inc()
	}
	st.Disks, st.Sizes, st.Resized, st.MDCreated, st.Seeded = nil, nil, nil, false, false
	return nil
}

// remove tears rd down: down, wipe-md, backing volumes, resource file, state file.
func (r *Reconciler) remove(ctx context.Context, rd string, st *State, down bool) error {
	if down {
		if err := r.cfg.Kernel.Down(ctx, rd); err != nil {
			return fmt.Errorf("down: %w", err)
		}
		metricSteps.WithLabelValues("down").Inc()
	}
	if st != nil {
		if err := r.freeDisks(ctx, rd, st); err != nil {
			return err
		}
	}
	if err := fsx.RemoveDurably(r.cfg.Paths.ResFile(rd)); err != nil {
		return err
	}
	if err := fsx.RemoveDurably(r.cfg.Paths.StateFile(rd)); err != nil {
		return err
	}
	return r.step(rd, "removed")
}

// localMinors returns the local replica's minors by volume.
func localMinors(d *drbd.Desired) map[int]int {
	for _, rep := range d.Replicas {
		if rep.Node == d.Node {
			out := make(map[int]int, len(rep.Minors))
			for v, m := range rep.Minors {
				out[v] = m
			}
			return out
		}
	}
	return map[int]int{}
}
