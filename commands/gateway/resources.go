package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/zpool"
)

// Lists answer {"seq": S, "<items>": [...], "next": C}: one page in name order of at
// most ?limit= items (default 1,000, at most 10,000) after ?after= (the "next" of the
// previous page; absent on the last page).

// pageQuery reads ?limit= and ?after=; errors are invalid_argument naming the parameter.
func pageQuery(r *http.Request) (after string, limit int, err error) {
	limit = 1000
	if s := r.URL.Query().Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > 10000 {
			return "", 0, cairn.InvalidField("limit", "limit must be 1..10000, got %q", s)
		}
	}
	return r.URL.Query().Get("after"), limit, nil
}

// listPage serves one page of a list (projections.PagesRaw) under key.
func listPage(g *Gateway, w http.ResponseWriter, r *http.Request, list, key string) {
	after, limit, err := pageQuery(r)
	if err != nil {
		writeError(w, err)
		return
	}
	g.withView(w, func(v *projections.View) (any, error) {
		// The items as the views hold them (their JSON is the list's item), not
		// decoded and encoded again.
		// ?prefix= keeps the names that start with it (a search at any size: the page
		// is read from the prefix's first key, never the whole list).
		prefix := r.URL.Query().Get("prefix")
		if prefix != "" {
			if after != "" && !strings.HasPrefix(after, prefix) {
				if after > prefix {
					return map[string]any{"seq": v.Seq(), key: []json.RawMessage{}}, nil
				}
				after = ""
			}
			after = strings.TrimPrefix(after, prefix)
		}
		p, err := projections.PagesRaw(v, list+prefix, after, limit)
		if p.Next != "" {
			p.Next = prefix + p.Next
		}
		items := make([]json.RawMessage, len(p.Items))
		for i, raw := range p.Items {
			items[i] = raw
		}
		out := map[string]any{"seq": v.Seq(), key: items}
		if p.Next != "" {
			out["next"] = p.Next
		}
		return out, err
	})
}

// listStoragePools serves the storage pools with their capacity and allocation (cursor
// <node>/<pool>).
func (g *Gateway) listStoragePools(w http.ResponseWriter, r *http.Request) {
	listPage(g, w, r, projections.ListStoragePools, "storage_pools")
}

// listResourceGroups serves the resource groups.
func (g *Gateway) listResourceGroups(w http.ResponseWriter, r *http.Request) {
	listPage(g, w, r, projections.ListResourceGroups, "resource_groups")
}

// listResources serves the resource definitions with their volumes and replicas;
// ?resource_group= keeps those of one group, ?node= those with a replica on one node
// (pages from the views' indexes).
func (g *Gateway) listResources(w http.ResponseWriter, r *http.Request) {
	group, node := r.URL.Query().Get("resource_group"), r.URL.Query().Get("node")
	if group == "" && node == "" {
		listPage(g, w, r, projections.ListResourceDefinitions, "resources")
		return
	}
	if group != "" && node != "" {
		writeError(w, cairn.InvalidField("node", "filter by resource_group or by node, not both"))
		return
	}
	after, limit, err := pageQuery(r)
	if err != nil {
		writeError(w, err)
		return
	}
	g.withView(w, func(v *projections.View) (any, error) {
		names, next, err := v.DefinitionNamesPage(group, node, after, limit)
		items := make([]projections.ResourceDefinition, 0, len(names))
		for _, name := range names {
			if err != nil {
				break
			}
			var rd projections.ResourceDefinition
			var ok bool
			if rd, ok, err = v.ResourceDefinition(name); ok {
				items = append(items, rd)
			}
		}
		out := map[string]any{"seq": v.Seq(), "resources": items}
		if next != "" {
			out["next"] = next
		}
		return out, err
	})
}

// ReplicaView is a replica's desired state with what its node's agent last observed.
// On a node that is not online, Observed is that agent's last report (stale: the host
// may be gone), NodeState says so, and the replica does not count as UpToDate.
type ReplicaView struct {
	projections.Replica
	NodeState string       `json:"node_state"`
	UpToDate  bool         `json:"up_to_date"`
	Observed  *drbd.Status `json:"observed,omitempty"`
}

// ResourceView is a resource definition whose replicas carry their observed state,
// with how many disks are UpToDate (on online nodes, by their own current reports)
// against the group's place count: degraded when fewer.
type ResourceView struct {
	projections.ResourceDefinition
	Replicas   []ReplicaView `json:"replicas"`
	UpToDate   int           `json:"up_to_date"`
	PlaceCount int           `json:"place_count,omitempty"`
	Degraded   bool          `json:"degraded"`
}

