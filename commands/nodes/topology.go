package nodes

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/commands/domains"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// ClusterActivate is the body of cluster.activate (no fields).
type ClusterActivate struct{}

// members returns the nodes of the view as the failure-domain rules see them, and the
// labels of every domain ever created.
func members(v *projections.View) ([]domains.Member, []string, error) {
	nodes, err := v.Nodes()
	if err != nil {
		return nil, nil, err
	}
	out := make([]domains.Member, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, domains.Member{Name: n.Spec.Name, Host: n.Spec.Host, Domain: n.Spec.FailureDomain, Role: n.Spec.Role, Physical: n.Spec.PhysicalLabel})
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

// placementFor decides how the recorded placement of an activated failure-domain cluster
// follows a node joining (add) or leaving (remove). It returns nil when nothing changes
// (the cluster is not activated, the node's host stays in the cluster or was there already,
// or the node is a dedicated secondary). Refuses with domain_unbalanced when a failover path
// of the departing host has no valid target or the invariant would break. It reads only the
// host index and the stores and journal sets that use the departing host.
func placementFor(v *projections.View, add *domains.Member, remove string) (*events.PlacementUpdated, error) {
	cl, ok, err := v.Cluster()
	if err != nil || !ok || !cl.FailureDomains || !cl.Activated {
		return nil, err
	}
	host, domain, counted, err := topologyChange(v, add, remove)
	if err != nil || !counted {
		return nil, err
	}
	top, err := indexTopology(v)
	if err != nil {
		return nil, err
	}
	copies := domains.JournalCopies(true, cl.ParityChunks)
	if add != nil {
		rot := domains.Rotation(withHost(top, host, domain, add.Physical))
		for i, s := range rot {
			if s.Host != host {
				continue
			}
			// Only the new store is new: the recorded ones keep their paths.
			vs := domains.PlaceVolumeStores(rot, cl.ParityChunks)[i]
			if err := domains.CheckFailoverInvariant([]domains.VolumeStore{vs}); err != nil {
				return nil, cairn.Errorf(cairn.CodeDomainUnbalanced, "placing %s's volume store: %v", host, err)
			}
			return &events.PlacementUpdated{Cluster: cl.Name, Reason: "host " + host + " joined",
				VolumeStores: storeHosts([]domains.VolumeStore{vs}),
				JournalSets:  []events.JournalSet{journalHosts(host, domains.PlaceJournal(rot, i, copies, true))}}, nil
		}
		return nil, nil
	}
	rot := domains.Rotation(withoutHost(top, host))
	domainOf := map[string]string{host: domain}
	for _, s := range rot {
		domainOf[s.Host] = s.Domain
	}
	stores, journals, err := placementUsing(v, host, domainOf, top.Physical)
	if err != nil {
		return nil, err
	}
	gone := domains.Slot{Host: host, Domain: domain}
	rel, err := domains.PlanRemoval(stores, journals, rot, gone, copies, true)
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeDomainUnbalanced, "removing %s: %v", remove, err)
	}
	moved, _ := domains.ApplyRelocation(stores, journals, rot, host, rel)
	if err := domains.CheckFailoverInvariant(moved); err != nil {
		return nil, cairn.Errorf(cairn.CodeDomainUnbalanced, "removing %s would break the failover invariant: %v", remove, err)
	}
	up := &events.PlacementUpdated{Cluster: cl.Name, Reason: "host " + host + " left", RemovedHost: host}
	for _, m := range rel.Moves {
		up.Moves = append(up.Moves, events.PathMove(m))
	}
	for _, r := range rel.Replacements {
		up.Replacements = append(up.Replacements, events.MemberReplacement(r))
	}
	return up, nil
}

// placementUsing reads the recorded stores with a failover path on host and the journal
// sets with a copy there, as the placement rules take them.
func placementUsing(v *projections.View, host string, domainOf, physical map[string]string) ([]domains.VolumeStore, []domains.JournalSet, error) {
	primaries, owners, err := v.Uses(host)
	if err != nil {
		return nil, nil, err
	}
	slot := func(h string) *domains.Slot {
		if h == "" {
			return nil
		}
		return &domains.Slot{Host: h, Domain: domainOf[h], Physical: physical[h]}
	}
	var stores []domains.VolumeStore
	for _, p := range primaries {
		sh, ok, err := v.Store(p)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			stores = append(stores, domains.VolumeStore{Primary: *slot(sh.Primary), Secondary: slot(sh.Secondary), Tertiary: slot(sh.Tertiary)})
		}
	}
	var journals []domains.JournalSet
	for _, o := range owners {
		js, ok, err := v.Journal(o)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			journals = append(journals, domains.JournalSet{Owner: js.Owner, Members: js.Members})
		}
	}
	return stores, journals, nil
}

// checkTopology applies the failure-domain rules of the view's cluster to a node
// joining (add) or leaving (remove): a host keeps its domain, and, once activated, the
// balance holds (domains.CheckChange, with the two-host floor once the cluster holds
// data). It reads the host index (one key per host, one per domain), so its cost does not
// grow with the cluster.
func checkTopology(v *projections.View, add *domains.Member, remove string) error {
	cl, ok, err := v.Cluster()
	if err != nil || !ok || !cl.FailureDomains {
		return err
	}
	host, domain, counted, err := topologyChange(v, add, remove)
	if err != nil || !cl.Activated || !counted {
		return err
	}
	before, err := indexTopology(v)
	if err != nil {
		return err
	}
	after := withoutHost(before, host)
	if add != nil {
		after = withHost(before, host, domain, add.Physical)
	}
	holdsData, err := v.HoldsData()
	if err != nil {
		return err
	}
	return domains.CheckChange(before, after, holdsData)
}

