// Package backing is the contract between the control plane and the agents about backing
// storage: the providers a replica's disk can live on, what each promises (zeroes,
// snapshots), the per-node storage pool the dispatcher publishes and the capacity report
// an agent sends back. It is pure data: no I/O, no NATS, no Pebble. The agents' code that
// creates and measures volumes lives in agents/volume.
package backing

import (
	"fmt"
	"time"
)

// Provider names a kind of backing storage.
type Provider string

// The providers Cairn can put a replica's disk on.
const (
	ProviderLVM      Provider = "lvm"
	ProviderLVMThin  Provider = "lvm_thin"
	ProviderZFS      Provider = "zfs"
	ProviderZFSThin  Provider = "zfs_thin"
	ProviderFile     Provider = "file"
	ProviderFileThin Provider = "file_thin"
)

// Providers lists every provider, in the order the docs list them.
var Providers = []Provider{ProviderLVM, ProviderLVMThin, ProviderZFS, ProviderZFSThin, ProviderFile, ProviderFileThin}

// Valid reports whether p is a known provider.
func (p Provider) Valid() bool {
	for _, q := range Providers {
		if p == q {
			return true
		}
	}
	return false
}

// Thin reports whether p allocates on write (thin LVM, ZFS zvols, sparse files): a
// fresh volume reads back zeros everywhere nothing was written, and volumes have
// snapshots. Thick LVM and preallocated files do neither.
func (p Provider) Thin() bool {
	switch p {
	case ProviderLVMThin, ProviderZFS, ProviderZFSThin, ProviderFileThin:
		return true
	}
	return false
}

// ZeroesUnwritten reports whether a fresh volume of this provider reads back zeros
// everywhere nothing was written since it was created (Thin). Only such volumes may
// start from the day-0 GI: DRBD then resyncs just the blocks written since day 0. Thick
// LVM and preallocated files hold whatever was on the device before, so a new replica
// on them gets fresh metadata and a full sync.
func (p Provider) ZeroesUnwritten() bool { return p.Thin() }

// CanSnapshot reports whether a provider's volumes have snapshots (Thin: thick
// volumes are not snapshotted, as in LINSTOR).
func CanSnapshot(p Provider) bool { return p.Thin() }

// VolumeName is the backing volume name of volume number vol of resource: the resource
// name, "_", and vol as five decimal digits ("pvc-1_00000", "r1_00012").
func VolumeName(resource string, vol int) string { return fmt.Sprintf("%s_%05d", resource, vol) }

// Capacity is what a storage pool's back end says it has, in KiB: its size and what is
// still free. For thin pools (lvm_thin, zfs_thin, file_thin) it is physical space:
// volumes on them may promise more (over-provisioning).
type Capacity struct {
	TotalKiB uint64 `json:"total_kib"`
	FreeKiB  uint64 `json:"free_kib"`
}

// PoolSpec is the desired state of one storage pool on its node (the message the
// dispatcher keeps on <prefix>.node.<node>.sp.<name>; empty when the pool is gone): what
// the agent measures and reports.
type PoolSpec struct {
	Node     string   `json:"node"`
	Name     string   `json:"name"`
	Provider Provider `json:"provider"`
	Pool     string   `json:"pool"`
	Revision uint64   `json:"revision"`
	// Devices, when set, are the blank block devices the agent makes the back end on.
	Devices []string `json:"devices,omitempty"`
}

// PoolReport is an agent's report of one storage pool on <prefix>.status.<node>.sp.<name>:
// the capacity measured at At, or Error when it could not be measured.
type PoolReport struct {
	Node  string    `json:"node"`
	Name  string    `json:"name"`
	At    time.Time `json:"at"`
	Error string    `json:"error,omitempty"`
	Capacity
	// Reflink, for a file or file_thin pool, says whether its file system clones files
	// (FICLONE): a snapshot there is instant with it, and a full copy of every byte
	// without it. Absent for the other providers, whose snapshots are instant.
	Reflink *bool `json:"reflink,omitempty"`
}

// FullCopySnapshotMaxKiB is the largest definition (the sum of its volumes) a snapshot
// takes on a file pool without reflinks: its copy is a full copy, which must finish well
// within the suspension bound (64 MiB at a conservative 100 MiB/s is 0.64 s of the 2 s).
const FullCopySnapshotMaxKiB = 64 * 1024
