package replicas

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/storage/backing"
)

// Built-in node properties every node has for replicas-on-same / replicas-on-different,
// besides the operator's own node properties.
const (
	PropNode          = "node"
	PropHost          = "host"
	PropFailureDomain = "failure_domain"
	PropPhysical      = "physical_label"
)

// StoragePool is a storage pool of a node as placement sees it.
type StoragePool struct {
	Name     string           `json:"name"`
	Provider backing.Provider `json:"provider"`
	Pool     string           `json:"pool"`
	FreeKiB  uint64           `json:"free_kib"`
	// TotalKiB is the pool's capacity (what query-size-info reports; placement reads
	// FreeKiB only).
	TotalKiB uint64 `json:"total_kib,omitempty"`
	// NoCapacity: the operator has not given the pool's capacity yet (sp.modify), so
	// nothing is placed on it.
	NoCapacity bool `json:"no_capacity,omitempty"`
	// Unusable is why the node's agent cannot use the pool (its latest report's error:
	// a path that does not exist, a volume group that is gone); "" when it can. Nothing
	// is placed on it.
	Unusable string `json:"unusable,omitempty"`
}

// Candidate is a node placement may choose.
type Candidate struct {
	Node    string
	Online  bool
	Storage bool // a storage node (dedicated secondaries carry no replicas)
	Domain  string
	// Props are the node's properties, built-ins included (see PropNode...).
	Props map[string]string
	Pools []StoragePool
	// Cordoned says why the node takes no new replica (AutoplaceTarget=false, an
	// evacuation, an eviction); "" when it may.
	Cordoned string
}

// PropAutoplaceTarget is LINSTOR's node property that cordons a node: "false" keeps new
// replicas (autoplaced, tiebreakers, replacements) off it.
const PropAutoplaceTarget = "AutoplaceTarget"

// CordonReason says why a node with props in maintenance mode maintenance takes no new
// replica, "" when it may.
func CordonReason(props map[string]string, maintenance string) string {
	switch {
	case maintenance != "":
		return "cordoned: " + maintenance
	case strings.EqualFold(props[PropAutoplaceTarget], "false"):
		return "cordoned: " + PropAutoplaceTarget + "=false"
	}
	return ""
}

// Member is a replica a definition already has.
type Member struct {
	Node       string
	Diskless   bool
	Tiebreaker bool
	Domain     string
	Props      map[string]string
}

// Rules are what a resource group, and an autoplace's own filter, ask of placement.
type Rules struct {
	StoragePool string           // "" = any pool that fits
	Provider    backing.Provider // "" = any provider
	// ReplicasOnSame are properties every replica's node shares the value of (key),
	// or has the given value of (key=value).
	ReplicasOnSame      []string
	ReplicasOnDifferent []string
	// SpreadDomains prefers failure domains holding fewer of the definition's replicas
	// (set when the cluster has failure domains).
	SpreadDomains bool
	// Nodes, when set, are the only nodes placed on (LINSTOR's node_name_list).
	Nodes []string
	// StoragePools and Providers, when set, are the pools and providers a disk may go
	// on (LINSTOR's storage_pool_list and provider_list), besides StoragePool and
	// Provider.
	StoragePools []string
	Providers    []backing.Provider
	// Excluded are nodes placement passes over, with why (LINSTOR's not_place_with_rsc:
	// the nodes of those resources' replicas).
	Excluded map[string]string
	// AtMostPerValue caps how many diskful replicas may share one value of a property
	// (LINSTOR's x_replicas_on_different: key → how many).
	AtMostPerValue map[string]int
}

// poolAllowed reports whether a disk may go on pool p under the rules' pool and
// provider constraints (not whether it has room or is usable).
func (r Rules) poolAllowed(p StoragePool) bool {
	return (r.StoragePool == "" || p.Name == r.StoragePool) && (r.Provider == "" || p.Provider == r.Provider) &&
		(len(r.StoragePools) == 0 || slices.Contains(r.StoragePools, p.Name)) &&
		(len(r.Providers) == 0 || slices.Contains(r.Providers, p.Provider))
}

