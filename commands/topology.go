package commands

import (
	"encoding/json"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/domains"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// ClusterActivate is the body of cluster.activate (no fields).
type ClusterActivate struct{}

// streamBoundary is the boundary "nothing new anywhere since the view": topology
// decisions read every node and the cluster, which no narrower filter covers.
func streamBoundary(v *projections.View) events.Expect {
	return events.Expect{Kind: events.ExpectStream, Seq: v.Seq()}
}

// members returns the nodes of the view as the failure-domain rules see them, and the
// labels of every domain ever created.
func members(v *projections.View) ([]domains.Member, []string, error) {
	nodes, err := v.Nodes()
	if err != nil {
		return nil, nil, err
	}
	out := make([]domains.Member, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, domains.Member{Name: n.Spec.Name, Host: n.Spec.Host, Domain: n.Spec.FailureDomain, Role: n.Spec.Role})
	}
	ds, err := v.Domains()
	labels := make([]string, 0, len(ds))
	for _, d := range ds {
		labels = append(labels, d.Label)
	}
	return out, labels, err
}

// DecideClusterActivate activates the cluster's layout. Refuses with precondition_failed
// when there is no cluster or, with failure domains on, when a fresh activation's layout
// breaks the activation rules (domains.CheckActivation); a reactivation only warns.
func DecideClusterActivate(cluster *projections.Cluster, ms []domains.Member, labels []string) (*events.ClusterActivated, []string, error) {
	if cluster == nil {
		return nil, nil, cairn.Errorf(cairn.CodePreconditionFailed, "no cluster yet: send cluster.create before cluster.activate")
	}
	top := domains.BuildTopology(ms, labels...)
	ev := &events.ClusterActivated{Name: cluster.Name, Fresh: !cluster.Activated, Domains: top.Counts()}
	if !cluster.FailureDomains {
		return ev, nil, nil
	}
	warnings, err := domains.CheckActivation(top, domains.Scheme{Data: cluster.DataChunks, Parity: cluster.ParityChunks}, ev.Fresh)
	ev.Warnings = warnings
	if err != nil || !ev.Fresh {
		return ev, warnings, err // a reactivation keeps the recorded placement
	}
	rot := domains.Rotation(top)
	stores := domains.PlaceVolumeStores(rot, cluster.ParityChunks)
	if err := domains.CheckFailoverInvariant(stores); err != nil {
		return nil, nil, cairn.Errorf(cairn.CodeDomainUnbalanced, "cannot activate: %v", err)
	}
	ev.VolumeStores = storeHosts(stores)
	copies := domains.JournalCopies(true, cluster.ParityChunks)
	for i, s := range rot {
		ev.JournalSets = append(ev.JournalSets, journalHosts(s.Host, domains.PlaceJournal(rot, i, copies, true)))
	}
	return ev, warnings, nil
}

func storeHosts(stores []domains.VolumeStore) []events.StoreHosts {
	out := make([]events.StoreHosts, 0, len(stores))
	for _, vs := range stores {
		sh := events.StoreHosts{Primary: vs.Primary.Host}
		if vs.Secondary != nil {
			sh.Secondary = vs.Secondary.Host
		}
		if vs.Tertiary != nil {
			sh.Tertiary = vs.Tertiary.Host
		}
		out = append(out, sh)
	}
	return out
}

func journalHosts(owner string, set []domains.Slot) events.JournalSet {
	js := events.JournalSet{Owner: owner, Members: []string{}}
	for _, m := range set {
		js.Members = append(js.Members, m.Host)
	}
	return js
}

// recordedPlacement reads the recorded stores and journal sets as the placement rules
// take them (slots carry the domain of their host).
func recordedPlacement(v *projections.View, domainOf map[string]string) ([]domains.VolumeStore, []domains.JournalSet, error) {
	shs, err := v.VolumeStores()
	if err != nil {
		return nil, nil, err
	}
	slot := func(h string) *domains.Slot {
		if h == "" {
			return nil
		}
		return &domains.Slot{Host: h, Domain: domainOf[h]}
	}
	var stores []domains.VolumeStore
	for _, sh := range shs {
		stores = append(stores, domains.VolumeStore{Primary: *slot(sh.Primary), Secondary: slot(sh.Secondary), Tertiary: slot(sh.Tertiary)})
	}
	jss, err := v.JournalSets()
	var journals []domains.JournalSet
	for _, js := range jss {
		journals = append(journals, domains.JournalSet{Owner: js.Owner, Members: js.Members})
	}
	return stores, journals, err
}

