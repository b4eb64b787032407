package commands_test

import (
	"fmt"
	"testing"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/test/testtools"
	"pgregory.net/rapid"
)

// Random sequences of the replica verbs (explicit and autoplaced adds, diskless adds,
// removals, disk toggles, outages) on definitions of two volumes against real
// admission: whatever is accepted, the views never hand out a node id twice in a
// definition, a minor twice on a node or a port twice; a tiebreaker exists only while
// two disks and no other diskless replica need one; every storage pool's allocation is
// the sum of its disks; every disk has a seeding plan or a full sync, and the first disk
// of a definition is seeded.
func TestReplicaVerbsKeepTheInvariantsUnderRandomCommands(t *testing.T) {
	testtools.RapidChecks(t, 1000)
	rapid.Check(t, func(rt *rapid.T) { replicaSteps(rt, newMemoryTarget(t)) })
}

// TestMemoryAdmissionConformsOnReplicaVerbs: the same sequences on a serve and on
// Memory in lockstep agree reply by reply; the serve's views keep the invariants. The
// serve's keep-count policy is off: it tops definitions up to their group's place count
// on its own when a node comes back online (node.set-state), which Memory, admission
// alone, does not (seen as a flake: a replica.remove accepted by the serve, not_found
// in Memory).
func TestMemoryAdmissionConformsOnReplicaVerbs(t *testing.T) {
	testtools.RapidChecks(t, 10) // each check starts a real server
	rapid.Check(t, func(rt *rapid.T) {
		s := servertest.Start(t, func(c *server.Config) { c.KeepCountInterval = -1 })
		replicaSteps(rt, conformance{rt: rt, serve: serveTarget{s}, mem: newMemoryTarget(t)})
	})
}

