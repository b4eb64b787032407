package domains

import (
	"fmt"
	"sort"
)

// Slot is one host in the activation rotation.
type Slot struct {
	Host     string `json:"host"`
	Domain   string `json:"domain"`
	Physical string `json:"physical,omitempty"`
}

// Rotation orders the storage hosts round-robin across the domains (labels sorted): the
// first host of every domain, then the second of every domain that has one, and so on.
// On equally sized domains each host's successor is in another domain. Within a domain
// the hosts are interleaved across their physical labels the same way (labels sorted,
// hosts sorted within a label), so hosts of one domain that follow each other in the
// rotation sit on different physical labels where the domain allows it: distinct hosts
// first, distinct domains next, distinct physical labels last.
func Rotation(t Topology) []Slot {
	ordered := make([][]string, len(t.Domains))
	for i, d := range t.Domains {
		ordered[i] = interleave(d.Hosts, t.Physical)
	}
	var out []Slot
	for i := 0; ; i++ {
		added := false
		for j, d := range t.Domains {
			if i < len(ordered[j]) {
				out = append(out, Slot{Host: ordered[j][i], Domain: d.Label, Physical: t.Physical[ordered[j][i]]})
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// interleave orders hosts round-robin across their physical labels.
func interleave(hosts []string, physical map[string]string) []string {
	groups := map[string][]string{}
	var labels []string
	for _, h := range hosts {
		l := physical[h]
		if _, ok := groups[l]; !ok {
			labels = append(labels, l)
		}
		groups[l] = append(groups[l], h)
	}
	if len(labels) <= 1 {
		return hosts
	}
	sort.Strings(labels)
	for _, l := range labels {
		sort.Strings(groups[l])
	}
	out := make([]string, 0, len(hosts))
	for i := 0; len(out) < len(hosts); i++ {
		for _, l := range labels {
			if i < len(groups[l]) {
				out = append(out, groups[l][i])
			}
		}
	}
	return out
}

// VolumeStore is a host's logical volume store and its failover paths.
type VolumeStore struct {
	Primary   Slot  `json:"primary"`
	Secondary *Slot `json:"secondary,omitempty"`
	Tertiary  *Slot `json:"tertiary,omitempty"`
}

// Paths returns the failover paths (secondary, then tertiary when present).
func (v VolumeStore) Paths() []Slot {
	var out []Slot
	for _, p := range []*Slot{v.Secondary, v.Tertiary} {
		if p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// CrossDomain reports whether at least one failover path is in another domain than the
// primary: the failover-path invariant.
func (v VolumeStore) CrossDomain() bool {
	for _, p := range v.Paths() {
		if p.Domain != v.Primary.Domain {
			return true
		}
	}
	return false
}

// PlaceVolumeStores gives every host of the rotation a volume store: primary = the host,
// secondary = the next host in the rotation and, with two parity chunks, tertiary = the
// one after. Distinct hosts always. If a store would then have no failover path in
// another domain (a one-host imbalance with one parity chunk), its last path moves to the
// next host in the rotation that is in another domain, when there is one.
func PlaceVolumeStores(rot []Slot, parity int) []VolumeStore {
	n := len(rot)
	stores := make([]VolumeStore, 0, n)
	for p := range rot {
		vs := VolumeStore{Primary: rot[p]}
		if n >= 2 {
			s := rot[(p+1)%n]
			vs.Secondary = &s
		}
		if parity >= 2 && n >= 3 {
			t := rot[(p+2)%n]
			vs.Tertiary = &t
		}
		if !vs.CrossDomain() && vs.Secondary != nil {
			last := &vs.Secondary
			start := 1
			if vs.Tertiary != nil {
				last, start = &vs.Tertiary, 2
			}
			for k := start; k < n; k++ {
				c := rot[(p+k)%n]
				if c.Domain != vs.Primary.Domain {
					*last = &c
					break
				}
			}
		}
		stores = append(stores, vs)
	}
	return stores
}

// CheckFailoverInvariant returns an error naming the first volume store without a
// failover path in another domain than its primary, or with two paths on one host.
func CheckFailoverInvariant(stores []VolumeStore) error {
	for _, vs := range stores {
		hosts := map[string]bool{vs.Primary.Host: true}
		for _, p := range vs.Paths() {
			if hosts[p.Host] {
				return fmt.Errorf("volume store of %s has two paths on host %s", vs.Primary.Host, p.Host)
			}
			hosts[p.Host] = true
		}
		if len(vs.Paths()) > 0 && !vs.CrossDomain() {
			return fmt.Errorf("volume store of %s (domain %s) has no failover path in another domain", vs.Primary.Host, vs.Primary.Domain)
		}
	}
	return nil
}

// PlaceStripe spreads the chunks of one stripe over the domains as evenly as they allow:
// chunk i goes to domain i mod D (labels sorted), so no domain holds more than
// ceil(chunks/D). It returns the chunk count per domain label.
func PlaceStripe(labels []string, chunks int) map[string]int {
	sorted := append([]string(nil), labels...)
	sort.Strings(sorted)
	out := make(map[string]int, len(sorted))
	if len(sorted) == 0 {
		return out
	}
	for i := range chunks {
		out[sorted[i%len(sorted)]]++
	}
	return out
}

// JournalCopies is how many copies of the HA journal a cluster keeps: four with failure
// domains or two parity chunks, three otherwise.
func JournalCopies(failureDomains bool, parity int) int {
	if failureDomains || parity >= 2 {
		return 4
	}
	return 3
}

// JournalQuorum is how many copies must survive: half of them, rounded up.
func JournalQuorum(copies int) int { return (copies + 1) / 2 }

// PlaceJournal picks the hosts of the journal set that starts at rotation position
// start: copies distinct hosts in rotation order and, with failure domains, skipping a
// host whose domain already holds copies - quorum copies (the per-domain cap that keeps
// the quorum when one domain is lost). It returns fewer hosts when the topology cannot
// hold them all.
func PlaceJournal(rot []Slot, start, copies int, failureDomains bool) []Slot {
	cap := copies
	if failureDomains {
		cap = max(copies-JournalQuorum(copies), 1)
	}
	perDomain := map[string]int{}
	var out []Slot
	for k := 0; k < len(rot) && len(out) < copies; k++ {
		c := rot[(start+k)%len(rot)]
		if perDomain[c.Domain] >= cap {
			continue
		}
		perDomain[c.Domain]++
		out = append(out, c)
	}
	return out
}
