package gateway

import (
	"net/http"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/zpool"
)

// listStoragePools serves every storage pool with its capacity and allocation.
func (g *Gateway) listStoragePools(w http.ResponseWriter, r *http.Request) {
	g.withView(w, func(v *projections.View) (any, error) {
		pools, err := v.StoragePools()
		return nonNil(pools), err
	})
}

// listResourceGroups serves every resource group.
func (g *Gateway) listResourceGroups(w http.ResponseWriter, r *http.Request) {
	g.withView(w, func(v *projections.View) (any, error) {
		groups, err := v.ResourceGroups()
		return nonNil(groups), err
	})
}

// listResources serves every resource definition with its volumes and replicas.
func (g *Gateway) listResources(w http.ResponseWriter, r *http.Request) {
	g.withView(w, func(v *projections.View) (any, error) {
		rds, err := v.ResourceDefinitions()
		return nonNil(rds), err
	})
}

// ReplicaView is a replica's desired state with what its node's agent last observed.
type ReplicaView struct {
	projections.Replica
	Observed *drbd.Status `json:"observed,omitempty"`
}

// ResourceView is a resource definition whose replicas carry their observed state.
type ResourceView struct {
	projections.ResourceDefinition
	Replicas []ReplicaView `json:"replicas"`
}

// getResource serves one resource definition with each replica's observed state: node,
// node id, phase, disk state and current GI per volume, replication and sync percent per
// peer (404 when unknown).
func (g *Gateway) getResource(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	g.withView(w, func(v *projections.View) (any, error) {
		rd, ok, err := v.ResourceDefinition(name)
		if err == nil && !ok {
			err = cairn.Errorf(cairn.CodeNotFound, "resource definition %s does not exist", name)
		}
		if err != nil {
			return nil, err
		}
		observed, err := v.ResourceStatus(name)
		if err != nil {
			return nil, err
		}
		out := ResourceView{ResourceDefinition: rd, Replicas: []ReplicaView{}}
		for _, rep := range rd.Replicas {
			rv := ReplicaView{Replica: rep}
			if st, ok := observed[rep.Node]; ok {
				rv.Observed = &st
			}
			out.Replicas = append(out.Replicas, rv)
		}
		return out, nil
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

// listPools serves every shared pool and its grant.
func (g *Gateway) listPools(w http.ResponseWriter, r *http.Request) {
	g.withView(w, func(v *projections.View) (any, error) {
		pools, err := v.Pools()
		return nonNil(pools), err
	})
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
