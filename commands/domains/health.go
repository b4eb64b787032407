package domains

import (
	"fmt"
	"sort"
)

// Cluster health states.
const (
	HealthOK        = "ok"
	HealthDegraded  = "degraded"
	HealthSuspended = "suspended"
)

// Restart is how the nodes of one domain come back after an outage.
type Restart struct {
	Domain string   `json:"domain"`
	Mode   string   `json:"mode"` // "parallel" (the whole domain was down: one plan for all) or "one-by-one"
	Hosts  []string `json:"hosts"`
}

// Health is the cluster status with its reasons.
type Health struct {
	Status  string   `json:"status"`
	Reasons []string `json:"reasons,omitempty"`
	// BudgetUsed is the summed contribution of the domains with outages; Budget is m.
	BudgetUsed int       `json:"budget_used"`
	Budget     int       `json:"budget"`
	Restarts   []Restart `json:"restarts,omitempty"`
}

// AssessHealth derives the cluster status from host outages (a host is out when a node
// on it is offline or has failed devices). A domain with outages
// contributes min(hosts down, c) to the parity budget m, where c = ceil((k+m)/domains) is
// the most chunks of a stripe it holds (without failure domains every host is its own
// domain, c = 1). Within the budget the cluster is degraded but serving; beyond it,
// suspended. This covers the reference's cases: outages confined to one domain whose
// contribution fits m; with m = 2 and at least k + m domains (c = 1), one whole domain
// plus one more host in exactly one other domain. It also plans the restart: a domain that
// was down as a whole restarts its hosts in parallel, otherwise one by one.
func AssessHealth(t Topology, down map[string]bool, s Scheme, failureDomains bool) Health {
	h := Health{Status: HealthOK, Budget: s.Parity}
	n := s.Data + s.Parity
	c := 1
	if failureDomains && len(t.Domains) > 0 {
		c = (n + len(t.Domains) - 1) / len(t.Domains)
	}
	for _, d := range t.Domains {
		var hosts []string
		for _, host := range d.Hosts {
			if down[host] {
				hosts = append(hosts, host)
			}
		}
		if len(hosts) == 0 {
			continue
		}
		sort.Strings(hosts)
		if failureDomains {
			h.BudgetUsed += min(len(hosts), c)
		} else {
			h.BudgetUsed += len(hosts)
		}
		h.Reasons = append(h.Reasons, fmt.Sprintf("%d of %d host(s) with node or device outages in %s", len(hosts), len(d.Hosts), label(d.Label)))
		mode := "one-by-one"
		if failureDomains && len(hosts) == len(d.Hosts) {
			mode = "parallel"
		}
		h.Restarts = append(h.Restarts, Restart{Domain: d.Label, Mode: mode, Hosts: hosts})
	}
	switch {
	case h.BudgetUsed == 0:
	case h.BudgetUsed <= s.Parity:
		h.Status = HealthDegraded
		h.Reasons = append(h.Reasons, fmt.Sprintf("parity budget %d of %d used: serving, degraded", h.BudgetUsed, s.Parity))
	default:
		h.Status = HealthSuspended
		h.Reasons = append(h.Reasons, fmt.Sprintf("parity budget %d of %d used: beyond what scheme %s absorbs, suspended", h.BudgetUsed, s.Parity, s))
	}
	return h
}

func label(l string) string {
	if l == "" {
		return "the cluster"
	}
	return l
}