// placementFor decides how the recorded placement of an activated failure-domain cluster
// follows a node joining (add) or leaving (remove). It returns nil when nothing changes
// (the cluster is not activated, the node's host stays in the cluster or was there already,
// or the node is a dedicated secondary). Refuses with domain_unbalanced when a failover path
// of the departing host has no valid target or the invariant would break.
func placementFor(v *projections.View, add *domains.Member, remove string) (*events.PlacementUpdated, error) {
	cl, ok, err := v.Cluster()
	if err != nil || !ok || !cl.FailureDomains || !cl.Activated {
		return nil, err
	}
	ms, _, err := members(v)
	if err != nil {
		return nil, err
	}
	hostNodes := map[string]int{}
	domainOf := map[string]string{}
	var leaving *domains.Member
	for i, m := range ms {
		if m.Role != events.RoleStorage {
			continue
		}
		hostNodes[m.Host]++
		domainOf[m.Host] = m.Domain
		if m.Name == remove {
			leaving = &ms[i]
		}
	}
	var after []domains.Member
	for _, m := range ms {
		if m.Name != remove {
			after = append(after, m)
		}
	}
	copies := domains.JournalCopies(true, cl.ParityChunks)
	switch {
	case add != nil:
		if add.Role != events.RoleStorage || hostNodes[add.Host] > 0 {
			return nil, nil
		}
		after = append(after, *add)
		rot := domains.Rotation(domains.BuildTopology(after))
		for i, s := range rot {
			if s.Host != add.Host {
				continue
			}
			// Only the new store is new: the recorded ones keep their paths.
			vs := domains.PlaceVolumeStores(rot, cl.ParityChunks)[i]
			if err := domains.CheckFailoverInvariant([]domains.VolumeStore{vs}); err != nil {
				return nil, cairn.Errorf(cairn.CodeDomainUnbalanced, "placing %s's volume store: %v", add.Host, err)
			}
			return &events.PlacementUpdated{Cluster: cl.Name, Reason: "host " + add.Host + " joined",
				VolumeStores: storeHosts([]domains.VolumeStore{vs}),
				JournalSets:  []events.JournalSet{journalHosts(add.Host, domains.PlaceJournal(rot, i, copies, true))}}, nil
		}
		return nil, nil
	case leaving != nil && hostNodes[leaving.Host] == 1:
		stores, journals, err := recordedPlacement(v, domainOf)
		if err != nil {
			return nil, err
		}
		rot := domains.Rotation(domains.BuildTopology(after))
		gone := domains.Slot{Host: leaving.Host, Domain: leaving.Domain}
		rel, err := domains.PlanRemoval(stores, journals, rot, gone, copies, true)
		if err != nil {
			return nil, cairn.Errorf(cairn.CodeDomainUnbalanced, "removing %s: %v", leaving.Name, err)
		}
		afterStores, _ := domains.ApplyRelocation(stores, journals, rot, gone.Host, rel)
		if err := domains.CheckFailoverInvariant(afterStores); err != nil {
			return nil, cairn.Errorf(cairn.CodeDomainUnbalanced, "removing %s would break the failover invariant: %v", leaving.Name, err)
		}
		up := &events.PlacementUpdated{Cluster: cl.Name, Reason: "host " + gone.Host + " left", RemovedHost: gone.Host}
		for _, m := range rel.Moves {
			up.Moves = append(up.Moves, events.PathMove(m))
		}
		for _, r := range rel.Replacements {
			up.Replacements = append(up.Replacements, events.MemberReplacement(r))
		}
		return up, nil
	}
	return nil, nil
}

// checkTopology applies the failure-domain rules of the view's cluster to a node
// joining (add) or leaving (remove); see checkTopologyChange.
func checkTopology(v *projections.View, add *domains.Member, remove string) error {
	cl, ok, err := v.Cluster()
	if err != nil || !ok || !cl.FailureDomains {
		return err
	}
	ms, labels, err := members(v)
	if err != nil {
		return err
	}
	holdsData, err := v.HoldsData()
	if err != nil {
		return err
	}
	return checkTopologyChange(&cl, ms, labels, add, remove, holdsData)
}

