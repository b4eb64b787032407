package drbd

import (
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// UUID is one DRBD generation UUID (64 bits, printed as 16 upper-case hex digits).
// Bit 0 is DRBD's UUID_PRIMARY flag (the node was primary when it generated the
// UUID); DRBD masks it off when it compares UUIDs.
type UUID uint64

// Special UUID values.
const (
	// UUIDJustCreated is the current UUID drbdmeta create-md writes (DRBD's
	// UUID_JUST_CREATED): the disk has never been part of a handshake, and the kernel
	// sets every bitmap bit the first time it is.
	UUIDJustCreated UUID = 4
	// uuidPrimary is DRBD's UUID_PRIMARY bit.
	uuidPrimary UUID = 1
)

// String renders u as drbdmeta prints it: 16 upper-case hex digits.
func (u UUID) String() string { return fmt.Sprintf("%016X", uint64(u)) }

// ParseUUID reads a UUID written in hex, 1 to 16 digits, with or without a 0x prefix
// (drbdmeta accepts both). Returns an error naming the rule for anything else.
func ParseUUID(s string) (UUID, error) {
	h := s
	if len(h) > 2 && h[0] == '0' && (h[1] == 'x' || h[1] == 'X') {
		h = h[2:]
	}
	if h == "" || len(h) > 16 {
		return 0, fmt.Errorf("UUID %q must be 1 to 16 hex digits", s)
	}
	v, err := strconv.ParseUint(h, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("UUID %q must be 1 to 16 hex digits", s)
	}
	return UUID(v), nil
}

// ValidDay0 reports why u cannot be a day-0 or freshly generated current UUID, or nil:
// it must be even (the low bit is UUID_PRIMARY: an odd current UUID claims the disk was
// primary), and neither 0 (no UUID) nor 4 (UUID_JUST_CREATED, which makes the kernel
// set every bitmap bit: a full sync).
func ValidDay0(u UUID) error {
	switch {
	case u == 0:
		return fmt.Errorf("day-0 UUID must not be 0 (no UUID)")
	case u == UUIDJustCreated:
		return fmt.Errorf("day-0 UUID must not be 4 (UUID_JUST_CREATED)")
	case u&uuidPrimary != 0:
		return fmt.Errorf("day-0 UUID %s must be even (bit 0 is the primary flag)", u)
	}
	return nil
}

// NewDay0GI draws a random day-0 UUID from rand (crypto/rand.Reader in production):
// 64 random bits with the low (primary) bit cleared, drawn again while the result is 0
// or 4 (see ValidDay0). Any value listed in avoid is drawn again too, so a caller can
// ask for a current UUID that differs from the day-0 one. Returns the error of rand,
// or an error when 64 draws in a row were unusable (a broken random source).
func NewDay0GI(rand io.Reader, avoid ...UUID) (UUID, error) {
	var b [8]byte
	for range 64 {
		if _, err := io.ReadFull(rand, b[:]); err != nil {
			return 0, fmt.Errorf("drawing a day-0 UUID: %w", err)
		}
		u := UUID(binary.BigEndian.Uint64(b[:])) &^ uuidPrimary
		if ValidDay0(u) != nil || contains(avoid, u) {
			continue
		}
		return u, nil
	}
	return 0, fmt.Errorf("drawing a day-0 UUID: 64 draws in a row were 0, 4 or a value to avoid; the random source is broken")
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// GIField is one position of a GI string, in drbdmeta's order.
type GIField int

// The 16 fields of a DRBD 9 GI string: four UUIDs, seven device flags, five peer
// flags. Bitmap and the peer flags belong to one peer (drbdmeta --node-id N); the
// others belong to the device.
const (
	GICurrent GIField = iota
	GIBitmap
	GIHistory1
	GIHistory2
	GIConsistent
	GIWasUpToDate
	GIPrimary
	GICrashedPrimary
	GIALClean
	GIALDisabled
	GIPrimaryLostQuorum
	GIPeerConnected
	GIPeerOutdated
	GIPeerFencing
	GIPeerFullSync
	GIPeerDeviceSeen

	numGIFields = iota
)

// giFieldNames are the names drbdmeta's documentation and show-gi use.
var giFieldNames = [numGIFields]string{
	"current", "bitmap", "history1", "history2",
	"consistent", "was-up-to-date", "primary", "crashed-primary", "al-clean", "al-disabled", "primary-lost-quorum",
	"connected", "peer-outdated", "fencing", "peer-full-sync", "peer-device-seen",
}

// String returns the field's name, e.g. "was-up-to-date".
func (f GIField) String() string {
	if f < 0 || f >= numGIFields {
		return "GIField(" + strconv.Itoa(int(f)) + ")"
	}
	return giFieldNames[f]
}

// IsUUID reports whether f holds a UUID (the first four fields) rather than a flag.
func (f GIField) IsUUID() bool { return f >= GICurrent && f <= GIHistory2 }

// IsPeer reports whether f is per peer (bitmap UUID and the five peer flags).
func (f GIField) IsPeer() bool { return f == GIBitmap || f >= GIPeerConnected }

// GI is a DRBD 9 generation identifier as drbdmeta get-gi prints it and set-gi takes
// it: "current:bitmap:history1:history2:" then the seven device flags
// consistent:was-up-to-date:primary:crashed-primary:al-clean:al-disabled:primary-lost-quorum
// then the five peer flags connected:peer-outdated:fencing:peer-full-sync:peer-device-seen.
//
// Every field is either set or unset. get-gi output sets all 16; a set-gi argument
// leaves unset fields unchanged on disk (an empty field in the string). The zero GI
// has nothing set.
type GI struct {
	set    uint16
	values [numGIFields]uint64
}

// Set returns g with field f set to v (a UUID, or 0/1 for a flag; any non-zero value
// of a flag is stored as 1).
func (g GI) Set(f GIField, v uint64) GI {
	if !f.IsUUID() && v != 0 {
		v = 1
	}
	g.values[f] = v
	g.set |= 1 << f
	return g
}

// SetUUID returns g with the UUID field f set to u.
func (g GI) SetUUID(f GIField, u UUID) GI { return g.Set(f, uint64(u)) }

// SetFlag returns g with the flag field f set to b.
func (g GI) SetFlag(f GIField, b bool) GI {
	if b {
		return g.Set(f, 1)
	}
	return g.Set(f, 0)
}

// Unset returns g with field f unset.
func (g GI) Unset(f GIField) GI {
	g.values[f] = 0
	g.set &^= 1 << f
	return g
}

// IsSet reports whether field f is set.
func (g GI) IsSet(f GIField) bool { return g.set&(1<<f) != 0 }

// Get returns field f and whether it is set.
func (g GI) Get(f GIField) (uint64, bool) { return g.values[f], g.IsSet(f) }

// UUID returns the UUID field f (0 when unset).
func (g GI) UUID(f GIField) UUID { return UUID(g.values[f]) }

// Flag returns the flag field f (false when unset).
func (g GI) Flag(f GIField) bool { return g.values[f] != 0 }

// Current returns the current UUID (0 when unset).
func (g GI) Current() UUID { return g.UUID(GICurrent) }

// Bitmap returns the bitmap UUID of the peer the GI was read for (0 when unset).
func (g GI) Bitmap() UUID { return g.UUID(GIBitmap) }

// Complete reports whether all 16 fields are set, as in get-gi output.
func (g GI) Complete() bool { return g.set == 1<<numGIFields-1 }

// Empty reports whether no field is set.
func (g GI) Empty() bool { return g.set == 0 }

// Merge returns g with every field that update sets replaced: what set-gi does to the
// on-disk values with update as its argument.
func (g GI) Merge(update GI) GI {
	for f := GIField(0); f < numGIFields; f++ {
		if update.IsSet(f) {
			g = g.Set(f, update.values[f])
		}
	}
	return g
}

// minGIFields is how many fields String always writes: the four UUIDs and the two
// data flags (consistent, was-up-to-date), the part of a GI a seed is about. It gives
// the set-gi arguments LINSTOR writes and facts.md lists (`:DAY0::::`).
const minGIFields = int(GIWasUpToDate) + 1

// String renders g as a GI string: set fields as drbdmeta prints them (UUIDs in 16
// hex digits, flags 0 or 1), unset fields empty. Fields after the last set one are
// left out, except that the first six (the UUIDs, consistent and was-up-to-date) are
// always written, so a seed reads like `:DAY0::::`; drbdmeta treats a missing
// trailing field like an empty one. ParseGI(g.String()) == g for every g.
func (g GI) String() string {
	n := minGIFields
	for f := GIField(numGIFields - 1); int(f) >= minGIFields; f-- {
		if g.IsSet(f) {
			n = int(f) + 1
			break
		}
	}
	var b strings.Builder
	for f := GIField(0); int(f) < n; f++ {
		if f > 0 {
			b.WriteByte(':')
		}
		if !g.IsSet(f) {
			continue
		}
		if f.IsUUID() {
			b.WriteString(g.UUID(f).String())
		} else {
			b.WriteByte('0' + byte(g.values[f]))
		}
	}
	return b.String()
}

// ParseGI reads a GI string: up to 16 colon-separated fields in drbdmeta's order; an
// empty or missing field is unset. UUID fields are 1 to 16 hex digits (optional 0x),
// flag fields 0 or 1. A trailing newline is ignored. Errors name the field (by
// position and name) and the rule; more than 16 fields is an error (drbdmeta would
// silently ignore them).
func ParseGI(s string) (GI, error) {
	s = strings.TrimRight(s, "\r\n")
	var g GI
	if s == "" {
		return g, nil
	}
	parts := strings.Split(s, ":")
	if len(parts) > int(numGIFields) {
		return GI{}, fmt.Errorf("GI %q has %d fields, at most %d allowed", s, len(parts), numGIFields)
	}
	for i, p := range parts {
		f := GIField(i)
		if p == "" {
			continue
		}
		if f.IsUUID() {
			u, err := ParseUUID(p)
			if err != nil {
				return GI{}, fmt.Errorf("GI field %d (%s): %w", i+1, f, err)
			}
			g = g.SetUUID(f, u)
			continue
		}
		switch p {
		case "0":
			g = g.SetFlag(f, false)
		case "1":
			g = g.SetFlag(f, true)
		default:
			return GI{}, fmt.Errorf("GI field %d (%s) must be 0 or 1, got %q", i+1, f, p)
		}
	}
	return g, nil
}
