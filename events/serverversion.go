package events

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// MinServerVersion is the oldest nats-server Cairn runs on. Older servers lack what its
// guarantees rest on, and nothing else would notice: atomic batch publish (2.12: one
// command's events stored whole or not at all; on 2.9 an acknowledged rg.spawn was
// stored several times and two definitions got one DRBD port), per-message expected
// last sequences per subject (the consistency boundaries) and key-value entries that
// expire (the lease, the replies).
const MinServerVersion = "2.12.0"

// CheckServerVersion refuses a connection to a nats-server older than
// MinServerVersion, with an error naming the server's version, its address and the
// minimum. A version it cannot read is refused too.
func CheckServerVersion(nc *nats.Conn) error {
	have := nc.ConnectedServerVersion()
	ok, err := versionAtLeast(have, MinServerVersion)
	if err != nil {
		return fmt.Errorf("nats-server at %s reports version %q: %w; Cairn needs nats-server %s or newer", nc.ConnectedUrlRedacted(), have, err, MinServerVersion)
	}
	if !ok {
		return fmt.Errorf("nats-server at %s is version %s; Cairn needs nats-server %s or newer (atomic batch publish, per-subject expected sequences, expiring key-value entries: without them an acknowledged command can be stored twice)",
			nc.ConnectedUrlRedacted(), have, MinServerVersion)
	}
	return nil
}

// versionAtLeast compares dotted versions (a leading v and a -suffix are ignored).
func versionAtLeast(have, min string) (bool, error) {
	h, err := parseVersion(have)
	if err != nil {
		return false, err
	}
	m, err := parseVersion(min)
	if err != nil {
		return false, err
	}
	for i := range 3 {
		if h[i] != m[i] {
			return h[i] > m[i], nil
		}
	}
	return true, nil
}

func parseVersion(v string) ([3]int, error) {
	var out [3]int
	v = strings.TrimPrefix(v, "v")
	v, _, _ = strings.Cut(v, "-")
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, fmt.Errorf("not a version (major.minor.patch)")
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, fmt.Errorf("not a version (major.minor.patch)")
		}
		out[i] = n
	}
	return out, nil
}