// checkRemoval applies the removal rules that do not depend on failure domains: the
// node holds no logical volumes and no snapshots (removal never moves them), and, once
// the cluster is activated, enough online storage hosts stay above k + m to absorb the
// loss (hosts already offline do not count). Returns precondition_failed with the numbers.
func checkRemoval(v *projections.View, node string) error {
	u, err := v.Usage(node)
	if err != nil {
		return err
	}
	if u.Lvols > 0 || u.Snapshots > 0 {
		return cairn.Errorf(cairn.CodePreconditionFailed,
			"node %s holds %d logical volume(s) and %d snapshot(s); delete or migrate them first (removal does not move them)", node, u.Lvols, u.Snapshots).
			WithDetails(map[string]any{"node": node, "lvols": u.Lvols, "snapshots": u.Snapshots})
	}
	cl, ok, err := v.Cluster()
	if err != nil || !ok || !cl.Activated {
		return err
	}
	nodes, err := v.Nodes()
	if err != nil {
		return err
	}
	online := map[string]bool{}
	var leaving string
	for _, n := range nodes {
		if n.Spec.Name == node {
			leaving = n.Spec.Host
			continue
		}
		if n.Spec.Role == events.RoleStorage && n.Status.State == events.StateOnline {
			online[n.Spec.Host] = true
		}
	}
	delete(online, "") // defensive: a node without a host never counts
	need := cl.DataChunks + cl.ParityChunks + 1
	if len(online) < need {
		return cairn.Errorf(cairn.CodePreconditionFailed,
			"removing %s (host %s) leaves %d online storage host(s); scheme %d+%d needs at least %d to absorb a loss", node, leaving, len(online), cl.DataChunks, cl.ParityChunks, need).
			WithDetails(map[string]any{"online_hosts": len(online), "needed": need})
	}
	return nil
}

// checkTopologyChange applies the failure-domain rules to a node joining (add) or
// leaving: the host's label and, once activated, the balance (domains.CheckChange, with
// the two-host floor once the cluster holds data). The placement follows in
// placementForAdd and placementForRemoval.
func checkTopologyChange(cluster *projections.Cluster, ms []domains.Member, labels []string, add *domains.Member, remove string, holdsData bool) error {
	if cluster == nil || !cluster.FailureDomains {
		return nil
	}
	after := make([]domains.Member, 0, len(ms)+1)
	for _, m := range ms {
		if m.Name != remove {
			after = append(after, m)
		}
	}
	if add != nil {
		if err := domains.CheckHostLabel(ms, *add); err != nil {
			return err
		}
		after = append(after, *add)
	}
	if !cluster.Activated {
		return nil
	}
	return domains.CheckChange(domains.BuildTopology(ms, labels...), domains.BuildTopology(after, labels...), holdsData)
}

// topologyBoundary is the boundary of node.add: the node's own subject when the cluster
// has no failure domains (nothing else is read), else the whole stream.
func topologyBoundary(v *projections.View, names events.Names, node string) (events.Expect, error) {
	cl, ok, err := v.Cluster()
	if err != nil {
		return events.Expect{}, err
	}
	if ok && cl.FailureDomains {
		return streamBoundary(v), nil
	}
	return subjectBoundary(v, names.Event("node", node))
}

func activateHandler() Handler {
	return Handler{Verb: "cluster.activate", Decide: func(v *projections.View, names events.Names, body []byte) (Decision, error) {
		var c ClusterActivate
		if err := json.Unmarshal(body, &c); err != nil {
			return Decision{}, cairn.InvalidField("", "body: %v", err)
		}
		d := Decision{Expect: streamBoundary(v)}
		cl, ok, err := v.Cluster()
		if err != nil {
			return d, err
		}
		ms, labels, err := members(v)
		if err != nil {
			return d, err
		}
		ev, warnings, err := DecideClusterActivate(ptrIf(cl, ok), ms, labels)
		if err != nil {
			return d, err
		}
		return d.with(names.Event("cluster", cl.Name), ev, warnings), nil
	}}
}
