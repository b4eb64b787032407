package commands_test

import (
	"fmt"
	"testing"

	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/test/testtools"
	"pgregory.net/rapid"
)

// Random sequences of node.add, node.remove, lvol.create, lvol.delete and outages
// (node.set-state offline) and returns (online) against real admission on a 2+1
// failure-domain cluster: whatever admission accepts, the views never hold a state that
// breaks the balance, the failover-path invariant or the journal rules.
func TestAdmissionKeepsTheInvariantsUnderRandomCommands(t *testing.T) {
	testtools.RapidChecks(t, 1000)
	rapid.Check(t, func(rt *rapid.T) { admissionSteps(rt, newMemoryTarget(t)) })
}

// TestMemoryAdmissionConformsOnDomainCommands runs the same random sequences on a serve
// and on Memory in lockstep: every reply must agree (conformance), and the serve's views
// keep the invariants. Fewer cases: each starts a real server.
func TestMemoryAdmissionConformsOnDomainCommands(t *testing.T) {
	testtools.RapidChecks(t, 15) // each check starts a real server
	rapid.Check(t, func(rt *rapid.T) {
		admissionSteps(rt, conformance{rt: rt, serve: serveTarget{servertest.Start(t)}, mem: newMemoryTarget(t)})
	})
}

// admissionSteps is one random sequence of node.add, node.remove, lvol.create,
// lvol.delete and outages on tg, checking the invariants after every step.
func admissionSteps(rt *rapid.T, tg target) {
	tg.Submit("cluster.create", cluster)
	next := 0
	var nodes []string
	add := func(domain int) {
		name := fmt.Sprintf("n%d", next)
		if tg.Submit("node.add", fmt.Sprintf(`{"name":%q,"host":"h%d","address":"10.0.0.1","failure_domain":"RACK%d"}`, name, next, domain)).OK {
			nodes = append(nodes, name)
		}
		next++
	}
	for i := range 6 {
		add(i%3 + 1)
	}
	if !tg.Submit("cluster.activate", `{}`).OK {
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
				if tg.Submit("node.remove", fmt.Sprintf(`{"name":%q}`, nodes[i])).OK {
					nodes = append(nodes[:i], nodes[i+1:]...)
				}
			}
		case 2:
			if len(nodes) > 0 {
				n := nodes[rapid.IntRange(0, len(nodes)-1).Draw(rt, "lvol node")]
				tg.Submit("lvol.create", fmt.Sprintf(`{"name":"v%d","node":%q,"size_kib":1}`, vols, n))
				vols++
			}
		case 3:
			if vols > 0 {
				tg.Submit("lvol.delete", fmt.Sprintf(`{"name":"v%d"}`, rapid.IntRange(0, vols-1).Draw(rt, "lvol")))
			}
		case 4:
			if len(nodes) > 0 {
				n := nodes[rapid.IntRange(0, len(nodes)-1).Draw(rt, "outage node")]
				state := rapid.SampledFrom([]string{"offline", "online"}).Draw(rt, "state")
				tg.Submit("node.set-state", fmt.Sprintf(`{"name":%q,"state":%q}`, n, state))
			}
		}
		if err := checkInvariants(tg); err != nil {
			rt.Fatal(err)
		}
	}
}

// checkInvariants reads the views and checks the failure-domain rules on them.
func checkInvariants(tg target) error {
	v, err := tg.Read()
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
	// The oracle is written here from the rules (docs/domains), not with the package's
	// own checks: a store's paths are on distinct hosts, and one of them is in another
	// domain than its primary.
	for _, st := range stores {
		hosts := map[string]bool{st.Primary: true}
		crossDomain, paths := false, 0
		for _, h := range []string{st.Secondary, st.Tertiary} {
			if h == "" {
				continue
			}
			if _, ok := domainOf[h]; !ok {
				return fmt.Errorf("store of %s has a path on %s, which is not in the cluster", st.Primary, h)
			}
			if hosts[h] {
				return fmt.Errorf("store of %s has two paths on host %s", st.Primary, h)
			}
			hosts[h] = true
			paths++
			crossDomain = crossDomain || domainOf[h] != domainOf[st.Primary]
		}
		if paths > 0 && !crossDomain {
			return fmt.Errorf("store of %s (domain %s) has no failover path in another domain", st.Primary, domainOf[st.Primary])
		}
	}
	// A journal keeps four copies on distinct hosts of the cluster (with failure domains),
	// and losing any one domain leaves a quorum of them (half, rounded up) when the
	// cluster has the hosts for it.
	journals, err := v.JournalSets()
	if err != nil {
		return err
	}
	const copies = 4
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
		if len(domainOf) < copies {
			continue
		}
		for d, n := range per {
			if left := len(js.Members) - n; 2*left < len(js.Members) {
				return fmt.Errorf("journal of %s: losing %s (%d of its %d copies) leaves %d, below a quorum", js.Owner, d, n, len(js.Members), left)
			}
		}
	}
	return nil
}
