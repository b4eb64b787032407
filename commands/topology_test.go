package commands_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func addHost(t *testing.T, s *server.Server, name, host, label string) admission.Reply {
	t.Helper()
	return servertest.Submit(s, "node.add", fmt.Sprintf(`{"name":%q,"host":%q,"address":"10.0.0.1","failure_domain":%q}`, name, host, label))
}

// sixHosts builds RACK1..RACK3 with two hosts each on a 2+1 cluster.
func sixHosts(t *testing.T, s *server.Server) {
	t.Helper()
	require.True(t, servertest.Submit(s, "cluster.create", cluster).OK)
	for i := 1; i <= 6; i++ {
		r := addHost(t, s, fmt.Sprintf("n%d", i), fmt.Sprintf("h%d", i), fmt.Sprintf("RACK%d", (i-1)/2+1))
		require.True(t, r.OK, "%+v", r.Error)
	}
}

func TestActivationAndBalanceThroughAdmission(t *testing.T) {
	s := servertest.Start(t)
	require.True(t, servertest.Submit(s, "cluster.create", cluster).OK)
	for i := 1; i <= 4; i++ {
		require.True(t, addHost(t, s, fmt.Sprintf("n%d", i), fmt.Sprintf("h%d", i), fmt.Sprintf("RACK%d", (i-1)/2+1)).OK)
	}
	before := servertest.LastSeq(t, s)
	r := servertest.Submit(s, "cluster.activate", `{}`)
	require.Equal(t, cairn.CodePreconditionFailed, r.Error.Code)
	assert.Contains(t, r.Error.Message, "2 failure domain(s); scheme 2+1 needs at least 3")
	assert.Equal(t, before, servertest.LastSeq(t, s))

	require.True(t, addHost(t, s, "n5", "h5", "RACK3").OK)
	r = servertest.Submit(s, "cluster.activate", `{}`)
	require.Equal(t, cairn.CodePreconditionFailed, r.Error.Code, "RACK3 has one host")
	assert.Contains(t, r.Error.Message, "RACK1=2 RACK2=2 RACK3=1")
	require.True(t, addHost(t, s, "n6", "h6", "RACK3").OK)
	r = servertest.Submit(s, "cluster.activate", `{}`)
	require.True(t, r.OK, "%+v", r.Error)
	assert.Equal(t, "cluster.activated", r.Events[0].Type)

	recorded := func() ([]events.StoreHosts, []events.JournalSet) {
		v, err := s.DB.Read()
		require.NoError(t, err)
		defer v.Close()
		st, err := v.VolumeStores()
		require.NoError(t, err)
		js, err := v.JournalSets()
		require.NoError(t, err)
		return st, js
	}
	stores, journals := recorded()
	require.Len(t, stores, 6, "activation records every host's volume store")
	require.Len(t, journals, 6)
	for _, j := range journals {
		assert.Len(t, j.Members, 4, "four journal copies on a failure-domain cluster")
	}

	// after activation: within +-1 only, and a host never changes domain
	r = addHost(t, s, "n7", "h7", "RACK1")
	require.True(t, r.OK)
	require.Len(t, r.Events, 3, "node.added, placement.updated and the host's claim in one atomic append")
	assert.Equal(t, "placement.updated", r.Events[1].Type)
	assert.Equal(t, "host.changed", r.Events[2].Type)
	assert.Equal(t, r.Events[0].Seq+1, r.Events[1].Seq)
	stores, _ = recorded()
	require.Len(t, stores, 7)
	r = addHost(t, s, "n8", "h8", "RACK1")
	require.Equal(t, cairn.CodeDomainUnbalanced, r.Error.Code)
	assert.Contains(t, r.Error.Message, "RACK1=4 RACK2=2 RACK3=2")
	r = addHost(t, s, "n8", "h7", "RACK2")
	require.Equal(t, cairn.CodePreconditionFailed, r.Error.Code)
	assert.Contains(t, r.Error.Message, "host h7 is in failure domain RACK1")
	r = servertest.Submit(s, "node.remove", `{"name":"n3"}`)
	require.Equal(t, cairn.CodeDomainUnbalanced, r.Error.Code, "RACK2 would drop two below RACK1")
	require.True(t, servertest.Submit(s, "node.remove", `{"name":"n7"}`).OK)
	stores, journals = recorded()
	require.Len(t, stores, 6)
	for _, st := range stores {
		assert.NotContains(t, []string{st.Primary, st.Secondary, st.Tertiary}, "h7")
	}
	for _, j := range journals {
		assert.NotContains(t, j.Members, "h7")
		assert.Len(t, j.Members, 4)
	}

	// a reactivation only warns
	require.True(t, servertest.Submit(s, "node.remove", `{"name":"n6"}`).OK)
	r = servertest.Submit(s, "cluster.activate", `{}`)
	require.True(t, r.OK)
	assert.Contains(t, r.Warnings[0], "different numbers of hosts")

	v, err := s.DB.Read()
	require.NoError(t, err)
	defer v.Close()
	ds, err := v.Domains()
	require.NoError(t, err)
	require.Len(t, ds, 3)
	for i, d := range ds {
		assert.Equal(t, fmt.Sprintf("RACK%d", i+1), d.Label)
		assert.Equal(t, i+1, d.ID, "ids in order of first appearance")
	}
	n, _, err := v.Node("n5")
	require.NoError(t, err)
	assert.Equal(t, 3, n.Spec.FailureDomainID)
	r = servertest.Submit(s, "node.add", `{"name":"p1","host":"h1","address":"10.0.0.1","failure_domain":"RACK1","physical_label":"PDU-A"}`)
	require.True(t, r.OK, "%+v", r.Error)
	v2, err := s.DB.Read()
	require.NoError(t, err)
	defer v2.Close()
	p1, _, err := v2.Node("p1")
	require.NoError(t, err)
	assert.Equal(t, "PDU-A", p1.Spec.PhysicalLabel)
}

