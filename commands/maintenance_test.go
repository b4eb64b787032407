package commands_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/events"
)

func nodeMaintenance(t *testing.T, s *server.Server, node string) string {
	t.Helper()
	v, err := s.DB.Read()
	require.NoError(t, err)
	defer v.Close()
	n, ok, err := v.Node(node)
	require.NoError(t, err)
	require.True(t, ok)
	return n.Spec.Maintenance
}

// node.evacuate, node.restore and node.evict set the node's maintenance mode (one
// event, audited); a node in maintenance, or with AutoplaceTarget=false, is passed over
// by autoplace with the reason, and gets no tiebreaker; an explicit replica.add still
// may place there (the operator's choice). node.evict refuses an online node.
func TestMaintenanceModesCordonANode(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 4, 1<<20)
	r := must(t, s, "node.evacuate", `{"name":"n1"}`)
	assert.Equal(t, []string{"node.maintenance-changed"}, eventTypes(r))
	assert.Equal(t, events.MaintenanceEvacuating, nodeMaintenance(t, s, "n1"))
	r = must(t, s, "node.evacuate", `{"name":"n1"}`)
	assert.Empty(t, r.Events, "evacuating already: a no-op")
	assert.Contains(t, r.Warnings[0], "evacuating already")
	must(t, s, "node.modify", `{"name":"n2","properties":{"AutoplaceTarget":"false"}}`)
	must(t, s, "rg.create", `{"name":"rg3","place_count":3,"storage_pool":"thin"}`)
	refused(t, s, "rg.spawn", `{"resource_group":"rg3","name":"r1","size_kib":4096}`, cairn.CodePreconditionFailed,
		"n1: cordoned: evacuating")
	refused(t, s, "rg.spawn", `{"resource_group":"rg3","name":"r1","size_kib":4096}`, cairn.CodePreconditionFailed,
		"n2: cordoned: AutoplaceTarget=false")
	must(t, s, "rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	must(t, s, "rg.spawn", `{"resource_group":"rg2","name":"r2","size_kib":4096}`)
	assert.Equal(t, "n3:disk n4:disk", layout(definition(t, s, "r2")), "no tiebreaker on a cordoned node: none is left")
	must(t, s, "replica.add", `{"resource":"r2","node":"n1"}`) // explicit: allowed
	refused(t, s, "node.evict", `{"name":"n3"}`, cairn.CodePreconditionFailed, "n3 is online")
	must(t, s, "node.restore", `{"name":"n1"}`)
	assert.Equal(t, "", nodeMaintenance(t, s, "n1"))
	refused(t, s, "node.restore", `{"name":"n9"}`, cairn.CodeNotFound, "n9")
	must(t, s, "node.set-state", `{"name":"n3","state":"offline"}`)
	must(t, s, "node.evict", `{"name":"n3","reason":"gone"}`)
	assert.Equal(t, events.MaintenanceEvicted, nodeMaintenance(t, s, "n3"))
}

// replica.replace places one replacement for a diskful replica, by the group's rules
// as if the leaving replica were gone, marked as replacing it (repeated: a no-op);
// replica.remove of the leaving one then clears the mark. A tiebreaker moves at once.
func TestReplicaReplace(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 4, 1<<20)
	must(t, s, "rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	must(t, s, "rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	before := layout(definition(t, s, "r1"))
	rd := definition(t, s, "r1")
	var leaving, tb string
	for _, r := range rd.Replicas {
		switch {
		case r.Tiebreaker:
			tb = r.Node
		case leaving == "":
			leaving = r.Node
		}
	}
	require.NotEmpty(t, tb, before)
	must(t, s, "node.evacuate", `{"name":"`+leaving+`"}`)
	var others []string
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		if _, ok := rd.Replica(n); !ok {
			others = append(others, `"`+n+`"`)
		}
	}
	refused(t, s, "replica.replace", `{"resource":"r1","node":"`+leaving+`","avoid":[`+strings.Join(others, ",")+`]}`,
		cairn.CodePreconditionFailed, "at its limit of replacements syncing at once")
	r := must(t, s, "replica.replace", `{"resource":"r1","node":"`+leaving+`"}`)
	assert.Contains(t, eventTypes(r), "replica.added")
	var replacement string
	for _, x := range definition(t, s, "r1").Replicas {
		if x.Replaces == leaving {
			replacement = x.Node
		}
	}
	require.NotEmpty(t, replacement, "a replica replaces %s: %s", leaving, layout(definition(t, s, "r1")))
	assert.NotEqual(t, leaving, replacement)
	r = must(t, s, "replica.replace", `{"resource":"r1","node":"`+leaving+`"}`)
	assert.Empty(t, r.Events)
	must(t, s, "replica.remove", `{"resource":"r1","node":"`+leaving+`"}`)
	for _, x := range definition(t, s, "r1").Replicas {
		assert.Empty(t, x.Replaces, "the replacement is done once the old one is gone")
		assert.NotEqual(t, leaving, x.Node)
	}
	refused(t, s, "replica.replace", `{"resource":"r1","node":"`+leaving+`"}`, cairn.CodeNotFound, "no replica on node")
}

