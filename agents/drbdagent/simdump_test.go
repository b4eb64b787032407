package drbdagent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-io/cairn/drbd"
)

// dumpMDText is dump-md output as drbdmeta v09 prints it (abridged: the bitmaps and the
// other fields the parser skips), with the current UUID, the bitmap UUID of every peer
// and the first two history UUIDs as given.
func dumpMDText(current string, bitmap func(peer int) string, history [2]string) string {
	var b strings.Builder
	b.WriteString("# DRBD meta data dump\nversion \"v09\";\n\nmax-peers 7;\nnode-id -1;\n")
	fmt.Fprintf(&b, "current-uuid %s;\nflags 0x00000080;\n", current)
	for i := 0; i <= drbd.MaxNodeID; i++ {
		fmt.Fprintf(&b, "peer[%d] {\n    bitmap-index -1;\n    bitmap-uuid %s;\n    bitmap-dagtag 0x0000000000000000;\n    flags 0x00000000;\n}\n", i, bitmap(i))
	}
	fmt.Fprintf(&b, "history-uuids {\n        %s; %s; 0x0000000000000000; 0x0000000000000000;\n}\n", history[0], history[1])
	b.WriteString("la-size-sect 0;\ndevice-uuid 0x0000000000000000;\nbitmap[0] {\n}\n")
	return b.String()
}

func TestParseDumpMD(t *testing.T) {
	const zero = "0x0000000000000000"
	bitmap := func(bad int, text string) func(int) string {
		return func(i int) string {
			if i == bad {
				return text
			}
			return fmt.Sprintf("0x%016X", 0xB000+i)
		}
	}
	good := [2]string{"0x000000000000CCCC", "0x000000000000DDDD"}
	tests := []struct {
		name    string
		dump    string
		wantErr string // "" = parses
	}{
		{"valid", dumpMDText("0x0000000000001234", bitmap(-1, ""), good), ""},
		{"current over-long", dumpMDText("0x10000000000000000", bitmap(-1, ""), good),
			`dump-md: current-uuid: UUID "0x10000000000000000" must be 1 to 16 hex digits`},
		{"current not hex", dumpMDText("0xZZ", bitmap(-1, ""), good), `dump-md: current-uuid: UUID "0xZZ"`},
		{"current empty", dumpMDText("", bitmap(-1, ""), good), `dump-md: current-uuid: UUID ""`},
		{"history over-long", dumpMDText(zero, bitmap(-1, ""), [2]string{"0x11112222333344445", good[1]}),
			`dump-md: history-uuids: UUID "0x11112222333344445"`},
		{"second history not hex", dumpMDText(zero, bitmap(-1, ""), [2]string{good[0], "0x12G4"}),
			`dump-md: history-uuids: UUID "0x12G4"`},
		{"bitmap of peer 3 over-long", dumpMDText(zero, bitmap(3, "0xFFFFFFFFFFFFFFFFF"), good),
			`dump-md: bitmap-uuid of peer 3: UUID "0xFFFFFFFFFFFFFFFFF"`},
		{"bitmap of peer 31 only a prefix", dumpMDText(zero, bitmap(31, "0x"), good),
			`dump-md: bitmap-uuid of peer 31: UUID "0x"`},
		{"no current-uuid", strings.Replace(dumpMDText(zero, bitmap(-1, ""), good), "current-uuid", "current-uuids", 1),
			"dump-md: no current-uuid"},
		{"no history-uuids", strings.Replace(dumpMDText(zero, bitmap(-1, ""), good), "history-uuids", "history", 1),
			"dump-md: no history-uuids"},
		{"a peer without bitmap-uuid", strings.Replace(dumpMDText(zero, bitmap(-1, ""), good), "bitmap-uuid 0x000000000000B005;", "", 1),
			"dump-md: 31 peer sections, want 32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := parseDumpMD([]byte(tt.dump))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseDumpMD = %+v, %v; want an error containing %q", u, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.current != 0x1234 || u.history != [2]drbd.UUID{0xCCCC, 0xDDDD} || u.bitmap[0] != 0xB000 || u.bitmap[31] != 0xB01F {
				t.Fatalf("parsed as %+v", u)
			}
		})
	}
}