// exactlyOneAccepted sends two commands at once and asserts that exactly one is accepted
// and the other refused with domain_unbalanced.
func exactlyOneAccepted(t *testing.T, s *server.Server, verb string, bodies [2]string) {
	t.Helper()
	var wg sync.WaitGroup
	var replies [2]admission.Reply
	for i, body := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = servertest.SubmitAnswered(t, s, verb, body)
		}()
	}
	wg.Wait()
	ok := 0
	for _, r := range replies {
		if r.OK {
			ok++
		} else {
			assert.Equal(t, cairn.CodeDomainUnbalanced, r.Error.Code, r.Error.Message)
		}
	}
	assert.Equal(t, 1, ok)
}

// Two adds each admissible alone but not together: exactly one is accepted.
func TestConcurrentAddsCannotBreakBalanceTogether(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			s := servertest.Start(t)
			sixHosts(t, s)
			require.True(t, servertest.Submit(s, "cluster.activate", `{}`).OK)
			exactlyOneAccepted(t, s, "node.add", [2]string{
				`{"name":"x0","host":"hx0","address":"10.0.0.1","failure_domain":"RACK1"}`,
				`{"name":"x1","host":"hx1","address":"10.0.0.1","failure_domain":"RACK1"}`})
		})
	}
}

// Two removals each admissible alone but not together: exactly one is accepted.
func TestConcurrentRemovalsCannotBreakBalanceTogether(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			s := servertest.Start(t)
			require.True(t, servertest.Submit(s, "cluster.create", cluster).OK)
			for i := 1; i <= 9; i++ {
				require.True(t, addHost(t, s, fmt.Sprintf("n%d", i), fmt.Sprintf("h%d", i), fmt.Sprintf("RACK%d", (i-1)/3+1)).OK)
			}
			require.True(t, servertest.Submit(s, "cluster.activate", `{}`).OK)
			exactlyOneAccepted(t, s, "node.remove", [2]string{`{"name":"n1"}`, `{"name":"n2"}`}) // both in RACK1
		})
	}
}

// A failure-domain label on a cluster without failure domains is recorded on the node
// (with a warning) and nothing else: no domain host list grows with every node.add
// (before, node.add with a label ran at half the rate of one without). With failure
// domains on, the lists are kept.
func TestLabelsWithoutFailureDomainsKeepNoDomainLists(t *testing.T) {
	for _, fd := range []bool{false, true} {
		s := servertest.Start(t)
		must(t, s, "cluster.create", fmt.Sprintf(`{"name":"c1","failure_domains":%t,"data_chunks":1,"parity_chunks":1}`, fd))
		for i := 1; i <= 4; i++ {
			must(t, s, "node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d","failure_domain":"RACK%d"}`, i, i, i, i%2))
		}
		dump, err := s.DB.Dump()
		require.NoError(t, err)
		lists := 0
		for k := range dump {
			if strings.HasPrefix(k, "v/hosts/") {
				lists++
			}
		}
		if fd {
			assert.Equal(t, 2, lists, "with failure domains: one host list per domain")
		} else {
			assert.Zero(t, lists, "without failure domains: no domain host lists")
		}
		v, err := s.DB.Read()
		require.NoError(t, err)
		n, _, err := v.Node("n1")
		v.Close()
		require.NoError(t, err)
		assert.Equal(t, "RACK1", n.Spec.FailureDomain, "the label is recorded on the node")
	}
}
