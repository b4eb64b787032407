package policy_test

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/cairn-io/cairn/commands/policy"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// TestEvacuationPlans runs testdata/evacuation: nodes in maintenance, definitions with
// their replicas and what each node reports, and the evacuation's plan. Regenerate
// with -rewrite.
//
//	nodes                 one "name online|offline [evacuating|evicted]" a line
//	rd name [volumes=N]   one replica a line: "node disk|diskless|tb [replaces=X]
//	                      [uptodate|syncing|failed|pending|old|unreported] [primary]"
//	plan [max=N] [per=P]  PlanEvacuation with at most N replacements syncing, P per node
//	reset                 no definitions
//
// and testdata/keepcount, with the same commands and
//
//	groups                one "name place_count" a line
//	rd name group=G …     a definition of group G
//	keep [budget=N]       PlanReplicaCount (budget -1: no limit)
//
// and testdata/autodiskful, with
//
//	diskful at=MIN after=MIN [cleanup] [toggled]   PlanAutoDiskful MIN minutes after
//	                      the file's start; what it saw Primary is kept between commands
func TestEvacuationPlans(t *testing.T) {
	for _, path := range []string{"testdata/evacuation", "testdata/keepcount", "testdata/autodiskful"} {
		runPlans(t, path)
	}
}

