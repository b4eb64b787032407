package commands_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/secret"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The read-set checker (issue 29, item 8): a decision must be conditional on every
// subject whose events could change what it read, or a stale view gives a wrong answer
// that nothing catches — an append that breaks an invariant, or a refusal confirmed on
// too narrow a boundary. The checker runs every verb's handler on a traced view, maps
// each view key it read to the subject that guards the key, and requires the decision's
// boundary to cover that subject. The mapping below is the design of docs/commands.md
// ("Consistency boundaries") written down a second time, not derived from the handlers.

// guard is the subject (or aggregate filter) an event that changes key is appended to;
// "" with a reason for keys no boundary needs to cover.
func guard(names events.Names, key string) (subject, unguarded string) {
	rest, ok := strings.CutPrefix(key, "v/")
	if !ok {
		switch {
		case strings.HasPrefix(key, "x/"):
			return "", "the boundary's own sequences"
		case strings.HasPrefix(key, "s/"):
			return "", "observed state agents report, not read by design"
		}
		return "", ""
	}
	family, id, _ := strings.Cut(rest, "/")
	id, _, _ = strings.Cut(id, "/")
	one := func(aggregate string) string {
		if id == "" {
			return names.EventFilter(aggregate)
		}
		return names.Event(aggregate, id)
	}
	switch family {
	case "file": // the id is a path: its subject is named by its digest
		return names.Event("file", events.FileID(strings.TrimPrefix(rest, "file/"))), ""
	case "node", "sp", "sp-names", "minor", "minor-free", "minor-high", "node-rd", "usage":
		// A node's spec, state, pools, minors, replicas and room: every placement on
		// the node claims it.
		return one("node"), ""
	case "online-hosts":
		return names.EventFilter("node"), ""
	case "rd", "rd-replicas", "replacing", "snap-busy", "rd-claim":
		return one("rd"), ""
	case "rg":
		return one("rg"), ""
	case "rg-rd":
		// A group's definitions: a definition joins on its own subject.
		return names.EventFilter("rd"), ""
	case "pool":
		return one("pool"), ""
	case "lvol":
		return one("lvol"), ""
	case "lvol-count":
		return names.EventFilter("lvol"), ""
	case "snapshot":
		return one("snapshot"), ""
	case "token":
		return one("token"), ""
	case "token-hash":
		return names.EventFilter("token"), ""
	case "kv":
		return one("kv"), ""
	case "remote", "remote-sched":
		return one("remote"), ""
	case "schedule":
		return one("schedule"), ""
	case "controller":
		return names.Event("controller", "settings"), ""
	case "host":
		return one("host"), ""
	case "cluster", "domain", "domain-count", "hosts", "store", "journal", "uses":
		// Activation, layout and placement are events on cluster subjects.
		return names.EventFilter("cluster"), ""
	case "node-addr":
		return "", "address uniqueness is advice (node.add accepts a shared address with a warning)"
	case "cmd", "cmd-at", "rejected":
		return "", "admission's own records"
	}
	return "", ""
}

// readKey is the key a read is about: a point read's key, or the prefix a scan ranges
// under (a scan from "v/node/a\x00" to "v/node0" ranges over every node).
func readKey(r projections.Read) string {
	if r.End == "" {
		return r.Key
	}
	under := []byte(r.End)
	under[len(under)-1]--
	if strings.HasPrefix(r.Key, string(under)) {
		return string(under)
	}
	return r.Key // a range no prefix names: guarded as its first key
}

// covers reports whether boundary e is conditional on subject (a subject or a filter).
func covers(e events.Expect, firstSubject, subject string) bool {
	var set []string
	switch e.Kind {
	case events.ExpectStream:
		return true
	case events.ExpectSubject:
		s := e.Subject
		if s == "" {
			s = firstSubject
		}
		set = []string{s}
	case events.ExpectFilter:
		set = []string{e.Filter}
	case events.ExpectChecks:
		for _, c := range e.Checks {
			set = append(set, c.Subject)
		}
	}
	for _, s := range set {
		if s == subject {
			return true
		}
		if wide, ok := strings.CutSuffix(s, ">"); ok && strings.HasPrefix(subject, wide) {
			return true
		}
	}
	return false
}

