package projections

import (
	"encoding/binary"
	"strings"
)

// Counts is how many objects of each kind the views hold.
type Counts struct {
	Nodes, Groups, Definitions, Replicas, StoragePools int
}

// Counts counts the views' objects by their keys. It reads every node, group,
// definition and storage-pool key and one replica count per definition (never a
// definition's record), so its cost grows with the number of objects, not with history.
func (v *View) Counts() (Counts, error) {
	var c Counts
	count := func(prefix string, n *int, match func(key string) bool) error {
		return v.scan(prefix, func(key string, _ []byte) error {
			if match == nil || match(key) {
				*n++
			}
			return nil
		})
	}
	if err := count("v/node/", &c.Nodes, func(k string) bool { return strings.HasSuffix(k, "/spec") }); err != nil {
		return c, err
	}
	if err := count("v/rg/", &c.Groups, nil); err != nil {
		return c, err
	}
	if err := count("v/rd/", &c.Definitions, nil); err != nil {
		return c, err
	}
	if err := count("v/sp/", &c.StoragePools, nil); err != nil {
		return c, err
	}
	err := v.scan(rdReplicasPrefix, func(_ string, val []byte) error {
		c.Replicas += int(binary.BigEndian.Uint64(val))
		return nil
	})
	return c, err
}