// replica.migrate places a disk on the target that replaces the one on from: a new
// replica, or the target's diskless replica given the disk; repeated, a no-op; the
// refusals name what is wrong and append nothing.
func TestReplicaMigrate(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 4, 1<<20)
	must(t, s, "rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	must(t, s, "rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	rd := definition(t, s, "r1")
	var disks []string
	var tb, free string
	for _, r := range rd.Replicas {
		if r.Tiebreaker {
			tb = r.Node
		} else {
			disks = append(disks, r.Node)
		}
	}
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		if _, ok := rd.Replica(n); !ok {
			free = n
		}
	}
	require.NotEmpty(t, tb)
	require.NotEmpty(t, free)
	refused(t, s, "replica.migrate", `{"resource":"r1","node":"`+free+`","from":"`+tb+`"}`, cairn.CodePreconditionFailed, "no disk to migrate")
	refused(t, s, "replica.migrate", `{"resource":"r1","node":"`+disks[1]+`","from":"`+disks[0]+`"}`, cairn.CodeAlreadyExists, "already has a disk")
	refused(t, s, "replica.migrate", `{"resource":"r1","node":"n9","from":"`+disks[0]+`"}`, cairn.CodeNotFound, "n9")
	r := must(t, s, "replica.migrate", `{"resource":"r1","node":"`+tb+`","from":"`+disks[0]+`"}`)
	assert.Contains(t, eventTypes(r), "replica.disk-toggled", "the tiebreaker gets the disk")
	after := definition(t, s, "r1")
	got, _ := after.Replica(tb)
	assert.Equal(t, disks[0], got.Replaces)
	assert.False(t, got.Diskless)
	r = must(t, s, "replica.migrate", `{"resource":"r1","node":"`+free+`","from":"`+disks[0]+`"}`)
	assert.Empty(t, r.Events, "a migration of that disk is under way")
	must(t, s, "replica.migrate", `{"resource":"r1","node":"`+free+`","from":"`+disks[1]+`"}`)
	after = definition(t, s, "r1")
	got, _ = after.Replica(free)
	assert.Equal(t, disks[1], got.Replaces)
	// The migrated-from disk given up: its replacement is an ordinary disk again.
	must(t, s, "replica.toggle-disk", `{"resource":"r1","node":"`+disks[1]+`","diskless":true}`)
	after = definition(t, s, "r1")
	got, _ = after.Replica(free)
	assert.Empty(t, got.Replaces)
}

// node.lost (LINSTOR's node lost) removes a node with every replica it held in one
// append, or nothing: when the node's removal is refused (here the failure-domain rule:
// a domain would be left without hosts), no replica is removed either. On the old code
// LINSTOR's node lost removed the replicas one command each and then failed on the node.
func TestNodeLostIsAllOrNothing(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 6, 1<<20) // RACK1: n1 n4, RACK2: n2 n5, RACK3: n3 n6
	must(t, s, "cluster.activate", `{}`)
	must(t, s, "rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	must(t, s, "rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	for _, n := range []string{"n1", "n4"} {
		if _, ok := func() (any, bool) { rd := definition(t, s, "r1"); return rd.Replica(n) }(); !ok {
			must(t, s, "replica.add", `{"resource":"r1","node":"`+n+`"}`)
		}
	}
	r := must(t, s, "node.lost", `{"name":"n1"}`)
	types := eventTypes(r)
	assert.Greater(t, slices.Index(types, "node.removed"), slices.Index(types, "replica.removed"), "the node goes after its replicas: %v", types)
	assert.Contains(t, types, "replica.removed")
	_, ok := func() (any, bool) { rd := definition(t, s, "r1"); return rd.Replica("n1") }()
	assert.False(t, ok)

	before := layout(definition(t, s, "r1"))
	refused(t, s, "node.lost", `{"name":"n4"}`, cairn.CodeDomainUnbalanced, "")
	assert.Equal(t, before, layout(definition(t, s, "r1")), "a refused node.lost removes no replica")
}

// On a failure-domain cluster a replacement keeps the group's rules: with replicas on
// different failure domains, the replica leaving RACK1 is replaced in RACK1 (the only
// domain without one once it is gone), never next to a replica that stays.
func TestReplaceKeepsFailureDomains(t *testing.T) {
	s := servertest.Start(t)
	drbdCluster(t, s, 6, 1<<20) // RACK1: n1 n4, RACK2: n2 n5, RACK3: n3 n6
	must(t, s, "cluster.activate", `{}`)
	must(t, s, "rg.create", `{"name":"rg3","place_count":3,"storage_pool":"thin","replicas_on_different":["failure_domain"]}`)
	must(t, s, "rg.spawn", `{"resource_group":"rg3","name":"r1","size_kib":4096}`)
	rd := definition(t, s, "r1")
	domain := map[string]string{"n1": "RACK1", "n4": "RACK1", "n2": "RACK2", "n5": "RACK2", "n3": "RACK3", "n6": "RACK3"}
	var leaving string
	for _, r := range rd.Replicas {
		if domain[r.Node] == "RACK1" {
			leaving = r.Node
		}
	}
	require.NotEmpty(t, leaving, layout(rd))
	must(t, s, "node.evacuate", `{"name":"`+leaving+`"}`)
	must(t, s, "replica.replace", `{"resource":"r1","node":"`+leaving+`"}`)
	rd = definition(t, s, "r1")
	for _, r := range rd.Replicas {
		if r.Replaces == leaving {
			assert.Equal(t, "RACK1", domain[r.Node], "the replacement of %s's replica: %s", leaving, layout(rd))
		}
	}
}
