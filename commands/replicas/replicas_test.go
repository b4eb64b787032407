package replicas

import (
	"strings"
	"testing"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTake(t *testing.T) {
	r := Range{1000, 1004}
	cases := []struct {
		name string
		pool Pool
		n    int
		want []int
		err  string
	}{
		{"fresh range starts at min", Pool{}, 2, []int{1000, 1001}, ""},
		{"continues at the high-water mark", Pool{HighWater: 1003}, 1, []int{1003}, ""},
		{"freed values first, lowest first", Pool{HighWater: 1004, Free: []int{1001, 1002}}, 3, []int{1001, 1002, 1004}, ""},
		{"freed values outside the range are skipped", Pool{HighWater: 1004, Free: []int{990, 1002}}, 1, []int{1002}, ""},
		{"high-water mark below a raised min", Pool{HighWater: 10}, 1, []int{1000}, ""},
		{"runs out without wrapping", Pool{HighWater: 1004, Free: []int{1001}}, 3, nil, "no free minor left in range 1000-1004 (3 needed)"},
		{"full", Pool{HighWater: 1005}, 1, nil, "no free minor left"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Take(c.pool, r, c.n, "minor")
			if c.err != "" {
				require.Error(t, err)
				assert.Equal(t, cairn.CodePreconditionFailed, cairn.ErrorCode(err))
				assert.Contains(t, err.Error(), c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestNodeID(t *testing.T) {
	id, err := NodeID("r1", []int{0, 1, 3})
	require.NoError(t, err)
	assert.Equal(t, 2, id)
	all := make([]int, 32)
	for i := range all {
		all[i] = i
	}
	_, err = NodeID("r1", all)
	assert.Equal(t, cairn.CodePreconditionFailed, cairn.ErrorCode(err))
}

func node(name, domain string, free uint64, props ...string) Candidate {
	p := map[string]string{PropNode: name, PropFailureDomain: domain}
	for i := 0; i+1 < len(props); i += 2 {
		p[props[i]] = props[i+1]
	}
	return Candidate{Node: name, Online: true, Storage: true, Domain: domain, Props: p,
		Pools: []StoragePool{{Name: "thin", Provider: "lvm_thin", Pool: "vg/thin", FreeKiB: free}}}
}

// withPool renames c's one pool.
func withPool(c Candidate, name string) Candidate {
	c.Pools = []StoragePool{{Name: name, Provider: "lvm_thin", Pool: "vg/" + name, FreeKiB: c.Pools[0].FreeKiB}}
	return c
}

func TestAutoplace(t *testing.T) {
	offline := node("n9", "R1", 1<<30)
	offline.Online = false
	secondary := node("s1", "R2", 1<<30)
	secondary.Storage = false
	cases := []struct {
		name    string
		rules   Rules
		count   int
		members []Member
		cands   []Candidate
		want    string // chosen nodes, space separated
		err     string
	}{
		{"most free space first", Rules{}, 2, nil,
			[]Candidate{node("a", "", 10), node("b", "", 30), node("c", "", 20)}, "b c", ""},
		{"spreads domains before free space", Rules{SpreadDomains: true}, 3, nil,
			[]Candidate{node("a", "R1", 100), node("b", "R1", 90), node("c", "R2", 10), node("d", "R3", 5)}, "a c d", ""},
		{"spreads away from members' domains", Rules{SpreadDomains: true}, 1,
			[]Member{{Node: "a", Domain: "R1"}}, []Candidate{node("a", "R1", 100), node("b", "R1", 90), node("c", "R2", 10)}, "c", ""},
		{"replicas on different is strict", Rules{ReplicasOnDifferent: []string{"rack"}}, 2, nil,
			[]Candidate{node("a", "", 100, "rack", "x"), node("b", "", 90, "rack", "x"), node("c", "", 10, "rack", "y")}, "a c", ""},
		{"replicas on different refuses", Rules{ReplicasOnDifferent: []string{"rack"}}, 3, nil,
			[]Candidate{node("a", "", 1e5, "rack", "x"), node("b", "", 9e4, "rack", "x"), node("c", "", 1e4, "rack", "y")}, "",
			"found 2 eligible node(s); passed over b: same rack as a chosen node"},
		{"replicas on same follows members", Rules{ReplicasOnSame: []string{"site"}}, 1,
			[]Member{{Node: "a", Props: map[string]string{"site": "S1"}}},
			[]Candidate{node("a", "", 1, "site", "S1"), node("b", "", 100, "site", "S2"), node("c", "", 10, "site", "S1")}, "c", ""},
		{"replicas on same picks the group that fits", Rules{ReplicasOnSame: []string{"site"}}, 2, nil,
			[]Candidate{node("a", "", 1000, "site", "S1"), node("b", "", 10, "site", "S2"), node("c", "", 10, "site", "S2")}, "b c", ""},
		{"replicas on same with a value: only nodes that have it", Rules{ReplicasOnSame: []string{"zone=z1"}}, 2, nil,
			[]Candidate{node("a", "", 1000, "zone", "z2"), node("b", "", 10, "zone", "z1"), node("c", "", 20, "zone", "z1"), node("d", "", 500)}, "c b", ""},
		{"replicas on same with a value refuses naming it", Rules{ReplicasOnSame: []string{"zone=z1"}}, 2, nil,
			[]Candidate{node("a", "", 1e5, "zone", "z2"), node("b", "", 1e5, "zone", "z1")}, "", `a: zone "z2" is not "z1" (replicas_on_same zone=z1)`},
		{"a value and a shared key together", Rules{ReplicasOnSame: []string{"zone=z1", "rack"}}, 2, nil,
			[]Candidate{node("a", "", 1000, "zone", "z2", "rack", "r1"), node("b", "", 10, "zone", "z1", "rack", "r1"),
				node("c", "", 20, "zone", "z1", "rack", "r2"), node("d", "", 5, "zone", "z1", "rack", "r1")}, "b d", ""},
		{"pool too small, offline, secondary, wrong pool", Rules{StoragePool: "thin"}, 1, nil,
			[]Candidate{node("a", "", 1), offline, secondary, {Node: "x", Online: true, Storage: true}}, "",
			"a: only 1 KiB free in storage pool named thin (needs 4096); n9: offline; s1: not a storage node; x: no storage pool named thin"},
		{"provider filter", Rules{Provider: "zfs"}, 1, nil, []Candidate{node("a", "", 1<<30)}, "", "no storage pool of provider zfs"},
		{"members are not chosen again", Rules{}, 1, []Member{{Node: "a"}}, []Candidate{node("a", "", 100), node("b", "", 1<<20)}, "b", ""},
		{"node list: only those nodes", Rules{Nodes: []string{"c"}}, 1, nil,
			[]Candidate{node("a", "", 100), node("b", "", 90), node("c", "", 1)}, "c", ""},
		{"node list refuses naming the others", Rules{Nodes: []string{"c"}}, 2, nil,
			[]Candidate{node("a", "", 1e5), node("c", "", 1e5)}, "", "a: not in node_name_list"},
		{"excluded nodes are passed over", Rules{Excluded: map[string]string{"a": "holds a replica of db (not_with)"}}, 1, nil,
			[]Candidate{node("a", "", 100), node("b", "", 1)}, "b", ""},
		{"pool list: any of them", Rules{StoragePools: []string{"fast", "slow"}}, 2, nil,
			[]Candidate{node("a", "", 100), withPool(node("b", "", 1), "fast"), withPool(node("c", "", 2), "slow")}, "c b", ""},
		{"provider list", Rules{Providers: []backing.Provider{"zfs_thin", "lvm_thin"}}, 1, nil, []Candidate{node("a", "", 100)}, "a", ""},
		{"provider list refuses naming the providers", Rules{Providers: []backing.Provider{"zfs"}}, 1, nil, []Candidate{node("a", "", 1e5)}, "", "no storage pool of provider zfs"},
		{"at most two per zone", Rules{AtMostPerValue: map[string]int{"zone": 2}}, 3,
			[]Member{{Node: "a", Props: map[string]string{"zone": "z1"}}},
			[]Candidate{node("a", "", 1, "zone", "z1"), node("b", "", 100, "zone", "z1"), node("c", "", 90, "zone", "z1"), node("d", "", 5, "zone", "z2"), node("e", "", 4, "zone", "z2")},
			"b d e", ""},
		{"at most one per zone refuses", Rules{AtMostPerValue: map[string]int{"zone": 1}}, 2, nil,
			[]Candidate{node("a", "", 1e5, "zone", "z1"), node("b", "", 1e5, "zone", "z1")}, "", `b: zone "z1" already has 1 replica(s) (x_replicas_on_different)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			need := uint64(1)
			if c.err != "" {
				need = 4096
			}
			got, err := Autoplace(c.rules, need, c.count, c.members, c.cands)
			if c.err != "" {
				require.Error(t, err)
				assert.Equal(t, cairn.CodePreconditionFailed, cairn.ErrorCode(err))
				assert.Contains(t, err.Error(), c.err)
				return
			}
			require.NoError(t, err)
			var names []string
			for _, ch := range got {
				names = append(names, ch.Node)
			}
			assert.Equal(t, c.want, strings.Join(names, " "))
		})
	}
}

func TestPlanTiebreaker(t *testing.T) {
	disk := func(n, d string) Member { return Member{Node: n, Domain: d} }
	cands := []Candidate{node("a", "R1", 0), node("b", "R2", 0), node("c", "R1", 0), node("d", "R3", 0)}
	cases := []struct {
		name    string
		members []Member
		cands   []Candidate
		want    TiebreakerPlan
	}{
		{"two diskful get one, in a third domain", []Member{disk("a", "R1"), disk("b", "R2")}, cands, TiebreakerPlan{Add: "d"}},
		{"a diskless replica already breaks ties", []Member{disk("a", "R1"), disk("b", "R2"), {Node: "c", Diskless: true}}, cands, TiebreakerPlan{}},
		{"three diskful: the tiebreaker goes", []Member{disk("a", "R1"), disk("b", "R2"), disk("c", "R1"), {Node: "d", Diskless: true, Tiebreaker: true}}, cands, TiebreakerPlan{Remove: "d"}},
		{"one diskful: the tiebreaker goes", []Member{disk("a", "R1"), {Node: "d", Diskless: true, Tiebreaker: true}}, cands, TiebreakerPlan{Remove: "d"}},
		{"user diskless joins: the tiebreaker goes", []Member{disk("a", "R1"), disk("b", "R2"), {Node: "c", Diskless: true}, {Node: "d", Diskless: true, Tiebreaker: true}}, cands, TiebreakerPlan{Remove: "d"}},
		{"kept while needed", []Member{disk("a", "R1"), disk("b", "R2"), {Node: "d", Diskless: true, Tiebreaker: true}}, cands, TiebreakerPlan{}},
		{"same domain when no other is free", []Member{disk("a", "R1"), disk("b", "R2")}, cands[:3], TiebreakerPlan{Add: "c"}},
		{"no node free: a warning", []Member{disk("a", "R1"), disk("b", "R2")}, cands[:2], TiebreakerPlan{Warning: "two diskful replicas and no online node free for a diskless tiebreaker: quorum cannot break a tie"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, PlanTiebreaker(c.members, c.cands))
		})
	}
}