// overCap names the first AtMostPerValue key whose value props share with at least as
// many of others as the key allows.
func (r Rules) overCap(props map[string]string, others []map[string]string) (string, bool) {
	for _, key := range slices.Sorted(maps.Keys(r.AtMostPerValue)) {
		v, ok := props[key]
		if !ok || v == "" {
			continue
		}
		n := 0
		for _, o := range others {
			if o[key] == v {
				n++
			}
		}
		if n >= r.AtMostPerValue[key] {
			return key, true
		}
	}
	return "", false
}

// Choice is one node chosen for a new diskful replica, with the pool its disk goes on.
type Choice struct {
	Node string
	Pool StoragePool
}

// Autoplace chooses count nodes for new diskful replicas needing needKiB each, next to
// members. A node qualifies when it is an online storage node without a replica of the
// definition, has a pool matching the rules with needKiB free, shares every
// replicas-on-same property with the members and differs from every member and every
// other choice in each replicas-on-different property. Among qualifying nodes it picks
// one at a time: fewest replicas in the node's failure domain (with SpreadDomains), then
// most free space, then name. Without members, replicas-on-same tries each value group,
// largest total free space first. Refuses with precondition_failed naming how many it
// could place and why each other node was passed over (details "rejected").
func Autoplace(rules Rules, needKiB uint64, count int, members []Member, candidates []Candidate) ([]Choice, error) {
	if count <= 0 {
		return nil, nil
	}
	groups := [][]Candidate{candidates}
	if shared, _ := SplitSame(rules.ReplicasOnSame); len(shared) > 0 && len(members) == 0 {
		groups = sameValueGroups(shared, candidates)
	}
	var best []Choice
	var bestRejected map[string]string
	for _, g := range groups {
		chosen, rejected := placeIn(rules, needKiB, count, members, g)
		if len(chosen) == count {
			return chosen, nil
		}
		if best == nil || len(chosen) > len(best) {
			best, bestRejected = chosen, rejected
		}
	}
	if bestRejected == nil {
		bestRejected = map[string]string{}
	}
	placed := make([]string, 0, len(best))
	for _, c := range best {
		placed = append(placed, c.Node)
	}
	reasons := make([]string, 0, len(bestRejected))
	for _, n := range slices.Sorted(maps.Keys(bestRejected)) {
		reasons = append(reasons, n+": "+bestRejected[n])
	}
	msg := fmt.Sprintf("autoplace needs %d more diskful replica(s) of %d KiB and found %d eligible node(s)", count, needKiB, len(best))
	if len(reasons) > 0 {
		msg += "; passed over " + strings.Join(reasons, "; ")
	}
	return nil, cairn.Errorf(cairn.CodePreconditionFailed, "%s", msg).WithDetails(map[string]any{
		"needed": count, "placeable": placed, "short": count - len(best), "rejected": bestRejected})
}

