package drbd

// SyncKind is what the handshake between two disks decides to copy.
type SyncKind int

// The outcomes of DecideSync.
const (
	// SyncNone: the disks hold the same data (equal current UUIDs, or both just created).
	SyncNone SyncKind = iota
	// SyncBitmap: the source copies the blocks its bitmap for the target marks.
	SyncBitmap
	// SyncFull: the source copies every block.
	SyncFull
	// SyncUnrelated: the UUIDs share nothing; DRBD refuses the connection.
	SyncUnrelated
)

// String is the word the status reports: none, bitmap, full or unrelated.
func (k SyncKind) String() string {
	switch k {
	case SyncNone:
		return "none"
	case SyncBitmap:
		return "bitmap"
	case SyncFull:
		return "full"
	case SyncUnrelated:
		return "unrelated"
	}
	return "unknown"
}

// DecideSync decides what the handshake between disks a and b copies, the way DRBD's
// drbd_uuid_compare does in the cases Cairn's seeding produces (simplified: no
// dagtags, no bitmap contents, no split-brain handling). a is a's GI as
// `drbdmeta --node-id <b's node id> … get-gi` prints it (a's current and history
// UUIDs and a's bitmap UUID for b); b is b's GI read for a's node id. Primary bits
// (bit 0) are masked off. In order:
//
//   - both current UUIDs UUID_JUST_CREATED: none (neither holds data);
//   - one just created: full sync from the other;
//   - equal current UUIDs: none;
//   - b's bitmap UUID for a equals a's current: bitmap resync, b is the source (b has
//     recorded every write since a's data was current); a's bitmap UUID for b equals
//     b's current: bitmap resync, a is the source;
//   - b's current in a's history: full sync from a; a's current in b's history: full
//     sync from b;
//   - otherwise unrelated data (DRBD refuses to connect).
//
// aIsSource is meaningful for SyncBitmap and SyncFull only.
func DecideSync(a, b GI) (kind SyncKind, aIsSource bool) {
	mask := func(u UUID) UUID { return u &^ uuidPrimary }
	ca, cb := mask(a.Current()), mask(b.Current())
	inHistory := func(g GI, u UUID) bool {
		return mask(g.UUID(GIHistory1)) == u || mask(g.UUID(GIHistory2)) == u
	}
	switch {
	case ca == UUIDJustCreated && cb == UUIDJustCreated:
		return SyncNone, false
	case ca == UUIDJustCreated:
		return SyncFull, false
	case cb == UUIDJustCreated:
		return SyncFull, true
	case ca == cb:
		return SyncNone, false
	case mask(b.Bitmap()) == ca:
		return SyncBitmap, false
	case mask(a.Bitmap()) == cb:
		return SyncBitmap, true
	case inHistory(a, cb):
		return SyncFull, true
	case inHistory(b, ca):
		return SyncFull, false
	}
	return SyncUnrelated, false
}
