package domains

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cairn-io/cairn"
)

// Member is a node as the failure-domain rules see it.
type Member struct {
	Name     string
	Host     string
	Domain   string // failure-domain label
	Role     string // "storage" counts toward balance; "secondary" does not
	Physical string // physical label (chassis, PDU): the last placement preference
}

// DomainHosts is one domain and the hosts that count toward its balance.
type DomainHosts struct {
	Label string   `json:"label"`
	Hosts []string `json:"hosts"`
}

// Topology is the storage hosts per failure domain, labels sorted. Balance counts
// hosts, not storage nodes; dedicated secondary nodes are not counted; the caller passes
// only nodes in the cluster (removed nodes leave the count, offline ones stay in it).
type Topology struct {
	Domains []DomainHosts `json:"domains"`
	// Physical maps a host to its physical label, for hosts that have one.
	Physical map[string]string `json:"physical,omitempty"`
}

// BuildTopology groups the storage members by domain and host. Known labels are domains
// that exist even with no host left (a domain, once created, counts with zero hosts
// rather than vanishing from the balance).
func BuildTopology(members []Member, known ...string) Topology {
	byDomain := map[string]map[string]bool{}
	for _, l := range known {
		byDomain[l] = map[string]bool{}
	}
	var t Topology
	for _, m := range members {
		if m.Role != "" && m.Role != "storage" {
			continue
		}
		if m.Physical != "" {
			if t.Physical == nil {
				t.Physical = map[string]string{}
			}
			if _, seen := t.Physical[m.Host]; !seen {
				t.Physical[m.Host] = m.Physical
			}
		}
		if byDomain[m.Domain] == nil {
			byDomain[m.Domain] = map[string]bool{}
		}
		byDomain[m.Domain][m.Host] = true
	}
	for label, hosts := range byDomain {
		d := DomainHosts{Label: label, Hosts: []string{}}
		for h := range hosts {
			d.Hosts = append(d.Hosts, h)
		}
		sort.Strings(d.Hosts)
		t.Domains = append(t.Domains, d)
	}
	sort.Slice(t.Domains, func(i, j int) bool { return t.Domains[i].Label < t.Domains[j].Label })
	return t
}

// Counts returns the host count per domain label.
func (t Topology) Counts() map[string]int {
	out := make(map[string]int, len(t.Domains))
	for _, d := range t.Domains {
		out[d.Label] = len(d.Hosts)
	}
	return out
}

// Spread returns the smallest and largest host count over the domains (0, 0 for none).
func (t Topology) Spread() (min, max int) {
	for i, d := range t.Domains {
		n := len(d.Hosts)
		if i == 0 || n < min {
			min = n
		}
		if n > max {
			max = n
		}
	}
	return
}

// String is "RACK1=2 RACK2=3", for messages.
func (t Topology) String() string {
	var parts []string
	for _, d := range t.Domains {
		parts = append(parts, fmt.Sprintf("%s=%d", d.Label, len(d.Hosts)))
	}
	if len(parts) == 0 {
		return "no domains"
	}
	return strings.Join(parts, " ")
}

// CheckHostLabel refuses a node whose host is already in the cluster under another
// failure-domain label: two storage nodes on one host carry the same label, and a host's
// domain never changes while it is in the cluster. Returns precondition_failed.
func CheckHostLabel(members []Member, cand Member) error {
	for _, m := range members {
		if m.Host == cand.Host && m.Domain != cand.Domain {
			return CheckHostDomain(cand.Host, m.Domain, cand.Domain)
		}
	}
	return nil
}

// CheckHostDomain refuses (precondition_failed) a node for host in domain requested
// when the host is in the cluster in domain current.
func CheckHostDomain(host, current, requested string) error {
	if current == requested {
		return nil
	}
	return cairn.Errorf(cairn.CodePreconditionFailed,
		"host %s is in failure domain %s; a host's domain cannot change while it is in the cluster: remove its nodes first, then add them with label %s",
		host, current, requested).
		WithDetails(map[string]any{"host": host, "domain": current, "requested": requested})
}

