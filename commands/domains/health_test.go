package domains_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-io/cairn/commands/domains"
	"github.com/cockroachdb/datadriven"
)

// TestHealth runs testdata/health: "health scheme=K+M [nofd] down=h1,h2" over the
// topology in the input ("LABEL host host ...").
func TestHealth(t *testing.T) {
	datadriven.RunTest(t, "testdata/health", func(t *testing.T, d *datadriven.TestData) string {
		members := parseHosts(d.Input)
		var scheme, down string
		d.ScanArgs(t, "scheme", &scheme)
		if d.HasArg("down") {
			d.ScanArgs(t, "down", &down)
		}
		s, err := domains.ParseScheme(scheme)
		if err != nil {
			t.Fatal(err)
		}
		dead := map[string]bool{}
		for _, h := range strings.Split(down, ",") {
			if h != "" {
				dead[h] = true
			}
		}
		h := domains.AssessHealth(domains.BuildTopology(members), dead, s, !d.HasArg("nofd"))
		var b strings.Builder
		fmt.Fprintf(&b, "%s (budget %d/%d)\n", h.Status, h.BudgetUsed, h.Budget)
		for _, r := range h.Restarts {
			fmt.Fprintf(&b, "restart %s %s: %s\n", r.Domain, r.Mode, strings.Join(r.Hosts, " "))
		}
		return b.String()
	})
}
