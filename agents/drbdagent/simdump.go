package drbdagent

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/internal/execx"
)

// simUUIDs are the UUIDs of one disk's metadata as `drbdmeta dump-md` prints them: one
// call instead of 32 get-gi when the simulated kernel needs every node id's bitmap UUID.
type simUUIDs struct {
	current drbd.UUID
	history [2]drbd.UUID
	bitmap  [drbd.MaxNodeID + 1]drbd.UUID
}

var (
	dumpCurrent = regexp.MustCompile(`(?m)^current-uuid 0x([0-9A-Fa-f]+);`)
	dumpPeer    = regexp.MustCompile(`(?ms)^peer\[(\d+)\] \{.*?bitmap-uuid 0x([0-9A-Fa-f]+);`)
	dumpHistory = regexp.MustCompile(`(?s)history-uuids \{\s*0x([0-9A-Fa-f]+);\s*0x([0-9A-Fa-f]+);`)
)

// parseDumpMD reads the UUIDs out of dump-md output. Returns an error when the current
// UUID, the history or any of the 32 peers is missing.
func parseDumpMD(out []byte) (simUUIDs, error) {
	var u simUUIDs
	s := string(out)
	hex := func(h string) drbd.UUID { v, _ := strconv.ParseUint(h, 16, 64); return drbd.UUID(v) }
	m := dumpCurrent.FindStringSubmatch(s)
	if m == nil {
		return u, fmt.Errorf("dump-md: no current-uuid")
	}
	u.current = hex(m[1])
	h := dumpHistory.FindStringSubmatch(s)
	if h == nil {
		return u, fmt.Errorf("dump-md: no history-uuids")
	}
	u.history = [2]drbd.UUID{hex(h[1]), hex(h[2])}
	seen := 0
	for _, p := range dumpPeer.FindAllStringSubmatch(s[:max(0, strings.Index(s, "history-uuids"))], -1) {
		i, err := strconv.Atoi(p[1])
		if err != nil || i < 0 || i > drbd.MaxNodeID {
			continue
		}
		u.bitmap[i] = hex(p[2])
		seen++
	}
	if seen != drbd.MaxNodeID+1 {
		return u, fmt.Errorf("dump-md: %d peer sections, want %d", seen, drbd.MaxNodeID+1)
	}
	return u, nil
}

func (m simMeta) dump(ctx context.Context, v *simVolume) (simUUIDs, error) {
	out, err := m.exec.Run(ctx, drbd.DumpMD(v.Minor, v.Disk), execx.Options{})
	if err != nil {
		return simUUIDs{}, err
	}
	return parseDumpMD(out)
}
