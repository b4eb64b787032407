// Package drbdagent is the DRBD part of the node agent: it carries out one node's
// drbd.Desired per resource (<prefix>.node.<node>.drbd.<resource>) and reports
// drbd.Status on <prefix>.status.<node>.drbd.<resource>.
//
// Per resource, in this order (see Plan for the rules and docs/agent.md):
//
//  1. checks that change nothing: the provider and its pool, drbdutils.Render, and
//     `drbdadm -c <main> -t <staged> -E <installed> sh-nop` against the node's other
//     resources. A refusal is a failed status naming the reason; nothing on the host
//     changed.
//  2. backing volumes through agents/volume, sized drbd.BackingKiB(size, max-peers);
//  3. the resource file installed atomically (temp file, fsync, rename, fsync dir);
//     it is inert until the adjust;
//  4. create-md once per incarnation, the seeding plan (one set-gi per seed, --force),
//     verified with get-gi for every node id against drbd.Metadata;
//  5. adjust (or down when the resource is deactivated); del-peer and forget-peer for
//     replicas that left;
//
// and a removal (empty message, or Local nil) takes it down, wipes the metadata, frees
// the backing volumes and removes the file and the state file.
//
// Progress is kept in a small state file per resource (<root>/var/lib/cairn/agent/<rd>.json,
// see State), written atomically after every step, so a restart continues where the
// last run stopped and never seeds metadata DRBD may already have used.
//
// The kernel side (adjust, down, del-peer, forget-peer, get-gi of an attached device,
// events2) is behind Kernel: Real runs drbdadm and drbdsetup; Sim (--kernel sim)
// replaces only what needs the DRBD module and runs the real drbdadm and drbdmeta on
// file-backed disks under a root directory.
package drbdagent