func runPlans(t *testing.T, path string) {
	leaving := map[string]projections.Node{}
	all := map[string]projections.Node{}
	var defs []policy.Definition
	placeCount := map[string]int{}
	since := map[string]time.Time{}
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "diskful":
			var at, after int
			d.ScanArgs(t, "at", &at)
			d.ScanArgs(t, "after", &after)
			var dds []policy.DiskfulDefinition
			for _, def := range defs {
				dds = append(dds, policy.DiskfulDefinition{RD: def.RD, Statuses: def.Statuses, After: time.Duration(after) * time.Minute,
					Cleanup: d.HasArg("cleanup"), Toggled: d.HasArg("toggled"), PlaceCount: placeCount[def.RD.ResourceGroup]})
			}
			var steps []policy.DiskfulStep
			steps, since = policy.PlanAutoDiskful(dds, since, start.Add(time.Duration(at)*time.Minute))
			var b strings.Builder
			for _, st := range steps {
				fmt.Fprintf(&b, "%s %s %s", st.Resource, st.Node, st.Action)
				if req, ok := policy.DiskfulRequest(st); ok {
					fmt.Fprintf(&b, " (%s %s %s)", req.Verb, req.CommandID, req.Body)
				}
				fmt.Fprintf(&b, ": %s\n", st.Reason)
			}
			if b.Len() == 0 {
				return "nothing\n"
			}
			return b.String()
		case "groups":
			placeCount = map[string]int{}
			for _, line := range lines(d.Input) {
				f := strings.Fields(line)
				n, err := strconv.Atoi(f[1])
				if err != nil {
					t.Fatal(err)
				}
				placeCount[f[0]] = n
			}
			return fmt.Sprintf("%d group(s)\n", len(placeCount))
		case "keep":
			budget := -1
			if d.HasArg("budget") {
				d.ScanArgs(t, "budget", &budget)
			}
			var rds []projections.ResourceDefinition
			for _, def := range defs {
				rds = append(rds, def.RD)
			}
			var b strings.Builder
			for _, s := range policy.PlanReplicaCount(rds, placeCount, leaving, budget) {
				fmt.Fprintf(&b, "%s %s", s.Resource, s.Action)
				if req, ok := policy.ShortRequest(s); ok {
					fmt.Fprintf(&b, " (%s %s %s)", req.Verb, req.CommandID, req.Body)
				}
				fmt.Fprintf(&b, ": %s\n", s.Reason)
			}
			if b.Len() == 0 {
				return "none short\n"
			}
			return b.String()
		case "nodes":
			leaving, all = map[string]projections.Node{}, map[string]projections.Node{}
			for _, line := range lines(d.Input) {
				f := strings.Fields(line)
				n := projections.Node{Spec: projections.NodeSpec{Name: f[0]}, Status: projections.NodeStatus{State: f[1]}}
				all[f[0]] = n
				if len(f) > 2 {
					n.Spec.Maintenance = f[2]
					leaving[f[0]] = n
					all[f[0]] = n
				}
			}
			return fmt.Sprintf("%d node(s) leaving\n", len(leaving))
		case "reset":
			defs = nil
			return "ok\n"
		case "rd":
			vols := 1
			if d.HasArg("volumes") {
				d.ScanArgs(t, "volumes", &vols)
			}
			rd := projections.ResourceDefinition{Name: d.CmdArgs[0].Key, Seq: uint64(100 + len(defs))}
			if d.HasArg("group") {
				d.ScanArgs(t, "group", &rd.ResourceGroup)
			}
			for v := 0; v < vols; v++ {
				rd.Volumes = append(rd.Volumes, projections.VolumeDefinition{Volume: v, SizeKiB: 4096})
			}
			statuses := map[string]drbd.Status{}
			for i, line := range lines(d.Input) {
				f := strings.Fields(line)
				r := projections.Replica{Node: f[0], NodeID: i, Incarnation: uint64(10 + i)}
				switch f[1] {
				case "diskless":
					r.Diskless = true
				case "tb":
					r.Diskless, r.Tiebreaker = true, true
				}
				st := drbd.Status{Resource: rd.Name, Node: f[0], Incarnation: r.Incarnation, Phase: drbd.PhaseApplied, Role: "Secondary"}
				disk := "Diskless"
				report := true
				for _, w := range f[2:] {
					switch {
					case strings.HasPrefix(w, "replaces="):
						r.Replaces = strings.TrimPrefix(w, "replaces=")
					case w == "uptodate":
						disk = "UpToDate"
					case w == "syncing":
						disk = "Inconsistent"
					case w == "failed": // DRBD detached the disk after an I/O error
						disk = "Diskless"
					case w == "pending":
						disk, st.Phase = "UpToDate", drbd.PhasePending
					case w == "old": // a report of the node's previous disk
						disk, st.Incarnation = "UpToDate", r.Incarnation-1
					case w == "unreported":
						report = false
					case w == "primary":
						st.Role = "Primary"
					default:
						t.Fatalf("unknown word %q", w)
					}
				}
				for v := 0; v < vols; v++ {
					st.Volumes = append(st.Volumes, drbd.VolumeStatus{Volume: v, DiskState: disk})
				}
				if report {
					statuses[f[0]] = st
				}
				rd.Replicas = append(rd.Replicas, r)
			}
			defs = append(defs, policy.Definition{RD: rd, Statuses: statuses})
			return fmt.Sprintf("%d replica(s)\n", len(rd.Replicas))
		case "plan":
			max, per := 0, 0
			if d.HasArg("max") {
				d.ScanArgs(t, "max", &max)
			}
			if d.HasArg("per") {
				d.ScanArgs(t, "per", &per)
			}
			var b strings.Builder
			for _, m := range policy.PlanEvacuation(all, defs, max, per) {
				fmt.Fprintf(&b, "%s %s %s", m.Node, m.Resource, m.Action)
				if req, ok := policy.MoveRequest(m, "policy:evacuate"); ok {
					fmt.Fprintf(&b, " (%s %s)", req.Verb, req.CommandID)
					if len(m.Avoid) > 0 {
						fmt.Fprintf(&b, " %s", req.Body)
					}
				}
				fmt.Fprintf(&b, ": %s\n", m.Reason)
			}
			if b.Len() == 0 {
				return "nothing to move\n"
			}
			return b.String()
		}
		t.Fatalf("unknown command %s", d.Cmd)
		return ""
	})
}

