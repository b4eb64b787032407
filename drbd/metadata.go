package drbd

import "fmt"

// DRBD's node-id limits (DRBD_NODE_ID_MAX, DRBD_PEERS_MAX): node ids are 0..31, and
// create-md takes 1..31 bitmap slots.
const (
	MaxNodeID   = 31
	MaxPeersMax = 31
)

// Metadata models the GI part of one volume's DRBD 9 metadata the way drbdmeta reads
// and writes it: the current UUID, two history UUIDs and the device flags belong to the
// device; a bitmap UUID and the peer flags are kept per node id, for all 32 node ids,
// independently of create-md's max-peers (which only sizes the bitmap slots; a node id
// without a bitmap slot still has its own bitmap UUID, and set-gi --node-id N writes
// it). Verified with drbdmeta 9.22 on a plain file; see TestSeedsWithRealDrbdmeta.
//
// The agent can use it to check a seeding: apply the plan to NewMetadata, then compare
// GI(n) with `drbdmeta --node-id n … get-gi` for every node id.
type Metadata struct {
	device GI // current, history, device flags
	peers  [MaxNodeID + 1]GI
}

// NewMetadata returns the state drbdmeta create-md leaves: current UUID 4
// (UUID_JUST_CREATED), all other UUIDs 0, only the al-clean flag set.
func NewMetadata() Metadata {
	var m Metadata
	for f := GIField(0); f < numGIFields; f++ {
		v := uint64(0)
		if f == GICurrent {
			v = uint64(UUIDJustCreated)
		}
		if f == GIALClean {
			v = 1
		}
		if f.IsPeer() {
			for n := range m.peers {
				m.peers[n] = m.peers[n].Set(f, v)
			}
		} else {
			m.device = m.device.Set(f, v)
		}
	}
	return m
}

// SetGI applies a set-gi argument for nodeID as `drbdmeta --node-id nodeID … set-gi g`
// does: every set field replaces the stored one, the per-peer fields in nodeID's slot.
// Returns an error if nodeID is outside 0..31 (drbdmeta: "node-id out of range").
func (m *Metadata) SetGI(nodeID int, g GI) error {
	if nodeID < 0 || nodeID > MaxNodeID {
		return fmt.Errorf("node id %d out of range 0..%d", nodeID, MaxNodeID)
	}
	for f := GIField(0); f < numGIFields; f++ {
		v, ok := g.Get(f)
		if !ok {
			continue
		}
		if f.IsPeer() {
			m.peers[nodeID] = m.peers[nodeID].Set(f, v)
		} else {
			m.device = m.device.Set(f, v)
		}
	}
	return nil
}

// GI returns what `drbdmeta --node-id nodeID … get-gi` prints: the device fields with
// nodeID's bitmap UUID and peer flags. It panics if nodeID is outside 0..31.
func (m Metadata) GI(nodeID int) GI {
	return m.device.Merge(m.peers[nodeID])
}

// Apply applies every seed of volume to m, in order. Returns the first error of SetGI or
// of parsing a seed's GI.
func (m *Metadata) Apply(seeds []Seed, volume int) error {
	for _, s := range seeds {
		if s.Volume != volume {
			continue
		}
		g, err := ParseGI(s.GI)
		if err != nil {
			return fmt.Errorf("seed for volume %d node id %d: %w", s.Volume, s.NodeID, err)
		}
		if err := m.SetGI(s.NodeID, g); err != nil {
			return fmt.Errorf("seed for volume %d: %w", s.Volume, err)
		}
	}
	return nil
}

// Internal metadata geometry of drbdmeta v09 ("internal" is flexible-size internal
// metadata at the end of the backing device) with the defaults Cairn uses: one bit per
// 4 KiB block per bitmap slot, one activity-log stripe of 32 KiB.
const (
	mdSuperblockBytes = 4096
	mdALBytes         = 32 << 10
	bmBlockBytes      = 4096
)

// InternalMetadataBytes returns how many bytes at the end of a backing device of
// backingBytes `drbdmeta create-md maxPeers` reserves for internal metadata: the
// superblock, the activity log and maxPeers bitmaps of the whole device, the bitmaps
// rounded up to 4 KiB (the formula of drbdmeta 9.22, checked against its dump-md).
func InternalMetadataBytes(backingBytes uint64, maxPeers int) uint64 {
	sectors := backingBytes >> 9
	bits := (sectors + bmBlockBytes/512 - 1) / (bmBlockBytes / 512)
	bits = (bits + 63) &^ 63
	bm := (bits/8*uint64(maxPeers) + 4095) &^ 4095
	return bm + mdSuperblockBytes + mdALBytes
}

// UsableBytes returns the size of the DRBD device a backing device of backingBytes
// offers with internal metadata: the device size rounded down to 4 KiB, less the
// metadata (0 when the metadata does not fit).
func UsableBytes(backingBytes uint64, maxPeers int) uint64 {
	aligned := backingBytes &^ 4095
	md := InternalMetadataBytes(backingBytes, maxPeers)
	if md >= aligned {
		return 0
	}
	return aligned - md
}

// BackingKiB returns the smallest backing device size in KiB, a multiple of 4 KiB,
// whose DRBD device offers at least sizeKiB with internal metadata and maxPeers bitmap
// slots: what a storage provider must allocate for a volume of sizeKiB. Providers that
// round sizes up further (LVM extents, zvol block sizes) may; DRBD then offers a little
// more.
func BackingKiB(sizeKiB uint64, maxPeers int) uint64 {
	want := sizeKiB << 10
	g := (want + InternalMetadataBytes(want, maxPeers) + 4095) &^ 4095
	for g > 4096 && UsableBytes(g-4096, maxPeers) >= want {
		g -= 4096
	}
	for UsableBytes(g, maxPeers) < want {
		g += 4096
	}
	return g >> 10
}
