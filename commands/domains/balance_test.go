package domains_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/domains"
	"github.com/cockroachdb/datadriven"
)

// TestBalanceRules runs testdata/balance: a cluster's members, activation and node
// changes, each answered with the rule's verdict. Regenerate with -rewrite.
//
//	members                       replace the members, one "name host label [role]" a line
//	activate scheme=K+M [again]   cluster.activate, fresh unless "again"
//	add name host label [role] [data]     a node.add after activation
//	remove name [data]            a node.remove after activation ("data": the cluster holds data)
func TestBalanceRules(t *testing.T) {
	for _, path := range []string{"testdata/balance"} {
		var members []domains.Member
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "members":
				members = nil
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					members = append(members, parseMember(t, strings.Fields(line)))
				}
				top := domains.BuildTopology(members)
				return fmt.Sprintf("%s (%s)\n", top, top.Verdict())
			case "activate":
				var scheme string
				d.ScanArgs(t, "scheme", &scheme)
				s, err := domains.ParseScheme(scheme)
				if err != nil {
					return result(err)
				}
				warnings, err := domains.CheckActivation(domains.BuildTopology(members), s, !d.HasArg("again"))
				if err != nil {
					return result(err)
				}
				out := "ok\n"
				for _, w := range warnings {
					out += "warning: " + w + "\n"
				}
				return out
			case "add":
				var fields []string
				data := false
				for _, a := range d.CmdArgs {
					if a.Key == "data" {
						data = true
						continue
					}
					fields = append(fields, a.Key)
				}
				cand := parseMember(t, fields)
				if err := domains.CheckHostLabel(members, cand); err != nil {
					return result(err)
				}
				after := append(append([]domains.Member(nil), members...), cand)
				if err := domains.CheckChange(domains.BuildTopology(members), domains.BuildTopology(after), data); err != nil {
					return result(err)
				}
				members = after
				top := domains.BuildTopology(members)
				return fmt.Sprintf("ok: %s (%s)\n", top, top.Verdict())
			case "remove":
				name := d.CmdArgs[0].Key
				var after []domains.Member
				for _, m := range members {
					if m.Name != name {
						after = append(after, m)
					}
				}
				if err := domains.CheckChange(domains.BuildTopology(members), domains.BuildTopology(after), d.HasArg("data")); err != nil {
					return result(err)
				}
				members = after
				top := domains.BuildTopology(members)
				return fmt.Sprintf("ok: %s (%s)\n", top, top.Verdict())
			}
			t.Fatalf("unknown command %s", d.Cmd)
			return ""
		})
	}
}

func parseMember(t *testing.T, f []string) domains.Member {
	if len(f) < 3 {
		t.Fatalf("member needs name host label [role]: %v", f)
	}
	m := domains.Member{Name: f[0], Host: f[1], Domain: f[2], Role: "storage"}
	if len(f) > 3 {
		m.Role = f[3]
	}
	return m
}

func result(err error) string {
	e := cairn.AsError(err)
	return "error: " + e.Code + ": " + e.Message + "\n"
}
