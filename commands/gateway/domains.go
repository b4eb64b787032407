// Package gateway is the operators' HTTP API: reads of every view, commands as POST,
// the audit log, metrics and health under /cairn/v1/, and LINSTOR's REST API v1 under
// /v1/ (package linstor). Commands travel over NATS to admission like any
// other client's, so the gateway holds no rules of its own.
package gateway

import (
	"net/http"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/domains"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// The failure-domain reads: domains, the placement plan and the recorded placement, health.

// DomainView is one failure domain with the hosts that count toward its balance.
type DomainView struct {
	Label string   `json:"label"`
	ID    int      `json:"id"`
	Hosts []string `json:"hosts"`
	Nodes []string `json:"nodes"`
}

// listDomains serves the domain balance: every domain (with its integer id), its
// storage hosts and nodes, and the verdict (balanced, within +-1, unbalanced).
func (g *Gateway) listDomains(w http.ResponseWriter, r *http.Request) {
	g.withView(w, func(v *projections.View) (any, error) {
		cl, nodes, ms, err := clusterMembers(v)
		if err != nil {
			return nil, err
		}
		ds, err := v.Domains()
		if err != nil {
			return nil, err
		}
		byLabel := map[string]*DomainView{}
		out := make([]*DomainView, 0, len(ds))
		labels := make([]string, 0, len(ds))
		for _, d := range ds {
			dv := &DomainView{Label: d.Label, ID: d.ID, Hosts: []string{}, Nodes: []string{}}
			byLabel[d.Label] = dv
			out = append(out, dv)
			labels = append(labels, d.Label)
		}
		for _, n := range nodes {
			if dv := byLabel[n.Spec.FailureDomain]; dv != nil {
				dv.Nodes = append(dv.Nodes, n.Spec.Name)
			}
		}
		// Every domain ever created counts, with zero hosts once its last one left: the
		// verdict is the one admission decides on.
		top := domains.BuildTopology(ms, labels...)
		for _, d := range top.Domains {
			if dv := byLabel[d.Label]; dv != nil {
				dv.Hosts = d.Hosts
			}
		}
		return map[string]any{"seq": v.Seq(), "failure_domains": cl.FailureDomains, "activated": cl.Activated,
			"verdict": top.Verdict(), "domains": out}, nil
	})
}

// clusterMembers reads the cluster (not_found before cluster.create) and its nodes, also
// as the failure-domain rules see them.
func clusterMembers(v *projections.View) (projections.Cluster, []projections.Node, []domains.Member, error) {
	cl, ok, err := v.Cluster()
	if err == nil && !ok {
		err = cairn.Errorf(cairn.CodeNotFound, "no cluster yet: send cluster.create")
	}
	if err != nil {
		return cl, nil, nil, err
	}
	nodes, err := v.Nodes()
	ms := make([]domains.Member, 0, len(nodes))
	for _, n := range nodes {
		ms = append(ms, domains.Member{Name: n.Spec.Name, Host: n.Spec.Host, Domain: n.Spec.FailureDomain, Role: n.Spec.Role, Physical: n.Spec.PhysicalLabel})
	}
	return cl, nodes, ms, err
}

// placementPlan serves the placement the rules give the current topology: the
// rotation, every host's volume store with its failover paths, the journal sets, the
// spread of one stripe and the tolerance. It is computed on each request from the views
// (a plan, not recorded state).
func (g *Gateway) placementPlan(w http.ResponseWriter, r *http.Request) {
	g.withView(w, func(v *projections.View) (any, error) {
		cl, _, ms, err := clusterMembers(v)
		if err != nil {
			return nil, err
		}
		top := domains.BuildTopology(ms)
		rot := domains.Rotation(top)
		copies := domains.JournalCopies(cl.FailureDomains, cl.ParityChunks)
		journals := make([]map[string]any, 0, len(rot))
		for i, s := range rot {
			journals = append(journals, map[string]any{"owner": s.Host, "members": domains.PlaceJournal(rot, i, copies, cl.FailureDomains)})
		}
		stores := domains.PlaceVolumeStores(rot, cl.ParityChunks)
		invariant := "ok"
		if err := domains.CheckFailoverInvariant(stores); err != nil {
			invariant = err.Error()
		}
		var labels []string
		for _, d := range top.Domains {
			labels = append(labels, d.Label)
		}
		scheme := domains.Scheme{Data: cl.DataChunks, Parity: cl.ParityChunks}
		return map[string]any{"seq": v.Seq(), "rotation": rot, "volume_stores": stores, "failover_invariant": invariant,
			"journal_copies": copies, "journal_sets": journals,
			"stripe":    domains.PlaceStripe(labels, cl.DataChunks+cl.ParityChunks),
			"tolerance": domains.ComputeTolerance(scheme, len(top.Domains))}, nil
	})
}

// recordedPlacement serves the placement recorded at activation and kept up by every
// node change since: each host's volume store with its failover paths, and each host's
// journal set.
func (g *Gateway) recordedPlacement(w http.ResponseWriter, r *http.Request) {
	g.withView(w, func(v *projections.View) (any, error) {
		stores, err := v.VolumeStores()
		if err != nil {
			return nil, err
		}
		journals, err := v.JournalSets()
		if stores == nil {
			stores = []events.StoreHosts{}
		}
		if journals == nil {
			journals = []events.JournalSet{}
		}
		return map[string]any{"seq": v.Seq(), "volume_stores": stores, "journal_sets": journals}, err
	})
}

// clusterHealth serves the cluster status (ok, degraded, suspended) with its reasons,
// from the nodes' observed state: a host is out when a storage node on it is offline or
// has failed devices.
func (g *Gateway) clusterHealth(w http.ResponseWriter, r *http.Request) {
	g.withView(w, func(v *projections.View) (any, error) {
		cl, nodes, ms, err := clusterMembers(v)
		if err != nil {
			return nil, err
		}
		down := map[string]bool{}
		for _, n := range nodes {
			if n.Spec.Role == "storage" && (n.Status.State == "offline" || n.Status.DevicesFailed > 0) {
				down[n.Spec.Host] = true
			}
		}
		h := domains.AssessHealth(domains.BuildTopology(ms), down, domains.Scheme{Data: cl.DataChunks, Parity: cl.ParityChunks}, cl.FailureDomains)
		return map[string]any{"seq": v.Seq(), "health": h}, nil
	})
}