// placeIn places greedily within one group of candidates and says why others were
// passed over.
func placeIn(rules Rules, needKiB uint64, count int, members []Member, cands []Candidate) ([]Choice, map[string]string) {
	rejected := map[string]string{}
	holding := map[string]bool{}
	domainCount := map[string]int{}
	for _, m := range members {
		holding[m.Node] = true
		if !m.Diskless {
			domainCount[m.Domain]++
		}
	}
	type eligible struct {
		c    Candidate
		pool StoragePool
	}
	var pool []eligible
	for _, c := range cands {
		if reason := disqualify(rules, needKiB, members, holding, c); reason != "" {
			rejected[c.Node] = reason
			continue
		}
		pool = append(pool, eligible{c, bestPool(rules, needKiB, c.Pools)})
	}
	var chosen []Choice
	var chosenProps []map[string]string
	for len(chosen) < count && len(pool) > 0 {
		sort.SliceStable(pool, func(i, j int) bool {
			a, b := pool[i], pool[j]
			if rules.SpreadDomains && domainCount[a.c.Domain] != domainCount[b.c.Domain] {
				return domainCount[a.c.Domain] < domainCount[b.c.Domain]
			}
			if a.pool.FreeKiB != b.pool.FreeKiB {
				return a.pool.FreeKiB > b.pool.FreeKiB
			}
			return a.c.Node < b.c.Node
		})
		pick := pool[0]
		pool = pool[1:]
		chosen = append(chosen, Choice{Node: pick.c.Node, Pool: pick.pool})
		chosenProps = append(chosenProps, pick.c.Props)
		domainCount[pick.c.Domain]++
		// Drop the nodes the choice rules out.
		kept := pool[:0]
		for _, e := range pool {
			if key, ok := clash(rules.ReplicasOnDifferent, e.c.Props, chosenProps); ok {
				rejected[e.c.Node] = fmt.Sprintf("same %s as a chosen node", key)
				continue
			}
			if key, ok := rules.overCap(e.c.Props, append(diskfulProps(members), chosenProps...)); ok {
				rejected[e.c.Node] = fmt.Sprintf("%s %q already has %d replica(s) (x_replicas_on_different)", key, e.c.Props[key], rules.AtMostPerValue[key])
				continue
			}
			kept = append(kept, e)
		}
		pool = kept
	}
	return chosen, rejected
}

// disqualify says why c cannot take a new diskful replica ("" when it can).
func disqualify(rules Rules, needKiB uint64, members []Member, holding map[string]bool, c Candidate) string {
	switch {
	case holding[c.Node]:
		return "already holds a replica"
	case !c.Storage:
		return "not a storage node"
	case !c.Online:
		return "offline"
	case c.Cordoned != "":
		return c.Cordoned
	case len(rules.Nodes) > 0 && !slices.Contains(rules.Nodes, c.Node):
		return "not in node_name_list"
	case rules.Excluded[c.Node] != "":
		return rules.Excluded[c.Node]
	}
	var matching []StoragePool
	for _, p := range c.Pools {
		if rules.poolAllowed(p) {
			matching = append(matching, p)
		}
	}
	if len(matching) == 0 {
		return strings.TrimSpace("no storage pool " + describePool(rules))
	}
	usable := matching[:0:0]
	for _, p := range matching {
		if p.Unusable == "" {
			usable = append(usable, p)
		}
	}
	if len(usable) == 0 {
		return fmt.Sprintf("its agent cannot use storage pool %s: %s", matching[0].Name, matching[0].Unusable)
	}
	matching = usable
	if bestPool(rules, needKiB, c.Pools).Name == "" {
		most, unknown := uint64(0), true
		for _, p := range matching {
			most = max(most, p.FreeKiB)
			unknown = unknown && p.NoCapacity
		}
		if unknown {
			return fmt.Sprintf("%s has no capacity yet (its agent has not reported one; sp.modify can give one)", strings.TrimSpace("storage pool "+describePool(rules)))
		}
		return fmt.Sprintf("only %d KiB free in %s (needs %d)", most, strings.TrimSpace("storage pool "+describePool(rules)), needKiB)
	}
	shared, fixed := SplitSame(rules.ReplicasOnSame)
	for _, key := range slices.Sorted(maps.Keys(fixed)) {
		if c.Props[key] != fixed[key] {
			return fmt.Sprintf("%s %q is not %q (replicas_on_same %s=%s)", key, c.Props[key], fixed[key], key, fixed[key])
		}
	}
	for _, key := range shared {
		for _, m := range members {
			if m.Props[key] != c.Props[key] {
				return fmt.Sprintf("%s %q differs from %s's %q (replicas_on_same)", key, c.Props[key], m.Node, m.Props[key])
			}
		}
	}
	memberProps := diskfulProps(members)
	if key, ok := clash(rules.ReplicasOnDifferent, c.Props, memberProps); ok {
		return fmt.Sprintf("same %s as an existing replica (replicas_on_different)", key)
	}
	if key, ok := rules.overCap(c.Props, memberProps); ok {
		return fmt.Sprintf("%s %q already has %d replica(s) (x_replicas_on_different)", key, c.Props[key], rules.AtMostPerValue[key])
	}
	return ""
}