// uncovered runs h on a traced view of s and returns every read no part of the
// decision's boundary covers, as "key (guarded by subject)".
func uncovered(t *testing.T, s *server.Server, h decide.Handler, body string) (missed []string, d decide.Decision, err error) {
	t.Helper()
	names := events.NewNames("cairn")
	var reads []projections.Read
	v := caughtUp(t, s).Traced(func(r projections.Read) { reads = append(reads, r) })
	d, err = h.Decide(v, names, []byte(body))
	first := ""
	if len(d.Events) > 0 {
		first = d.Events[0].Subject
	}
	seen := map[string]bool{}
	for _, r := range reads {
		key := readKey(r)
		subject, why := guard(names, key)
		if subject == "" && why == "" {
			missed = append(missed, key+" (no guard known: add the key's family to guard)")
			continue
		}
		if subject == "" || covers(d.Expect, first, subject) {
			continue
		}
		if m := fmt.Sprintf("%s (guarded by %s)", key, subject); !seen[m] {
			seen[m] = true
			missed = append(missed, m)
		}
	}
	sort.Strings(missed)
	return missed, d, err
}

// TestEveryVerbIsConditionalOnWhatItRead runs a scenario that uses every verb, accepted
// and refused, and checks each decision's reads against its boundary before the command
// is sent for real.
func TestEveryVerbIsConditionalOnWhatItRead(t *testing.T) {
	s := servertest.Start(t)
	type step struct {
		verb, body string
		accepted   bool // the command is sent afterwards and must be accepted
	}
	var steps []step
	ok := func(verb, body string) { steps = append(steps, step{verb, body, true}) }
	no := func(verb, body string) { steps = append(steps, step{verb, body, false}) }

	sha := `"` + strings.Repeat("ab", 32) + `"`
	no("node.add", `{"name":"n0","host":"h0","address":"10.0.1.0"}`) // no cluster yet
	ok("cluster.create", `{"name":"c1","failure_domains":true,"data_chunks":1,"parity_chunks":1}`)
	for i := 1; i <= 6; i++ {
		ok("node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d","failure_domain":"RACK%d"}`, i, i, i, (i-1)%3+1))
		ok("sp.create", fmt.Sprintf(`{"node":"n%d","name":"thin","provider":"lvm_thin","pool":"vg0/thin","capacity_kib":1073741824}`, i))
	}
	no("node.add", `{"name":"n7","host":"h1","address":"10.0.0.7","failure_domain":"RACK2"}`) // h1 is in RACK1
	ok("sp.capacity-report", `{"node":"n1","name":"thin","total_kib":1073741824,"free_kib":1073741000,"at":"2026-12-02T12:00:00Z"}`)
	ok("node.modify", `{"name":"n6","properties":{"Aux/site":"a"}}`)
	ok("controller.modify", `{"properties":{"DrbdOptions/AutoEvictAfterTime":"60"}}`)
	ok("rg.create", `{"name":"g","place_count":2,"storage_pool":"thin"}`)
	ok("rg.modify", `{"name":"g","properties":{"Aux/x":"y"}}`)
	ok("rg.spawn", `{"resource_group":"g","name":"r1","size_kib":8192}`)
	no("rg.spawn", `{"resource_group":"g","name":"r1","size_kib":8192}`)
	ok("rd.create", `{"name":"r2"}`)
	ok("vd.create", `{"resource":"r2","volume":0,"size_kib":8192}`)
	ok("replica.add", `{"resource":"r2","node":"n1","storage_pool":"thin"}`)
	ok("replica.add", `{"resource":"r2","place_count":2,"storage_pool":"thin"}`)
	ok("replica.add", `{"resource":"r2","place_count":3,"filter":{"not_with":["r1"],"storage_pools":["thin"],"nodes":["n2","n3","n4","n5"]}}`)
	no("replica.add", `{"resource":"r2","node":"n1","storage_pool":"thin"}`)
	ok("vd.create", `{"resource":"r2","volume":1,"size_kib":4096}`)
	ok("vd.resize", `{"resource":"r2","volume":1,"size_kib":8192}`)
	ok("vd.delete", `{"resource":"r2","volume":1}`)
	ok("rd.modify", `{"name":"r2","properties":{"Aux/a":"b"}}`)
	ok("vd.modify", `{"resource":"r2","volume":0,"properties":{"FileSystem/Type":"ext4"}}`)
	no("vd.modify", `{"resource":"r2","volume":1,"properties":{"FileSystem/Type":"ext4"}}`) // deleted above
	ok("replica.modify", `{"resource":"r2","node":"n1","drbd_options":{"al_extents":6007},"properties":{"Aux/x":"y"}}`)
	no("replica.modify", `{"resource":"r2","node":"n9","properties":{"Aux/x":"y"}}`)
	ok("vd.filesystem-made", `{"resource":"r2","volume":0,"node":"n1","type":"ext4"}`)
	no("vd.filesystem-made", `{"resource":"r2","volume":0,"node":"n9","type":"ext4"}`) // no disk there
	ok("rd.snapshot", `{"resource":"r1","name":"s1"}`)
	no("rd.snapshot", `{"resource":"r1","name":"s2"}`)
	no("rd.restore", `{"resource":"r1","snapshot":"s1","target":"r3"}`)
	ok("rd.snapshot-progress", `{"resource":"r1","name":"s1","phase":"take"}`)
	ok("rd.snapshot-progress", `{"resource":"r1","name":"s1","phase":"taken"}`)
	ok("remote.create", `{"name":"s3","kind":"s3","endpoint":"http://127.0.0.1:1","bucket":"bk1","access_key":"a","secret_key":"s"}`)
	no("remote.create", `{"name":"s3","kind":"s3","endpoint":"http://127.0.0.1:1","bucket":"bk1","access_key":"a","secret_key":"s"}`)
	no("backup.create", `{"resource":"r1","remote":"nope","snapshot":"s1"}`)
	no("remote.create", `{"name":"bad","kind":"s3","endpoint":"ftp://127.0.0.1:1/x","bucket":"bk1","access_key":"a","secret_key":"s"}`)
	ok("remote.modify", `{"name":"s3","access_key":"a2","secret_key":"s2"}`)
	no("remote.modify", `{"name":"nope","access_key":"a2"}`)
	ok("schedule.create", `{"name":"nightly","full_cron":"0 2 * * *","inc_cron":"0 * * * *","keep_local":2,"keep_remote":2}`)
	no("schedule.create", `{"name":"nightly","full_cron":"0 2 * * *"}`)
	no("schedule.create", `{"name":"bad","full_cron":"61 * * * *"}`)
	ok("schedule.modify", `{"name":"nightly","keep_local":3,"inc_cron":""}`)
	no("schedule.modify", `{"name":"nope","keep_local":1}`)
	no("schedule.modify", `{"name":"nightly","full_cron":"61 * * * *"}`)
	ok("backup.schedule-enable", `{"remote":"s3","schedule":"nightly","group":"g"}`)
	no("backup.schedule-enable", `{"remote":"s3","schedule":"nightly","group":"g"}`)
	ok("backup.schedule-enable", `{"remote":"s3","schedule":"nightly","resource":"r2"}`)
	no("schedule.delete", `{"name":"nightly"}`) // enabled
	ok("backup.schedule-disable", `{"remote":"s3","schedule":"nightly","group":"g"}`)
	ok("backup.schedule-disable", `{"remote":"s3","schedule":"nightly","resource":"r2"}`)
	no("backup.schedule-disable", `{"remote":"s3","schedule":"nightly","resource":"r2"}`)
	ok("schedule.delete", `{"name":"nightly"}`)
	ok("backup.create", `{"resource":"r1","remote":"s3","snapshot":"s1"}`)
	no("remote.delete", `{"name":"s3"}`)                  // an upload is under way
	no("remote.modify", `{"name":"s3","bucket":"other"}`) // an upload is under way
	ok("remote.create", `{"name":"s3b","kind":"s3","endpoint":"http://127.0.0.1:1","bucket":"bk1","access_key":"a","secret_key":"s"}`)
	no("backup.create", `{"resource":"r1","remote":"s3b","snapshot":"s1"}`) // id s1 is uploading to s3
	no("backup.delete", `{"remote":"s3","resource":"r1","id":"s1"}`)        // it is uploading
	no("rd.snapshot-delete", `{"resource":"r1","name":"s1"}`)               // its backup is uploading
	ok("backup.finish", `{"resource":"r1","id":"s1","ok":true,"manifest_sha256":`+sha+`}`)
	no("backup.finish", `{"resource":"r1","id":"s1","ok":true,"manifest_sha256":`+sha+`}`)
	ok("backup.create", `{"resource":"r1","remote":"s3","snapshot":"s1","id":"s1b"}`)
	no("backup.delete", `{"remote":"s3","resource":"r1","id":"s1"}`) // the base of s1b
	ok("backup.abort", `{"resource":"r1","id":"s1b"}`)
	ok("backup.delete", `{"remote":"s3","resource":"r1","id":"s1"}`)
	no("backup.ship", `{"resource":"r1","remote":"s3","snapshot":"s1","id":"sh1","target":"rx"}`) // s3 is no cluster
	ok("remote.create", `{"name":"c2","kind":"cairn","endpoint":"http://127.0.0.1:1"}`)
	no("backup.ship-finish", `{"resource":"r1","id":"sh1","ok":true}`) // not shipped
	ok("backup.ship", `{"resource":"r1","remote":"c2","snapshot":"s1","id":"sh1","target":"rx","target_nodes":["n1"]}`)
	no("backup.ship-finish", `{"resource":"r1","id":"sh1","ok":true}`) // still uploading
	ok("backup.finish", `{"resource":"r1","id":"sh1","ok":true,"manifest_sha256":`+sha+`}`)
	ok("backup.ship-finish", `{"resource":"r1","id":"sh1","ok":false,"error":"target rx already exists"}`)
	no("backup.ship-finish", `{"resource":"r1","id":"sh1","ok":true}`) // answered
	ok("remote.delete", `{"name":"c2"}`)
	no("backup.restore", `{"remote":"s3","resource":"r1","id":"s1","target":"r1","nodes":["n2"],"volumes":[{"number":0,"size_kib":8192}],"manifest_sha256":`+sha+`}`)
	ok("backup.restore", `{"remote":"s3","resource":"r1","id":"s1","target":"rb","nodes":["n2","n4"],"storage_pool":"thin","volumes":[{"number":0,"size_kib":8192}],"manifest_sha256":`+sha+`}`)
	ok("rd.restore", `{"resource":"r1","snapshot":"s1","target":"r3"}`)
	no("rd.restore", `{"resource":"r1","snapshot":"s1","target":"r3"}`)
	ok("rd.create", `{"name":"r4"}`)
	ok("rd.restore-volumes", `{"resource":"r1","snapshot":"s1","target":"r4"}`)
	no("rd.restore-volumes", `{"resource":"r1","snapshot":"s1","target":"r4"}`) // it has them now
	ok("rd.restore", `{"resource":"r1","snapshot":"s1","target":"r4"}`)
	no("rd.restore", `{"resource":"r1","snapshot":"s1","target":"r4"}`) // it has replicas now
	ok("rd.clone", `{"resource":"r2","target":"c2"}`)
	no("rd.create", `{"name":"c2"}`)
	ok("resource.deactivate", `{"resource":"r1"}`)
	ok("rd.rollback", `{"resource":"r1","snapshot":"s1"}`)
	ok("resource.activate", `{"resource":"r1"}`)
	ok("rd.snapshot-delete", `{"resource":"r1","name":"s1"}`)
	ok("rd.snapshot-multi", `{"snapshots":[{"resource":"r1","name":"g1"},{"resource":"r3","name":"g1"}]}`)
	no("rd.snapshot-multi", `{"snapshots":[{"resource":"r3","name":"g2"},{"resource":"r1","name":"g2"}]}`) // g1 is under way
	ok("rd.snapshot-delete", `{"resource":"r1","name":"g1"}`)
	ok("rd.snapshot-delete", `{"resource":"r3","name":"g1"}`)
	ok("replica.toggle-disk", `{"resource":"r2","node":"n1","diskless":true}`)
	ok("replica.toggle-disk", `{"resource":"r2","node":"n1","diskless":false,"storage_pool":"thin"}`)
	ok("replica.migrate", `{"resource":"r2","node":"n6","from":"n1"}`)
	ok("node.evacuate", `{"name":"n3"}`)
	ok("node.restore", `{"name":"n3"}`)
	ok("node.set-state", `{"name":"n5","state":"offline"}`)
	ok("node.evict", `{"name":"n5","reason":"test"}`)
	ok("replica.replace", `{"resource":"r3","node":"n3"}`)
	ok("replica.remove", `{"resource":"r3","node":"n3"}`)
	no("node.remove", `{"name":"n6"}`) // it holds replicas
	ok("node.lost", `{"name":"n6"}`)
	ok("rd.delete", `{"name":"r3"}`)
	no("rg.delete", `{"name":"g"}`) // r1 is in it
	ok("sp.create", `{"node":"n2","name":"thick","provider":"lvm","pool":"vg0","capacity_kib":1073741824}`)
	ok("sp.modify", `{"node":"n2","name":"thick","capacity_kib":2147483648}`)
	ok("sp.delete", `{"node":"n2","name":"thick"}`)
	no("sp.delete", `{"node":"n1","name":"thin"}`) // r1's disk is on it
	ok("node.add", `{"name":"n7","host":"h7","address":"10.0.0.7","failure_domain":"RACK1"}`)
	ok("node.remove", `{"name":"n7"}`)
	ok("node.add", `{"name":"n8","host":"h8","address":"10.0.0.8","failure_domain":"RACK3"}`)
	ok("cluster.activate", `{}`)
	ok("lvol.create", `{"name":"v1","node":"n1","size_kib":1048576}`)
	ok("snapshot.create", `{"name":"vs1","lvol":"v1"}`)
	no("lvol.delete", `{"name":"v1"}`) // it has a snapshot
	ok("snapshot.delete", `{"name":"vs1"}`)
	ok("lvol.delete", `{"name":"v1"}`)
	ok("pool.create", `{"name":"tank","devices":["/dev/sdb"],"nodes":["n1","n2"]}`)
	ok("pool.import", `{"pool":"tank","node":"n1"}`)
	no("pool.import", `{"pool":"tank","node":"n2"}`) // n1 holds it and is online
	ok("pool.contest", `{"pool":"tank","node":"n1","reason":"hostid 0x2 wrote"}`)
	ok("pool.export", `{"pool":"tank"}`)
	ok("token.create", `{"name":"ops","role":"admin","hash":"`+strings.Repeat("ab", 32)+`"}`)
	ok("token.revoke", `{"name":"ops"}`)
	ok("kv.modify", `{"instance":"csi","set":{"a":"b"}}`)
	ok("kv.delete", `{"instance":"csi"}`)
	no("rd.file-deploy", `{"resource":"r1","path":"/etc/drbd-reactor.d/r1.toml"}`) // not registered
	ok("file.set", `{"path":"/etc/drbd-reactor.d/r1.toml","content":"W3Byb21vdGVyXQo="}`)
	no("file.set", `{"path":"/etc/drbd-reactor.d/../r1.toml","content":""}`)
	ok("rd.file-deploy", `{"resource":"r1","path":"/etc/drbd-reactor.d/r1.toml"}`)
	no("rd.file-deploy", `{"resource":"nope","path":"/etc/drbd-reactor.d/r1.toml"}`)
	ok("rd.file-undeploy", `{"resource":"r1","path":"/etc/drbd-reactor.d/r1.toml"}`)
	ok("rd.file-deploy", `{"resource":"r1","path":"/etc/drbd-reactor.d/r1.toml"}`)
	ok("file.delete", `{"path":"/etc/drbd-reactor.d/r1.toml"}`)
	no("file.delete", `{"path":"/etc/drbd-reactor.d/r1.toml"}`)
	ok("remote.delete", `{"name":"s3"}`)

	handlers := map[string]decide.Handler{}
	key, err := secret.New(make([]byte, secret.KeySize))
	require.NoError(t, err)
	for _, h := range commands.Handlers(commands.Options{Seal: key.Seal}, nil) {
		handlers[h.Verb] = h
	}
	checked := map[string]bool{}
	for i, st := range steps {
		h, found := handlers[st.verb]
		require.True(t, found, "no handler for %s", st.verb)
		missed, d, err := uncovered(t, s, h, st.body)
		assert.Empty(t, missed, "step %d: %s %s read outside its boundary (%+v)", i, st.verb, st.body, d.Expect)
		if st.accepted {
			require.NoError(t, err, "step %d: %s %s", i, st.verb, st.body)
			must(t, s, st.verb, st.body)
		} else {
			require.Error(t, err, "step %d: %s %s was not refused", i, st.verb, st.body)
			assert.NotZero(t, d.Expect.Kind, "step %d: %s refused without a boundary to confirm it on", i, st.verb)
		}
		checked[st.verb] = true
	}
	for verb := range handlers {
		assert.True(t, checked[verb], "%s is not in the scenario: every verb is checked", verb)
	}
}
