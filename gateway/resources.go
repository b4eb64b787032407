package gateway

import (
	"net/http"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/projections"
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

// getResource serves one resource definition (404 when unknown).
func (g *Gateway) getResource(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	g.withView(w, func(v *projections.View) (any, error) {
		rd, ok, err := v.ResourceDefinition(name)
		if err == nil && !ok {
			err = cairn.Errorf(cairn.CodeNotFound, "resource definition %s does not exist", name)
		}
		return rd, err
	})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