// CheckActivation decides cluster.activate. A fresh activation is refused
// (precondition_failed, with the numbers) unless there are at least two domains, at
// least parity+2 domains, and every domain holds the same number of hosts. A
// reactivation of an existing layout only warns about the same conditions.
func CheckActivation(t Topology, s Scheme, fresh bool) (warnings []string, err error) {
	var problems []string
	n := len(t.Domains)
	if n < 2 {
		problems = append(problems, fmt.Sprintf("%d failure domain(s); at least two are needed", n))
	}
	if n < s.MinDomains() {
		problems = append(problems, fmt.Sprintf("%d failure domain(s); scheme %s needs at least %d (parity + 2)", n, s, s.MinDomains()))
	}
	if lo, hi := t.Spread(); lo != hi {
		problems = append(problems, fmt.Sprintf("domains hold different numbers of hosts (%s); activation needs them equal", t))
	}
	if len(problems) == 0 {
		return nil, nil
	}
	if !fresh {
		return problems, nil
	}
	return nil, cairn.Errorf(cairn.CodePreconditionFailed, "cannot activate: %s", strings.Join(problems, "; ")).
		WithDetails(map[string]any{"domains": t.Counts(), "scheme": s.String(), "min_domains": s.MinDomains()})
}

// CheckChange decides whether a topology change (a node added or removed) keeps the
// balance of an activated cluster: host counts per domain differ by at most one (the
// +-1 rule), and, once the cluster holds data, no domain drops below two hosts. Returns
// domain_unbalanced naming the rule and the numbers. Changes that leave the host counts
// as they are (a second node on a known host, a dedicated secondary) always pass.
func CheckChange(before, after Topology, holdsData bool) error {
	after = after.keeping(before)
	bc, ac := before.Counts(), after.Counts()
	same := len(bc) == len(ac)
	for l, n := range ac {
		if bc[l] != n {
			same = false
		}
	}
	if same {
		return nil
	}
	if lo, hi := after.Spread(); hi-lo > 1 {
		if blo, bhi := before.Spread(); hi-lo > bhi-blo || bhi-blo <= 1 {
			hint := ""
			for _, d := range before.Domains {
				if ac[d.Label] < len(d.Hosts) {
					hint = fmt.Sprintf("; hosts have to be added to %s first (or removed from the other domains until they are within one)", d.Label)
				}
			}
			return cairn.Errorf(cairn.CodeDomainUnbalanced,
				"hosts per domain would differ by %d (%s); the +-1 rule allows one%s", hi-lo, after, hint).
				WithDetails(map[string]any{"before": bc, "after": ac})
		}
	}
	if holdsData {
		for _, d := range before.Domains {
			if n := ac[d.Label]; len(d.Hosts) >= 2 && n < 2 {
				return cairn.Errorf(cairn.CodeDomainUnbalanced,
					"domain %s would keep %d host(s); once the cluster holds data every domain keeps at least two", d.Label, n).
					WithDetails(map[string]any{"domain": d.Label, "hosts": n, "before": bc, "after": ac})
			}
		}
	}
	return nil
}

// keeping returns t with an empty entry for every domain of other that t lacks: a
// domain whose last host leaves counts as zero hosts, it does not vanish from the balance.
func (t Topology) keeping(other Topology) Topology {
	have := t.Counts()
	out := Topology{Domains: append([]DomainHosts(nil), t.Domains...), Physical: t.Physical}
	for _, d := range other.Domains {
		if _, ok := have[d.Label]; !ok {
			out.Domains = append(out.Domains, DomainHosts{Label: d.Label})
		}
	}
	sort.Slice(out.Domains, func(i, j int) bool { return out.Domains[i].Label < out.Domains[j].Label })
	return out
}

// Verdict summarizes a topology's balance for the views: "balanced" (equal counts),
// "within +-1", or "unbalanced".
func (t Topology) Verdict() string {
	lo, hi := t.Spread()
	switch {
	case hi-lo == 0:
		return "balanced"
	case hi-lo == 1:
		return "within +-1"
	}
	return "unbalanced"
}