// diskfulProps are the properties of the members with a disk.
func diskfulProps(members []Member) []map[string]string {
	out := make([]map[string]string, 0, len(members))
	for _, m := range members {
		if !m.Diskless {
			out = append(out, m.Props)
		}
	}
	return out
}

func describePool(rules Rules) string {
	var parts []string
	if rules.StoragePool != "" {
		parts = append(parts, "named "+rules.StoragePool)
	}
	if len(rules.StoragePools) > 0 {
		parts = append(parts, "named one of "+strings.Join(rules.StoragePools, ", "))
	}
	if rules.Provider != "" {
		parts = append(parts, "of provider "+string(rules.Provider))
	}
	if len(rules.Providers) > 0 {
		names := make([]string, 0, len(rules.Providers))
		for _, p := range rules.Providers {
			names = append(names, string(p))
		}
		parts = append(parts, "of provider "+strings.Join(names, " or "))
	}
	return strings.Join(parts, " ")
}

// bestPool is the matching usable pool with the most free space that fits needKiB
// (zero StoragePool when none fits).
func bestPool(rules Rules, needKiB uint64, pools []StoragePool) StoragePool {
	var best StoragePool
	for _, p := range pools {
		if !rules.poolAllowed(p) || p.Unusable != "" {
			continue
		}
		if p.FreeKiB >= needKiB && (best.Name == "" || p.FreeKiB > best.FreeKiB || p.FreeKiB == best.FreeKiB && p.Name < best.Name) {
			best = p
		}
	}
	return best
}

// clash reports the first replicas-on-different key whose value props shares with any
// of others (an absent value never clashes).
func clash(keys []string, props map[string]string, others []map[string]string) (string, bool) {
	for _, key := range keys {
		v, ok := props[key]
		if !ok || v == "" {
			continue
		}
		for _, o := range others {
			if o[key] == v {
				return key, true
			}
		}
	}
	return "", false
}

// SplitSame splits replicas_on_same entries into the properties replicas share the
// value of (key) and the values every replica's node has (key=value).
func SplitSame(entries []string) (shared []string, fixed map[string]string) {
	for _, e := range entries {
		if k, v, ok := strings.Cut(e, "="); ok {
			if fixed == nil {
				fixed = map[string]string{}
			}
			fixed[k] = v
			continue
		}
		shared = append(shared, e)
	}
	return shared, fixed
}

// sameValueGroups splits candidates by their values of keys, the group with the most
// total free space first (then by the values, for determinism). Nodes missing a value
// form no group.
func sameValueGroups(keys []string, cands []Candidate) [][]Candidate {
	byKey := map[string][]Candidate{}
	free := map[string]uint64{}
	for _, c := range cands {
		vals := make([]string, 0, len(keys))
		complete := true
		for _, k := range keys {
			v, ok := c.Props[k]
			if !ok || v == "" {
				complete = false
				break
			}
			vals = append(vals, v)
		}
		if !complete {
			continue
		}
		id := strings.Join(vals, "\x00")
		byKey[id] = append(byKey[id], c)
		for _, p := range c.Pools {
			free[id] += p.FreeKiB
		}
	}
	ids := slices.Collect(maps.Keys(byKey))
	sort.Slice(ids, func(i, j int) bool {
		if free[ids[i]] != free[ids[j]] {
			return free[ids[i]] > free[ids[j]]
		}
		return ids[i] < ids[j]
	})
	out := make([][]Candidate, 0, len(ids))
	for _, id := range ids {
		out = append(out, byKey[id])
	}
	return out
}
