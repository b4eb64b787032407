package drbdagent

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
)

// simUUIDs are the UUIDs of one disk's metadata as `drbdmeta dump-md` prints them: one
// call instead of 32 get-gi when the simulated kernel needs every node id's bitmap UUID.
type simUUIDs struct {
	current drbd.UUID
	history [2]drbd.UUID
	bitmap  [drbd.MaxNodeID + 1]drbd.UUID
}

// The UUID fields of dump-md output. Each captures the whole value up to its `;`, so
// a malformed value reaches drbd.ParseUUID and is reported as such, not as missing. A
// peer's bitmap-uuid is looked for inside its own section only.
var (
	dumpCurrent = regexp.MustCompile(`(?m)^current-uuid ([^;\s]*);`)
	dumpPeer    = regexp.MustCompile(`(?m)^peer\[(\d+)\] \{[^}]*?bitmap-uuid ([^;\s]*);`)
	dumpHistory = regexp.MustCompile(`history-uuids \{\s*([^;\s]*);\s*([^;\s]*);`)
)

// parseDumpMD reads the UUIDs out of dump-md output. Returns an error when the current
// UUID, the history or any of the 32 peers is missing, or when one of these values is
// not 1 to 16 hex digits (the error names the field, e.g. `bitmap-uuid of peer 3`, and
// the text).
func parseDumpMD(out []byte) (simUUIDs, error) {
	var u simUUIDs
	s := string(out)
	m := dumpCurrent.FindStringSubmatch(s)
	if m == nil {
		return u, fmt.Errorf("dump-md: no current-uuid")
	}
	var err error
	if u.current, err = dumpUUID("current-uuid", m[1]); err != nil {
		return u, err
	}
	h := dumpHistory.FindStringSubmatch(s)
	if h == nil {
		return u, fmt.Errorf("dump-md: no history-uuids")
	}
	for i := range u.history {
		if u.history[i], err = dumpUUID("history-uuids", h[i+1]); err != nil {
			return u, err
		}
	}
	if err := parseDumpPeers(s[:max(0, strings.Index(s, "history-uuids"))], &u.bitmap); err != nil {
		return u, err
	}
	return u, nil
}

// parseDumpPeers fills bitmap from the peer[N] sections of dump-md output (the part
// before history-uuids). Returns an error when a bitmap-uuid is malformed, or when
// there are not exactly 32 sections with a node id from 0 to drbd.MaxNodeID.
func parseDumpPeers(s string, bitmap *[drbd.MaxNodeID + 1]drbd.UUID) error {
	seen := 0
	for _, p := range dumpPeer.FindAllStringSubmatch(s, -1) {
		i, err := strconv.Atoi(p[1])
		if err != nil || i < 0 || i > drbd.MaxNodeID {
			continue
		}
		if bitmap[i], err = dumpUUID(fmt.Sprintf("bitmap-uuid of peer %d", i), p[2]); err != nil {
			return err
		}
		seen++
	}
	if seen != drbd.MaxNodeID+1 {
		return fmt.Errorf("dump-md: %d peer sections, want %d", seen, drbd.MaxNodeID+1)
	}
	return nil
}

// dumpUUID parses the value of field as drbd.ParseUUID does; the error names the
// field and the text.
func dumpUUID(field, text string) (drbd.UUID, error) {
	v, err := drbd.ParseUUID(text)
	if err != nil {
		return 0, fmt.Errorf("dump-md: %s: %w", field, err)
	}
	return v, nil
}

func (m simMeta) dump(ctx context.Context, v *simVolume) (simUUIDs, error) {
	if err := m.follow(ctx, v); err != nil {
		return simUUIDs{}, err
	}
	out, err := m.exec.Run(ctx, drbdutils.DumpMD(v.Minor, v.Disk), execx.Options{})
	if err != nil {
		return simUUIDs{}, err
	}
	return parseDumpMD(out)
}
