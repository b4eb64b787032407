package drbdagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/cairn-io/cairn/agents/fsx"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/storage/backing"
)

// State is what the agent has done for one resource on this node, in
// <root>/var/lib/cairn/agent/<rd>.json. It is written atomically after every step, so
// after a crash it says exactly which steps of the current incarnation are done.
//
// The rules (Plan applies them):
//   - Steps belong to Incarnation only. A Desired of a newer incarnation retires this
//     one (down if adjusted, wipe-md, backing volumes removed) and starts over; one of
//     an older incarnation, or an older revision, is ignored.
//   - create-md runs while MDCreated is false; the seeds are applied (all of them,
//     set-gi is idempotent) and verified while Seeded is false; both only while
//     Adjusted is false.
//   - Adjusted is written BEFORE the first adjust runs: from then on DRBD may have used
//     the metadata, and nothing ever seeds it again.
type State struct {
	Resource    string `json:"resource"`
	Incarnation uint64 `json:"incarnation"`
	// Revision is the Desired revision last carried out completely.
	Revision uint64 `json:"revision"`
	Diskless bool   `json:"diskless,omitempty"`
	// Provider and Pool of the backing volumes (diskful only).
	Provider backing.Provider `json:"provider,omitempty"`
	Pool     string           `json:"pool,omitempty"`
	// MaxPeers is the create-md max-peers (fixed for the incarnation; the backing
	// volumes are sized for it).
	MaxPeers int `json:"max_peers,omitempty"`
	// Disks are the backing volumes created, by volume number (the file or device
	// drbdmeta writes); Minors the minors drbdmeta was called with.
	Disks  map[int]string `json:"disks,omitempty"`
	Minors map[int]int    `json:"minors,omitempty"`
	// Sizes are the volume sizes (KiB, before metadata) the backing volumes hold, by
	// volume number; Resized the sizes DRBD's resize was carried out for (a volume
	// created at its size counts as resized). A Desired with a larger size grows the
	// backing (Sizes) and then resizes DRBD (Resized). A state without Sizes (written
	// before resizes existed) records them at the next reconcile without growing.
	Sizes   map[int]uint64 `json:"sizes_kib,omitempty"`
	Resized map[int]uint64 `json:"resized_kib,omitempty"`
	// GrowFrom are the byte sizes of backing volumes with metadata, measured before
	// they grew: where their internal metadata sits until DRBD's resize (attached) or
	// drbdmeta check-resize (detached) moves it to the new end. Cleared then.
	GrowFrom map[int]uint64 `json:"grow_from_bytes,omitempty"`

	MDCreated bool `json:"md_created,omitempty"`
	// Filled are the volumes filled from a backup (Local.RestoreBackup), by number:
	// done once, before their metadata is created.
	Filled   map[int]bool `json:"filled,omitempty"`
	Seeded   bool         `json:"seeded,omitempty"`
	Adjusted bool         `json:"adjusted,omitempty"`

	// Adding are volumes added to the adjusted incarnation whose metadata is not
	// created and seeded yet (written before their backing volumes are made).
	Adding []int `json:"adding,omitempty"`
	// RolledBack is the Seq of the last roll back carried out (Local.Rollback).
	RolledBack uint64 `json:"rolled_back,omitempty"`
	// Snapshots are this incarnation's part in the definition's snapshots, by name.
	Snapshots map[string]*SnapState `json:"snapshots,omitempty"`
	// FilesystemsMade are the volumes whose filesystem (drbd.Local.Filesystems) this
	// incarnation made, with its type (reported until the definition records it).
	FilesystemsMade map[int]string `json:"filesystems_made,omitempty"`

	// Peers are the peers of the last configuration adjusted (node id -> node, or
	// "node#incarnation" when the desired state names the peer's incarnation); a peer
	// that is gone from the Desired, or came back as a new incarnation, gets del-peer
	// and forget-peer.
	Peers map[int]string `json:"peers,omitempty"`
}

// LoadState reads the state file at path; (nil, nil) when there is none. Returns an
// error naming the file when it cannot be read or parsed.
func LoadState(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	return &s, nil
}

// SaveState writes s to path atomically (temp file, fsync, rename, fsync dir).
func SaveState(path string, s *State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := fsx.WriteAtomic(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("state file %s: %w", path, err)
	}
	return nil
}

// SnapState is what the node did for one snapshot: Phase is a drbd.SnapshotStatus
// phase (suspended, taken, aborted, failed). Held is true from BEFORE suspend-io runs
// until resume-io succeeded, so after a crash, or a resume that failed, the agent knows
// I/O may still be suspended and resumes it; SuspendedAt is when it was set. Copies is
// true once a take started (copies may exist: an abort removes them).
type SnapState struct {
	Seq    uint64 `json:"seq"`
	Phase  string `json:"phase"`
	Held   bool   `json:"held,omitempty"`
	Copies bool   `json:"copies,omitempty"`
	// Minors are the devices suspended (a diskless replica's state has no Minors).
	Minors      []int     `json:"minors,omitempty"`
	SuspendedAt time.Time `json:"suspended_at,omitzero"`
	SuspendedMs float64   `json:"suspended_ms,omitempty"`
	Error       string    `json:"error,omitempty"`
}

// held reports whether I/O may still be suspended for the snapshot (state files written
// before Held existed say so with the phase alone).
func (s *SnapState) held() bool { return s.Held || s.Phase == drbd.SnapSuspended }
