package commands_test

import (
	"flag"
	"fmt"
	"testing"

	"github.com/cairn-io/cairn/commands/domains"
	"github.com/cairn-io/cairn/server"
	"github.com/cairn-io/cairn/server/servertest"
	"pgregory.net/rapid"
)

// Random sequences of node.add, node.remove, lvol.create, lvol.delete and outages
// (node.set-state offline) and returns (online) against real admission on a 2+1
// failure-domain cluster: whatever admission accepts, the views never hold a state that
// breaks the balance, the failover-path invariant or the journal rules.
func TestAdmissionKeepsTheInvariantsUnderRandomCommands(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" {
		_ = f.Value.Set("15") // each check starts a real server
	}
	rapid.Check(t, func(rt *rapid.T) {
		s := servertest.Start(t)
		servertest.Submit(s, "cluster.create", cluster)
		next := 0
		var nodes []string
		add := func(domain int) {
			name := fmt.Sprintf("n%d", next)
			if servertest.Submit(s, "node.add", fmt.Sprintf(`{"name":%q,"host":"h%d","address":"10.0.0.1","failure_domain":"RACK%d"}`, name, next, domain)).OK {
				nodes = append(nodes, name)
			}
			next++
		}
		for i := range 6 {
			add(i%3 + 1)
		}
		if !servertest.Submit(s, "cluster.activate", `{}`).OK {
			rt.Fatal("activation refused")
		}
		vols := 0
		for range rapid.IntRange(5, 30).Draw(rt, "steps") {
			switch rapid.IntRange(0, 4).Draw(rt, "op") {
			case 0:
				add(rapid.IntRange(1, 3).Draw(rt, "domain"))
			case 1:
				if len(nodes) > 0 {
					i := rapid.IntRange(0, len(nodes)-1).Draw(rt, "victim")
					if servertest.Submit(s, "node.remove", fmt.Sprintf(`{"name":%q}`, nodes[i])).OK {
						nodes = append(nodes[:i], nodes[i+1:]...)
					}
				}
			case 2:
				if len(nodes) > 0 {
					n := nodes[rapid.IntRange(0, len(nodes)-1).Draw(rt, "lvol node")]
					servertest.Submit(s, "lvol.create", fmt.Sprintf(`{"name":"v%d","node":%q,"size_kib":1}`, vols, n))
					vols++
				}
			case 3:
				if vols > 0 {
					servertest.Submit(s, "lvol.delete", fmt.Sprintf(`{"name":"v%d"}`, rapid.IntRange(0, vols-1).Draw(rt, "lvol")))
				}
			case 4:
				if len(nodes) > 0 {
					n := nodes[rapid.IntRange(0, len(nodes)-1).Draw(rt, "outage node")]
					state := rapid.SampledFrom([]string{"offline", "online"}).Draw(rt, "state")
					servertest.Submit(s, "node.set-state", fmt.Sprintf(`{"name":%q,"state":%q}`, n, state))
				}
			}
			if err := checkInvariants(s); err != nil {
				rt.Fatal(err)
			}
		}
	})
}

// checkInvariants reads the views and checks the failure-domain rules on them.
func checkInvariants(s *server.Server) error {
	v, err := s.DB.Read()
	if err != nil {
		return err
	}
	defer v.Close()
	byDomain, err := v.DomainHosts()
	if err != nil {
		return err
	}
	domainOf := map[string]string{}
	lo, hi := 1<<30, 0
	for _, label := range []string{"RACK1", "RACK2", "RACK3"} {
		n := len(byDomain[label])
		lo, hi = min(lo, n), max(hi, n)
		for _, h := range byDomain[label] {
			domainOf[h.Host] = label
		}
	}
	if hi-lo > 1 {
		return fmt.Errorf("hosts per domain differ by %d: %v", hi-lo, byDomain)
	}
	stores, err := v.VolumeStores()
	if err != nil {
		return err
	}
	if len(stores) != len(domainOf) {
		return fmt.Errorf("%d volume stores for %d hosts", len(stores), len(domainOf))
	}
	var placed []domains.VolumeStore
	for _, st := range stores {
		vs := domains.VolumeStore{Primary: domains.Slot{Host: st.Primary, Domain: domainOf[st.Primary]}}
		for _, p := range []struct {
			host string
			dst  **domains.Slot
		}{{st.Secondary, &vs.Secondary}, {st.Tertiary, &vs.Tertiary}} {
			if p.host == "" {
				continue
			}
			if _, ok := domainOf[p.host]; !ok {
				return fmt.Errorf("store of %s has a path on %s, which is not in the cluster", st.Primary, p.host)
			}
			*p.dst = &domains.Slot{Host: p.host, Domain: domainOf[p.host]}
		}
		placed = append(placed, vs)
	}
	if err := domains.CheckFailoverInvariant(placed); err != nil {
		return err
	}
	journals, err := v.JournalSets()
	if err != nil {
		return err
	}
	copies := domains.JournalCopies(true, 1)
	capPerDomain := copies - domains.JournalQuorum(copies)
	for _, js := range journals {
		seen := map[string]bool{}
		per := map[string]int{}
		for _, m := range js.Members {
			if seen[m] {
				return fmt.Errorf("journal of %s has two copies on %s", js.Owner, m)
			}
			if _, ok := domainOf[m]; !ok {
				return fmt.Errorf("journal of %s keeps a copy on %s, which is not in the cluster", js.Owner, m)
			}
			seen[m] = true
			per[domainOf[m]]++
		}
		for d, n := range per {
			if n > capPerDomain && len(domainOf) >= copies {
				return fmt.Errorf("journal of %s holds %d copies in %s (cap %d)", js.Owner, n, d, capPerDomain)
			}
		}
	}
	return nil
}
