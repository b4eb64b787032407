package domains_test

import (
	"fmt"
	"testing"

	"github.com/cairn-io/cairn/commands/domains"
	"github.com/cairn-io/cairn/test/testtools"
	"pgregory.net/rapid"
)

// Random sequences of node adds and removals on an activated cluster: whatever the rules
// accept never leaves host counts that differ by more than one, and no accepted change
// moves a host to another domain.
func TestBalanceHoldsUnderRandomChanges(t *testing.T) {
	testtools.RapidChecks(t, 1000)
	rapid.Check(t, func(t *rapid.T) {
		nDomains := rapid.IntRange(3, 5).Draw(t, "domains")
		perDomain := rapid.IntRange(2, 4).Draw(t, "hosts per domain")
		var members []domains.Member
		next := 0
		for d := range nDomains {
			for range perDomain {
				members = append(members, domains.Member{Name: fmt.Sprintf("n%d", next), Host: fmt.Sprintf("h%d", next), Domain: fmt.Sprintf("D%d", d), Role: "storage"})
				next++
			}
		}
		var labels []string
		for d := range nDomains {
			labels = append(labels, fmt.Sprintf("D%d", d))
		}
		for range rapid.IntRange(1, 40).Draw(t, "steps") {
			before := domains.BuildTopology(members, labels...)
			if len(members) > 0 && rapid.Bool().Draw(t, "remove") {
				i := rapid.IntRange(0, len(members)-1).Draw(t, "victim")
				after := append(append([]domains.Member(nil), members[:i]...), members[i+1:]...)
				if domains.CheckChange(before, domains.BuildTopology(after, labels...), false) == nil {
					members = after
				}
			} else {
				host := fmt.Sprintf("h%d", rapid.IntRange(0, next+3).Draw(t, "host"))
				cand := domains.Member{Name: fmt.Sprintf("x%d", next), Host: host, Domain: fmt.Sprintf("D%d", rapid.IntRange(0, nDomains-1).Draw(t, "domain")),
					Role: rapid.SampledFrom([]string{"storage", "storage", "secondary"}).Draw(t, "role")}
				next++
				if domains.CheckHostLabel(members, cand) != nil {
					continue
				}
				after := append(append([]domains.Member(nil), members...), cand)
				if domains.CheckChange(before, domains.BuildTopology(after, labels...), false) == nil {
					members = after
				}
			}
			counts := map[string]int{}
			for d := range nDomains {
				counts[fmt.Sprintf("D%d", d)] = 0
			}
			for _, d := range domains.BuildTopology(members).Domains {
				counts[d.Label] = len(d.Hosts)
			}
			lo, hi := 1<<30, 0
			for _, n := range counts {
				lo, hi = min(lo, n), max(hi, n)
			}
			if hi-lo > 1 {
				t.Fatalf("accepted changes left %v", counts)
			}
			seen := map[string]string{}
			for _, m := range members {
				if d, ok := seen[m.Host]; ok && d != m.Domain {
					t.Fatalf("host %s in two domains", m.Host)
				}
				seen[m.Host] = m.Domain
			}
		}
	})
}

