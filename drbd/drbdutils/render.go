package drbdutils

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strings"

	"github.com/cairn-io/cairn/drbd"

	"github.com/cairn-io/cairn"
)

// PeerDiskPlaceholder is the disk a diskful peer's volume names in this node's resource
// file. drbdadm requires a disk for every volume of every `on` section ("'disk'
// keyword missing" otherwise) but never opens a peer's disk, and the peer's real path
// is none of this node's business (it may even change while the peer converts from
// diskless). LINSTOR writes the same path.
const PeerDiskPlaceholder = "/dev/drbd/this/is/not/used"

// Names that go into a resource file unquoted or quoted must not be able to end a
// string, a statement or a section.
var (
	resourceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$`)
	hostName     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$`)
	diskPath     = regexp.MustCompile(`^/[A-Za-z0-9_./+:@-]+$`)
)

// maxMinor is the largest DRBD device minor (MINORMASK of the kernel, 2^20-1).
const maxMinor = 1<<20 - 1

// Render produces the DRBD 9 resource file of d.Resource for node d.Node:
//
//   - `resource "<name>"` with the options, net and disk sections of d.Options (typed
//     options first, then the Extra options of the section, sorted; empty sections
//     left out). d.Options must be resolved already (see Resolve, WithQuorumPolicy).
//   - One `on "<host>"` section per replica, by node id: node-id, `address ipv4
//     A.B.C.D:<port>` (ipv6 [addr]:port for IPv6) and per volume (by number) `device
//     minor N;`, then `disk <path>; meta-disk internal;` — the local replica's disk
//     from localDisks (volume number -> backing device), `disk none;` for a diskless
//     replica (local or peer), PeerDiskPlaceholder for a diskful peer.
//   - `connection-mesh { hosts … }` over all hosts: every replica connects to every
//     other, on the definition's one port.
//
// The output is deterministic for equal input. Render refuses impossible input with an
// invalid_argument *cairn.Error naming the field (all problems joined): no local
// replica (d.Local nil, or no replica on d.Node, or its node id differing from
// d.Local.NodeID), an invalid resource name, port, host, address or option, a node id
// outside 0..31 or used twice, a host used twice, no volumes or a volume number used
// twice, a missing or out-of-range minor, a minor used twice on one host, a diskful
// local volume without a disk in localDisks, or a diskless flag that differs between
// d.Local and the local replica. Conflicts with the node's other resources (minors,
// ports) are outside one Desired: check the file with Adm.CheckNew before installing.
func Render(d drbd.Desired, localDisks map[int]string) ([]byte, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, cairn.InvalidField(field, format, args...))
	}
	if !resourceName.MatchString(d.Resource) {
		bad("resource", "resource name %q must be 1-128 letters, digits and _.+- starting with a letter or digit", d.Resource)
	}
	if d.Port < 1 || d.Port > 65535 {
		bad("port", "port must be 1..65535, got %d", d.Port)
	}
	if err := d.Options.Validate(); err != nil {
		errs = append(errs, err)
	}

	volumes := append([]drbd.Volume(nil), d.Volumes...)
	sort.Slice(volumes, func(i, j int) bool { return volumes[i].Number < volumes[j].Number })
	if len(volumes) == 0 {
		bad("volumes", "resource %s has no volumes", d.Resource)
	}
	for i := 1; i < len(volumes); i++ {
		if volumes[i].Number == volumes[i-1].Number {
			bad("volumes", "volume number %d is used twice", volumes[i].Number)
		}
	}
	for i, v := range d.Volumes {
		if v.Number < 0 || v.Number > 65535 {
			bad(fmt.Sprintf("volumes[%d].number", i), "volume number must be 0..65535, got %d", v.Number)
		}
	}

	type indexed struct {
		drbd.Replica
		index int
	}
	replicas := make([]indexed, len(d.Replicas))
	for i, r := range d.Replicas {
		replicas[i] = indexed{r, i}
	}
	sort.SliceStable(replicas, func(i, j int) bool { return replicas[i].NodeID < replicas[j].NodeID })

	local := -1
	nodeIDs, hosts := map[int]int{}, map[string]int{}
	addrs := make([]string, len(replicas))
	for k, r := range replicas {
		field := fmt.Sprintf("replicas[%d]", r.index)
		if r.NodeID < 0 || r.NodeID > drbd.MaxNodeID {
			bad(field+".node_id", "node id must be 0..%d, got %d", drbd.MaxNodeID, r.NodeID)
		} else if j, dup := nodeIDs[r.NodeID]; dup {
			bad(field+".node_id", "node id %d is already used by replicas[%d] (node %s)", r.NodeID, j, d.Replicas[j].Node)
		} else {
			nodeIDs[r.NodeID] = r.index
		}
		if !hostName.MatchString(r.Host) {
			bad(field+".host", "host %q must be a host name (letters, digits, _.-)", r.Host)
		} else if j, dup := hosts[r.Host]; dup {
			bad(field+".host", "host %s is already used by replicas[%d]", r.Host, j)
		} else {
			hosts[r.Host] = r.index
		}
		ip, err := netip.ParseAddr(r.Address)
		switch {
		case err != nil || ip.Zone() != "":
			bad(field+".address", "address %q must be an IPv4 or IPv6 address", r.Address)
		case ip.Is4() || ip.Is4In6():
			addrs[k] = fmt.Sprintf("ipv4 %s:%d", ip.Unmap(), d.Port)
		default:
			addrs[k] = fmt.Sprintf("ipv6 [%s]:%d", ip, d.Port)
		}
		if r.Node == d.Node {
			if local >= 0 {
				bad(field+".node", "node %s has two replicas", d.Node)
			}
			local = k
		}
		seen := map[int]bool{}
		for _, v := range volumes {
			if seen[v.Number] {
				continue
			}
			seen[v.Number] = true
			m, ok := r.Minors[v.Number]
			if !ok {
				bad(fmt.Sprintf("%s.minors[%d]", field, v.Number), "replica on node %s has no minor for volume %d", r.Node, v.Number)
			} else if m < 0 || m > maxMinor {
				bad(fmt.Sprintf("%s.minors[%d]", field, v.Number), "minor must be 0..%d, got %d", maxMinor, m)
			}
		}
		byMinor := map[int]int{}
		for _, vn := range sortedInts(r.Minors) {
			if !seen[vn] {
				continue
			}
			m := r.Minors[vn]
			if other, dup := byMinor[m]; dup {
				bad(fmt.Sprintf("%s.minors[%d]", field, vn), "minor %d is already used by volume %d on node %s", m, other, r.Node)
			}
			byMinor[m] = vn
		}
	}

	switch {
	case d.Local == nil:
		bad("local", "node %s has no local replica of %s (an empty Local means: remove the resource)", d.Node, d.Resource)
	case local < 0:
		bad("replicas", "no replica is on node %s", d.Node)
	default:
		r := replicas[local]
		field := fmt.Sprintf("replicas[%d]", r.index)
		if r.NodeID != d.Local.NodeID {
			bad(field+".node_id", "the replica on node %s has node id %d but local.node_id is %d", d.Node, r.NodeID, d.Local.NodeID)
		}
		if r.Diskless != d.Local.Diskless {
			bad("local.diskless", "local.diskless is %v but the replica on node %s has diskless %v", d.Local.Diskless, d.Node, r.Diskless)
		}
		if !d.Local.Diskless {
			for _, v := range volumes {
				p, ok := localDisks[v.Number]
				if !ok || p == "" {
					bad(fmt.Sprintf("local_disks[%d]", v.Number), "diskful replica on node %s has no backing disk for volume %d", d.Node, v.Number)
				} else if !diskPath.MatchString(p) || strings.Contains(p, "//") {
					bad(fmt.Sprintf("local_disks[%d]", v.Number), "backing disk %q must be an absolute device path of letters, digits and _./+:@-", p)
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	var b bytes.Buffer
	w := func(indent int, format string, args ...any) {
		b.WriteString(strings.Repeat("    ", indent))
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	w(0, "# DRBD resource %s on node %s. Written by Cairn; local changes are overwritten.", d.Resource, d.Node)
	w(0, "resource %q {", d.Resource)
	for _, s := range []string{drbd.SectionOptions, drbd.SectionNet, drbd.SectionDisk} {
		opts := d.Options.InSection(s)
		if len(opts) == 0 {
			continue
		}
		w(1, "%s {", s)
		for _, kv := range opts {
			w(2, "%s %s;", kv[0], kv[1])
		}
		w(1, "}")
	}
	hostList := make([]string, len(replicas))
	for k, r := range replicas {
		hostList[k] = fmt.Sprintf("%q", r.Host)
		w(1, "on %q {", r.Host)
		w(2, "node-id %d;", r.NodeID)
		w(2, "address %s;", addrs[k])
		for _, v := range volumes {
			w(2, "volume %d {", v.Number)
			w(3, "device minor %d;", r.Minors[v.Number])
			switch {
			case r.Diskless:
				w(3, "disk none;")
			case k == local:
				w(3, "disk %q;", localDisks[v.Number])
				w(3, "meta-disk internal;")
			default:
				w(3, "disk %q;", PeerDiskPlaceholder)
				w(3, "meta-disk internal;")
			}
			w(2, "}")
		}
		w(1, "}")
	}
	w(1, "connection-mesh {")
	w(2, "hosts %s;", strings.Join(hostList, " "))
	w(1, "}")
	w(0, "}")
	return b.Bytes(), nil
}

func sortedInts[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}