// topologyChange says which host a node change adds or removes from the balance, and
// whether it counts at all (a storage node that is the first, or last, on its host). A
// node joining a host that is in another domain is refused (precondition_failed).
func topologyChange(v *projections.View, add *domains.Member, remove string) (host, domain string, counted bool, err error) {
	if add != nil {
		h, present, err := v.Host(add.Host)
		if err != nil {
			return "", "", false, err
		}
		if present && h.Domain != add.Domain {
			return "", "", false, domains.CheckHostDomain(add.Host, h.Domain, add.Domain)
		}
		return add.Host, add.Domain, add.Role == events.RoleStorage && !present, nil
	}
	n, found, err := v.Node(remove)
	if err != nil || !found || n.Spec.Role != events.RoleStorage {
		return "", "", false, err
	}
	h, present, err := v.Host(n.Spec.Host)
	if err != nil {
		return "", "", false, err
	}
	return n.Spec.Host, n.Spec.FailureDomain, present && h.StorageNodes == 1, nil
}

// indexTopology is the balance topology from the host index, every domain ever created
// included (with zero hosts when it has none left).
func indexTopology(v *projections.View) (domains.Topology, error) {
	byDomain, err := v.DomainHosts()
	if err != nil {
		return domains.Topology{}, err
	}
	ds, err := v.Domains()
	if err != nil {
		return domains.Topology{}, err
	}
	t := domains.Topology{Physical: map[string]string{}}
	for _, d := range ds {
		hosts := []string{}
		for _, h := range byDomain[d.Label] {
			hosts = append(hosts, h.Host)
			if h.Physical != "" {
				t.Physical[h.Host] = h.Physical
			}
		}
		t.Domains = append(t.Domains, domains.DomainHosts{Label: d.Label, Hosts: hosts})
	}
	return t, nil
}

func withHost(t domains.Topology, host, domain, physical string) domains.Topology {
	out := domains.Topology{Physical: maps.Clone(t.Physical)}
	if physical != "" {
		if out.Physical == nil {
			out.Physical = map[string]string{}
		}
		out.Physical[host] = physical
	}
	for _, d := range t.Domains {
		hosts := append([]string{}, d.Hosts...)
		if d.Label == domain {
			i, _ := slices.BinarySearch(hosts, host)
			hosts = slices.Insert(hosts, i, host)
		}
		out.Domains = append(out.Domains, domains.DomainHosts{Label: d.Label, Hosts: hosts})
	}
	return out
}

func withoutHost(t domains.Topology, host string) domains.Topology {
	out := domains.Topology{Physical: t.Physical}
	for _, d := range t.Domains {
		hosts := slices.DeleteFunc(append([]string{}, d.Hosts...), func(h string) bool { return h == host })
		out.Domains = append(out.Domains, domains.DomainHosts{Label: d.Label, Hosts: hosts})
	}
	return out
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
	online, err := v.OnlineHosts()
	if err != nil {
		return err
	}
	n, _, err := v.Node(node)
	if err != nil {
		return err
	}
	if n.Spec.Role == events.RoleStorage && n.Status.State == events.StateOnline {
		h, _, err := v.Host(n.Spec.Host)
		if err != nil {
			return err
		}
		if h.OnlineStorageNodes <= 1 {
			online-- // its host goes offline with it
		}
	}
	need := cl.DataChunks + cl.ParityChunks + 1
	if online < need {
		return cairn.Errorf(cairn.CodePreconditionFailed,
			"removing %s (host %s) leaves %d online storage host(s); scheme %d+%d needs at least %d to absorb a loss", node, n.Spec.Host, online, cl.DataChunks, cl.ParityChunks, need).
			WithDetails(map[string]any{"online_hosts": online, "needed": need})
	}
	return nil
}

// activateHandler decides cluster.activate: failure domains on, placement computed.
func activateHandler() decide.Handler {
	return decide.Handler{Verb: "cluster.activate", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
		var c ClusterActivate
		if err := json.Unmarshal(body, &c); err != nil {
			return decide.Decision{}, cairn.InvalidField("", "body: %v", err)
		}
		// Reads every node (the layout it activates) and the cluster.
		r := decide.NewReads(v, names)
		if err := errors.Join(r.Aggregate("cluster"), r.Aggregate("node")); err != nil {
			return decide.Decision{}, err
		}
		cl, ok, err := v.Cluster()
		if err != nil {
			return r.Decide(decide.Decision{}), err
		}
		ms, labels, err := members(v)
		if err != nil {
			return r.Decide(decide.Decision{}), err
		}
		ev, warnings, err := DecideClusterActivate(decide.Ptr(cl, ok), ms, labels)
		if err != nil {
			return r.Decide(decide.Decision{}), err
		}
		return r.Decide(decide.Decision{}.With(names.Event("cluster", cl.Name), ev, warnings)), nil
	}}
}