// Any topology within +-1 over at least two domains places volume stores that keep the
// failover-path invariant, and journals that survive the loss of any one domain.
func TestPlacementInvariantsOnRandomTopologies(t *testing.T) {
	testtools.RapidChecks(t, 1000)
	rapid.Check(t, func(t *rapid.T) {
		nDomains := rapid.IntRange(2, 6).Draw(t, "domains")
		base := rapid.IntRange(1, 5).Draw(t, "hosts")
		var members []domains.Member
		for d := range nDomains {
			n := base + rapid.IntRange(0, 1).Draw(t, fmt.Sprintf("extra%d", d))
			for h := range n {
				members = append(members, domains.Member{Name: fmt.Sprintf("n%d-%d", d, h), Host: fmt.Sprintf("h%d-%d", d, h), Domain: fmt.Sprintf("D%d", d)})
			}
		}
		rot := domains.Rotation(domains.BuildTopology(members))
		for _, parity := range []int{1, 2} {
			if err := domains.CheckFailoverInvariant(domains.PlaceVolumeStores(rot, parity)); err != nil {
				t.Fatalf("parity %d: %v", parity, err)
			}
		}
		copies := domains.JournalCopies(true, 1)
		for start := range rot {
			set := domains.PlaceJournal(rot, start, copies, true)
			per := map[string]int{}
			hosts := map[string]bool{}
			for _, s := range set {
				per[s.Domain]++
				if hosts[s.Host] {
					t.Fatalf("journal set %d has two copies on %s", start, s.Host)
				}
				hosts[s.Host] = true
			}
			for d, n := range per {
				if len(set)-n < domains.JournalQuorum(copies) && len(set) == copies {
					t.Fatalf("losing %s leaves %d of %d copies", d, len(set)-n, copies)
				}
			}
		}
	})
}

// Removing any host that the balance rules let go: the recorded placement follows
// (paths moved, journal members replaced) and keeps the failover invariant, distinct
// hosts per journal set, and never refers to the departed host.
func TestRelocationKeepsTheInvariants(t *testing.T) {
	testtools.RapidChecks(t, 1000)
	rapid.Check(t, func(t *rapid.T) {
		nDomains := rapid.IntRange(3, 5).Draw(t, "domains")
		per := rapid.IntRange(2, 4).Draw(t, "hosts")
		parity := rapid.IntRange(1, 2).Draw(t, "parity")
		var members []domains.Member
		var labels []string
		for d := range nDomains {
			labels = append(labels, fmt.Sprintf("D%d", d))
			for h := range per {
				members = append(members, domains.Member{Name: fmt.Sprintf("h%d-%d", d, h), Host: fmt.Sprintf("h%d-%d", d, h), Domain: fmt.Sprintf("D%d", d)})
			}
		}
		rot := domains.Rotation(domains.BuildTopology(members))
		stores := domains.PlaceVolumeStores(rot, parity)
		copies := domains.JournalCopies(true, parity)
		var journals []domains.JournalSet
		for i, s := range rot {
			var hosts []string
			for _, m := range domains.PlaceJournal(rot, i, copies, true) {
				hosts = append(hosts, m.Host)
			}
			journals = append(journals, domains.JournalSet{Owner: s.Host, Members: hosts})
		}
		for range rapid.IntRange(1, 4).Draw(t, "removals") {
			if len(members) == 0 {
				return
			}
			i := rapid.IntRange(0, len(members)-1).Draw(t, "victim")
			after := append(append([]domains.Member(nil), members[:i]...), members[i+1:]...)
			if domains.CheckChange(domains.BuildTopology(members, labels...), domains.BuildTopology(after, labels...), false) != nil {
				continue
			}
			leaving := domains.Slot{Host: members[i].Host, Domain: members[i].Domain}
			afterRot := domains.Rotation(domains.BuildTopology(after))
			rel, err := domains.PlanRemoval(stores, journals, afterRot, leaving, copies, true)
			if err != nil {
				continue // refused: nothing changes
			}
			stores, journals = domains.ApplyRelocation(stores, journals, afterRot, leaving.Host, rel)
			members = after
			if err := domains.CheckFailoverInvariant(stores); err != nil {
				t.Fatalf("after removing %s: %v", leaving.Host, err)
			}
			for _, vs := range stores {
				for _, p := range append(vs.Paths(), vs.Primary) {
					if p.Host == leaving.Host {
						t.Fatalf("store of %s still uses %s", vs.Primary.Host, leaving.Host)
					}
				}
			}
			for _, js := range journals {
				seen := map[string]bool{}
				for _, m := range js.Members {
					if m == leaving.Host || seen[m] {
						t.Fatalf("journal of %s: %v", js.Owner, js.Members)
					}
					seen[m] = true
				}
			}
		}
	})
}