// TestEvictionPlans runs testdata/evictions: the controller's settings, nodes and the
// auto-evict verdicts at a moment. Regenerate with -rewrite.
//
//	settings        controller properties, one "key=value" a line: the settings read
//	nodes           one "name online|offline [since=MINUTES_AGO] [evicted]
//	                [allow=false] [copies=N]" a line
//	plan            PlanEvictions now
func TestEvictionPlans(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	var settings policy.EvictSettings
	var nodes []projections.Node
	copies := map[string]int{}
	datadriven.RunTest(t, "testdata/evictions", func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "settings":
			props := map[string]string{}
			for _, line := range lines(d.Input) {
				k, v, _ := strings.Cut(line, "=")
				props[k] = v
			}
			var warnings []string
			settings, warnings = policy.EvictSettingsFrom(props)
			out := fmt.Sprintf("after=%s max-disconnected=%d%% min-replicas=%d allow=%t\n",
				settings.After, settings.MaxDisconnectedPercent, settings.MinReplicaCount, settings.Allow)
			for _, w := range warnings {
				out += "warning: " + w + "\n"
			}
			return out
		case "nodes":
			nodes, copies = nil, map[string]int{}
			for _, line := range lines(d.Input) {
				f := strings.Fields(line)
				n := projections.Node{Spec: projections.NodeSpec{Name: f[0], Properties: map[string]string{}},
					Status: projections.NodeStatus{State: f[1], Since: now, Seq: uint64(len(nodes) + 1)}}
				for _, w := range f[2:] {
					k, v, _ := strings.Cut(w, "=")
					switch k {
					case "since":
						mins, err := strconv.Atoi(v)
						if err != nil {
							t.Fatal(err)
						}
						n.Status.Since = now.Add(-time.Duration(mins) * time.Minute)
					case "evicted":
						n.Spec.Maintenance = events.MaintenanceEvicted
					case "allow":
						n.Spec.Properties[policy.PropAutoEvictAllowEviction] = v
					case "copies":
						c, err := strconv.Atoi(v)
						if err != nil {
							t.Fatal(err)
						}
						copies[f[0]] = c
					default:
						t.Fatalf("unknown word %q", w)
					}
				}
				nodes = append(nodes, n)
			}
			return fmt.Sprintf("%d node(s)\n", len(nodes))
		case "plan":
			var b strings.Builder
			// copies=N: the node holds a disk of one definition with N more disks on
			// online nodes (DefinitionBlocksEviction with the controller's settings).
			blocked := map[string]string{}
			for node, n := range copies {
				rd := projections.ResourceDefinition{Name: "r-" + node, Replicas: []projections.Replica{{Node: node}}}
				online := map[string]bool{}
				for i := range n {
					other := fmt.Sprintf("o%d", i)
					rd.Replicas = append(rd.Replicas, projections.Replica{Node: other})
					online[other] = true
				}
				if why := policy.DefinitionBlocksEviction(rd, node, online, nil, nil, settings); why != "" {
					blocked[node] = why
				}
			}
			plan := policy.PlanEvictions(nodes, settings, blocked, now)
			sort.SliceStable(plan, func(i, j int) bool { return plan[i].Node < plan[j].Node })
			for _, e := range plan {
				fmt.Fprintf(&b, "%s %s: %s", e.Node, e.Action, e.Reason)
				if !e.Due.IsZero() && e.Action == policy.EvictWait {
					fmt.Fprintf(&b, " (in %s)", e.Due.Sub(now))
				}
				b.WriteString("\n")
			}
			if b.Len() == 0 {
				return "no node offline\n"
			}
			return b.String()
		}
		t.Fatalf("unknown command %s", d.Cmd)
		return ""
	})
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// The definition's setting wins over its group's, the group's over the controller's.
func TestDefinitionBlocksEvictionLevels(t *testing.T) {
	rd := projections.ResourceDefinition{Name: "r1", Replicas: []projections.Replica{{Node: "n1"}, {Node: "n2"}, {Node: "n3", Diskless: true}}}
	online := map[string]bool{"n2": true, "n3": true}
	min := func(n string) map[string]string { return map[string]string{policy.PropAutoEvictMinReplicaCount: n} }
	allow := func(v string) map[string]string { return map[string]string{policy.PropAutoEvictAllowEviction: v} }
	for _, c := range []struct {
		name                  string
		node                  string
		rd, group, controller map[string]string
		want                  string
	}{
		{"defaults: one copy elsewhere is enough", "n1", nil, nil, nil, ""},
		{"controller asks two", "n1", nil, nil, min("2"), "fewer than DrbdOptions/AutoEvictMinReplicaCount=2"},
		{"the group's wins over the controller's", "n1", nil, min("1"), min("2"), ""},
		{"the definition's wins over the group's", "n1", min("2"), min("1"), nil, "fewer than DrbdOptions/AutoEvictMinReplicaCount=2"},
		{"not allowed on the group", "n1", nil, allow("false"), nil, "resource r1: DrbdOptions/AutoEvictAllowEviction=false"},
		{"allowed on the definition again", "n1", allow("true"), allow("false"), nil, ""},
		{"a diskless replica's node never counts copies", "n3", min("5"), nil, nil, ""},
	} {
		s, _ := policy.EvictSettingsFrom(c.controller)
		got := policy.DefinitionBlocksEviction(rd, c.node, online, c.rd, c.group, s)
		if c.want == "" {
			if got != "" {
				t.Errorf("%s: %q", c.name, got)
			}
		} else if !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
