package drbdutils

import (
	"fmt"
	"strings"

	"github.com/cairn-io/cairn/drbd"
)

// ParseGetGI extracts the GI from the output of `drbdmeta … get-gi` or
// `drbdsetup get-gi`: the last line that parses as a complete (16-field) GI. Other
// lines, such as drbdmeta's "ioctl(…) returned -1, assuming hard_sect_size is 512 Byte"
// when stderr is mixed in, are skipped. Returns an error if no line holds a complete GI.
func ParseGetGI(out []byte) (drbd.GI, error) {
	lines := strings.Split(string(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := strings.TrimSpace(lines[i])
		if line == "" {
			continue
		}
		if g, err := drbd.ParseGI(line); err == nil && g.Complete() {
			return g, nil
		}
	}
	return drbd.GI{}, fmt.Errorf("get-gi output holds no complete 16-field GI: %q", clip(string(out), 200))
}

// clip shortens s to n bytes for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
