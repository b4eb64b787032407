package domains

import "fmt"

// JournalSet is one host's HA journal: the hosts holding its copies.
type JournalSet struct {
	Owner   string   `json:"owner"`
	Members []string `json:"members"`
}

// PathMove is one failover path moved off a departing host.
type PathMove struct {
	Primary string `json:"primary"`
	Path    string `json:"path"` // "secondary" or "tertiary"
	From    string `json:"from"`
	To      string `json:"to"`
}

// MemberReplacement is one journal set's departed member and its replacement ("" when
// no free host exists; the set then runs with one copy fewer).
type MemberReplacement struct {
	Owner string `json:"owner"`
	From  string `json:"from"`
	To    string `json:"to"`
}

// Relocation is what removing a host changes in the recorded placement.
type Relocation struct {
	Moves        []PathMove          `json:"moves,omitempty"`
	Replacements []MemberReplacement `json:"replacements,omitempty"`
}

// PlanRemoval decides how the placement follows a host's removal. Every failover path on
// the host moves to a host that is not already a path of that store: the first in the
// rotation (of the remaining hosts, after the store's primary) in another domain than the
// primary when the store's other path is not cross-domain (then mandatory: without one the
// removal is refused), else preferring another domain. Every journal set holding a copy on
// the host takes one replacement member, preferring the departed host's domain, then any
// host under the per-domain cap, then any host at all; it never blocks the removal.
// Returns an error naming the store whose path has no valid target.
func PlanRemoval(stores []VolumeStore, journals []JournalSet, rot []Slot, leaving Slot, copies int, failureDomains bool) (Relocation, error) {
	var rel Relocation
	domainOf := map[string]string{}
	pos := map[string]int{}
	for i, s := range rot {
		domainOf[s.Host] = s.Domain
		pos[s.Host] = i
	}
	for _, vs := range stores {
		if vs.Primary.Host == leaving.Host {
			continue
		}
		for _, which := range []string{"secondary", "tertiary"} {
			p, other := vs.Secondary, vs.Tertiary
			if which == "tertiary" {
				p, other = vs.Tertiary, vs.Secondary
			}
			if p == nil || p.Host != leaving.Host {
				continue
			}
			mustCross := other == nil || other.Domain == vs.Primary.Domain || other.Host == leaving.Host
			to, ok := pickPath(rot, pos[vs.Primary.Host], vs, mustCross, leaving.Host)
			if !ok {
				return Relocation{}, fmt.Errorf("the %s path of %s's volume store has no valid target in another domain than %s", which, vs.Primary.Host, vs.Primary.Domain)
			}
			rel.Moves = append(rel.Moves, PathMove{Primary: vs.Primary.Host, Path: which, From: leaving.Host, To: to.Host})
		}
	}
	quorumCap := copies
	if failureDomains {
		quorumCap = max(copies-JournalQuorum(copies), 1)
	}
	for _, js := range journals {
		if js.Owner == leaving.Host {
			continue
		}
		in := map[string]bool{}
		holds := false
		per := map[string]int{}
		for _, m := range js.Members {
			if m == leaving.Host {
				holds = true
				continue
			}
			in[m] = true
			per[domainOf[m]]++
		}
		if !holds {
			continue
		}
		var sameDomain, underCap, anyHost string
		for k := range rot {
			c := rot[(pos[js.Owner]+k)%len(rot)]
			if in[c.Host] || c.Host == leaving.Host {
				continue
			}
			if anyHost == "" {
				anyHost = c.Host
			}
			if underCap == "" && per[c.Domain] < quorumCap {
				underCap = c.Host
			}
			if sameDomain == "" && c.Domain == leaving.Domain && per[c.Domain] < quorumCap {
				sameDomain = c.Host
			}
		}
		to := sameDomain
		if to == "" {
			to = underCap
		}
		if to == "" {
			to = anyHost
		}
		rel.Replacements = append(rel.Replacements, MemberReplacement{Owner: js.Owner, From: leaving.Host, To: to})
	}
	return rel, nil
}

func pickPath(rot []Slot, start int, vs VolumeStore, mustCross bool, leaving string) (Slot, bool) {
	taken := map[string]bool{vs.Primary.Host: true, leaving: true}
	for _, p := range vs.Paths() {
		taken[p.Host] = true
	}
	var fallback *Slot
	for k := 1; k < len(rot); k++ {
		c := rot[(start+k)%len(rot)]
		if taken[c.Host] {
			continue
		}
		if c.Domain != vs.Primary.Domain {
			return c, true
		}
		if fallback == nil || (fallback.Physical == vs.Primary.Physical && c.Physical != vs.Primary.Physical) {
			fallback = &c
		}
	}
	if fallback != nil && !mustCross {
		return *fallback, true
	}
	return Slot{}, false
}

// ApplyRelocation returns the stores and journal sets after the host left.
func ApplyRelocation(stores []VolumeStore, journals []JournalSet, rot []Slot, leaving string, rel Relocation) ([]VolumeStore, []JournalSet) {
	slot := map[string]Slot{}
	for _, s := range rot {
		slot[s.Host] = s
	}
	var outS []VolumeStore
	for _, vs := range stores {
		if vs.Primary.Host == leaving {
			continue
		}
		for _, m := range rel.Moves {
			if m.Primary != vs.Primary.Host {
				continue
			}
			to := slot[m.To]
			if m.Path == "secondary" {
				vs.Secondary = &to
			} else {
				vs.Tertiary = &to
			}
		}
		outS = append(outS, vs)
	}
	var outJ []JournalSet
	for _, js := range journals {
		if js.Owner == leaving {
			continue
		}
		var members []string
		for _, m := range js.Members {
			if m != leaving {
				members = append(members, m)
			}
		}
		for _, r := range rel.Replacements {
			if r.Owner == js.Owner && r.To != "" {
				members = append(members, r.To)
			}
		}
		outJ = append(outJ, JournalSet{Owner: js.Owner, Members: members})
	}
	return outS, outJ
}