// observedDefinition reads a definition (not_found when unknown) and what its nodes'
// agents last reported of it, by node.
func observedDefinition(v *projections.View, name string) (projections.ResourceDefinition, map[string]drbd.Status, error) {
	rd, ok, err := v.ResourceDefinition(name)
	if err == nil && !ok {
		err = cairn.Errorf(cairn.CodeNotFound, "resource definition %s does not exist", name)
	}
	if err != nil {
		return rd, nil, err
	}
	observed, err := v.ResourceStatus(name)
	return rd, observed, err
}

// getResource serves one resource definition with each replica's observed state: node,
// node id, phase, disk state and current GI per volume, replication and sync percent per
// peer (404 when unknown).
func (g *Gateway) getResource(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	g.withView(w, func(v *projections.View) (any, error) {
		rd, observed, err := observedDefinition(v, name)
		if err != nil {
			return nil, err
		}
		out := ResourceView{ResourceDefinition: rd, Replicas: []ReplicaView{}}
		diskful := 0
		for _, rep := range rd.Replicas {
			n, _, err := v.Node(rep.Node)
			if err != nil {
				return nil, err
			}
			rv := ReplicaView{Replica: rep, NodeState: n.Status.State}
			if st, ok := observed[rep.Node]; ok {
				rv.Observed = &st
			}
			rv.UpToDate = !rep.Diskless && n.Status.State == events.StateOnline && projections.ReplicaUpToDate(rd, rep, observed)
			if rv.UpToDate {
				out.UpToDate++
			}
			if !rep.Diskless {
				diskful++
			}
			out.Replicas = append(out.Replicas, rv)
		}
		out.PlaceCount = diskful
		if rd.ResourceGroup != "" {
			if g, ok, err := v.ResourceGroup(rd.ResourceGroup); err != nil {
				return nil, err
			} else if ok && g.PlaceCount > 0 {
				out.PlaceCount = g.PlaceCount
			}
		}
		out.Degraded = out.UpToDate < out.PlaceCount
		return out, nil
	})
}

// SnapshotView is a snapshot of a definition with what each of its nodes last
// reported of it.
type SnapshotView struct {
	projections.RDSnapshot
	Observed map[string]drbd.SnapshotStatus `json:"observed"`
}

// snapshotsOf returns the definition's snapshots (all, or only name) with their nodes'
// reports.
func snapshotsOf(v *projections.View, rdName, name string) ([]SnapshotView, error) {
	rd, observed, err := observedDefinition(v, rdName)
	if err != nil {
		return nil, err
	}
	out := []SnapshotView{}
	for _, s := range rd.Snapshots {
		if name != "" && s.Name != name {
			continue
		}
		sv := SnapshotView{RDSnapshot: s, Observed: map[string]drbd.SnapshotStatus{}}
		for _, node := range s.Nodes {
			for _, ss := range observed[node].Snapshots {
				if ss.Name == s.Name && ss.Seq == s.StartedSeq {
					sv.Observed[node] = ss
				}
			}
		}
		out = append(out, sv)
	}
	if name != "" && len(out) == 0 {
		return nil, cairn.Errorf(cairn.CodeNotFound, "resource definition %s has no snapshot %s", rdName, name)
	}
	return out, nil
}

// listSnapshots serves GET /cairn/v1/resources/{name}/snapshots.
func (g *Gateway) listSnapshots(w http.ResponseWriter, r *http.Request) {
	g.withView(w, func(v *projections.View) (any, error) {
		snaps, err := snapshotsOf(v, r.PathValue("name"), "")
		return map[string]any{"snapshots": snaps}, err
	})
}

// getSnapshot serves GET /cairn/v1/resources/{name}/snapshots/{snap}.
func (g *Gateway) getSnapshot(w http.ResponseWriter, r *http.Request) {
	g.withView(w, func(v *projections.View) (any, error) {
		snaps, err := snapshotsOf(v, r.PathValue("name"), r.PathValue("snap"))
		if err != nil {
			return nil, err
		}
		return snaps[0], nil
	})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// PoolView is a shared pool with what each node's agent last reported about it.
type PoolView struct {
	projections.Pool
	Observed map[string]zpool.Status `json:"observed"`
}

// listPools serves the shared pools and their grants.
func (g *Gateway) listPools(w http.ResponseWriter, r *http.Request) {
	listPage(g, w, r, projections.ListPools, "pools")
}

// getPool serves one pool with its owner, contested flag and per-node observed status
// (activity-check verdicts, import state).
func (g *Gateway) getPool(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	g.withView(w, func(v *projections.View) (any, error) {
		p, ok, err := v.Pool(name)
		if err == nil && !ok {
			err = cairn.Errorf(cairn.CodeNotFound, "pool %s does not exist", name)
		}
		if err != nil {
			return nil, err
		}
		obs, err := v.PoolStatus(name)
		return PoolView{Pool: p, Observed: obs}, err
	})
}