// replicaSteps is one random sequence of the replica verbs on tg, checking the
// invariants after every step.
func replicaSteps(rt *rapid.T, tg target) {
	const nodes, defs = 5, 4
	tg.Submit("cluster.create", `{"name":"c1","failure_domains":true,"data_chunks":1,"parity_chunks":1}`)
	for i := 1; i <= nodes; i++ {
		tg.Submit("node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d","failure_domain":"R%d"}`, i, i, i, i%3))
		tg.Submit("sp.create", fmt.Sprintf(`{"node":"n%d","name":"p","provider":"%s","pool":"vg0/p","capacity_kib":%d}`,
			i, []string{"lvm_thin", "lvm"}[i%2], rapid.IntRange(8192, 65536).Draw(rt, "capacity")))
	}
	tg.Submit("rg.create", `{"name":"rg","place_count":2}`)
	for d := range defs {
		tg.Submit("rd.create", fmt.Sprintf(`{"name":"r%d","resource_group":"rg"}`, d))
		tg.Submit("vd.create", fmt.Sprintf(`{"resource":"r%d","volume":0,"size_kib":4096}`, d))
		tg.Submit("vd.create", fmt.Sprintf(`{"resource":"r%d","volume":1,"size_kib":4096}`, d))
	}
	for range rapid.IntRange(5, 40).Draw(rt, "steps") {
		rd := fmt.Sprintf("r%d", rapid.IntRange(0, defs-1).Draw(rt, "rd"))
		node := fmt.Sprintf("n%d", rapid.IntRange(1, nodes).Draw(rt, "node"))
		switch rapid.IntRange(0, 6).Draw(rt, "op") {
		case 0:
			tg.Submit("replica.add", fmt.Sprintf(`{"resource":%q,"node":%q}`, rd, node))
		case 1:
			tg.Submit("replica.add", fmt.Sprintf(`{"resource":%q,"node":%q,"diskless":true}`, rd, node))
		case 2:
			tg.Submit("replica.add", fmt.Sprintf(`{"resource":%q,"place_count":%d}`, rd, rapid.IntRange(1, 4).Draw(rt, "count")))
		case 3, 4:
			tg.Submit("replica.remove", fmt.Sprintf(`{"resource":%q,"node":%q}`, rd, node))
		case 5:
			tg.Submit("replica.toggle-disk", fmt.Sprintf(`{"resource":%q,"node":%q,"diskless":%t}`, rd, node, rapid.Bool().Draw(rt, "diskless")))
		case 6:
			tg.Submit("node.set-state", fmt.Sprintf(`{"name":%q,"state":%q}`, node, []string{"online", "offline"}[rapid.IntRange(0, 1).Draw(rt, "state")]))
		}
		checkReplicaInvariants(rt, tg)
	}
}

func checkReplicaInvariants(rt *rapid.T, tg target) {
	v, err := tg.Read()
	if err != nil {
		rt.Fatal(err)
	}
	defer v.Close()
	rds, err := v.ResourceDefinitions()
	if err != nil {
		rt.Fatal(err)
	}
	ports := map[int]string{}
	minors := map[string]string{}
	allocated := map[string]uint64{}
	for _, rd := range rds {
		if other, dup := ports[rd.Port]; dup {
			rt.Fatalf("port %d held by %s and %s", rd.Port, other, rd.Name)
		}
		ports[rd.Port] = rd.Name
		ids := map[int]bool{}
		var members []string
		tiebreakers, diskful := 0, 0
		for _, r := range rd.Replicas {
			if ids[r.NodeID] {
				rt.Fatalf("%s: node id %d twice", rd.Name, r.NodeID)
			}
			ids[r.NodeID] = true
			for _, m := range r.Minors {
				key := fmt.Sprintf("%s/%d", r.Node, m.Minor)
				if other, dup := minors[key]; dup {
					rt.Fatalf("minor %s held by %s and %s", key, other, rd.Name)
				}
				minors[key] = rd.Name
			}
			if len(r.Minors) != len(rd.Volumes) {
				rt.Fatalf("%s on %s: %d minors for %d volumes", rd.Name, r.Node, len(r.Minors), len(rd.Volumes))
			}
			members = append(members, fmt.Sprintf("%s(diskless=%t,tiebreaker=%t)", r.Node, r.Diskless, r.Tiebreaker))
			if r.Tiebreaker {
				tiebreakers++
				if !r.Diskless {
					rt.Fatalf("%s: tiebreaker on %s has a disk", rd.Name, r.Node)
				}
			}
			if !r.Diskless {
				diskful++
				allocated[r.Node+"/"+r.StoragePool] += rd.SizeKiB()
				if len(r.Seeds) == 0 && !r.FullSync {
					rt.Fatalf("%s on %s: a disk with neither seeds nor a full sync", rd.Name, r.Node)
				}
			}
		}
		if tiebreakers > 1 {
			rt.Fatalf("%s: %d tiebreakers", rd.Name, tiebreakers)
		}
		// Written from the rule, not with replicas.NeedsTiebreaker: a tiebreaker stays
		// only beside exactly two disks and no other diskless replica.
		if tiebreakers == 1 && (diskful != 2 || len(rd.Replicas) != 3) {
			rt.Fatalf("%s keeps a tiebreaker it does not need: %+v", rd.Name, members)
		}
		if diskful == 0 && len(rd.Replicas) > 0 {
			rt.Fatalf("%s: diskless replicas without a disk anywhere: %+v", rd.Name, members)
		}
	}
	pools, err := v.StoragePools()
	if err != nil {
		rt.Fatal(err)
	}
	for _, p := range pools {
		if want := allocated[p.Node+"/"+p.Name]; p.AllocatedKiB != want {
			rt.Fatalf("pool %s/%s: allocated %d KiB, disks hold %d", p.Node, p.Name, p.AllocatedKiB, want)
		}
		// What a pool may promise: its capacity, times the over-provisioning ratio on a
		// thin pool (20 by default).
		if promise := uint64(float64(p.CapacityKiB) * p.OverprovisionRatio()); p.AllocatedKiB > promise {
			rt.Fatalf("pool %s/%s over-allocated: %d of %d KiB (capacity %d)", p.Node, p.Name, p.AllocatedKiB, promise, p.CapacityKiB)
		}
	}
}
