package domains_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/cairn-io/cairn/commands/domains"
	"github.com/cockroachdb/datadriven"
)

// TestPlacement runs testdata/placement. Input lines are "LABEL host[:physical] ...".
//
//	place parity=N         rotation, each volume store's paths, the invariant
//	stripe chunks=N        chunks per domain for one stripe
//	journal copies=N [fd]  each journal set's members and copies per domain
//
// parseHosts reads "LABEL host[:physical] ..." lines into storage members.
func parseHosts(input string) []domains.Member {
	var members []domains.Member
	for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
		f := strings.Fields(line)
		for _, h := range f[1:] {
			host, physical, _ := strings.Cut(h, ":")
			members = append(members, domains.Member{Name: host, Host: host, Domain: f[0], Role: "storage", Physical: physical})
		}
	}
	return members
}

func TestPlacement(t *testing.T) {
	datadriven.RunTest(t, "testdata/placement", func(t *testing.T, d *datadriven.TestData) string {
		top := domains.BuildTopology(parseHosts(d.Input))
		rot := domains.Rotation(top)
		var b strings.Builder
		switch d.Cmd {
		case "place":
			var parity int
			d.ScanArgs(t, "parity", &parity)
			fmt.Fprintf(&b, "rotation:")
			for _, s := range rot {
				fmt.Fprintf(&b, " %s", s.Host)
			}
			b.WriteString("\n")
			same := 0
			stores := domains.PlaceVolumeStores(rot, parity)
			for _, vs := range stores {
				fmt.Fprintf(&b, "%s(%s):", vs.Primary.Host, vs.Primary.Domain)
				for _, p := range vs.Paths() {
					mark := ""
					if p.Domain == vs.Primary.Domain {
						mark = "*"
					}
					fmt.Fprintf(&b, " %s(%s)%s", p.Host, p.Domain, mark)
				}
				b.WriteString("\n")
				if vs.Secondary != nil && vs.Secondary.Domain == vs.Primary.Domain {
					same++
				}
			}
			fmt.Fprintf(&b, "same-domain secondaries: %d\n", same)
			if err := domains.CheckFailoverInvariant(stores); err != nil {
				fmt.Fprintf(&b, "invariant: %v\n", err)
			} else {
				b.WriteString("invariant: ok\n")
			}
		case "stripe":
			var chunks int
			d.ScanArgs(t, "chunks", &chunks)
			var labels []string
			for _, dh := range top.Domains {
				labels = append(labels, dh.Label)
			}
			per := domains.PlaceStripe(labels, chunks)
			for _, l := range labels {
				fmt.Fprintf(&b, "%s=%d ", l, per[l])
			}
			b.WriteString("\n")
		case "journal":
			var copies int
			d.ScanArgs(t, "copies", &copies)
			fd := d.HasArg("fd")
			for start := range rot {
				set := domains.PlaceJournal(rot, start, copies, fd)
				per := map[string]int{}
				var hosts []string
				for _, s := range set {
					per[s.Domain]++
					hosts = append(hosts, s.Host)
				}
				var counts []string
				for l, n := range per {
					counts = append(counts, fmt.Sprintf("%s=%d", l, n))
				}
				sort.Strings(counts)
				fmt.Fprintf(&b, "%s: %s [%s]\n", rot[start].Host, strings.Join(hosts, " "), strings.Join(counts, " "))
			}
		default:
			t.Fatalf("unknown command %s", d.Cmd)
		}
		return b.String()
	})
}
