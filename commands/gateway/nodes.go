// Package gateway is the operators' HTTP API: reads of every view, commands as POST,
// the audit log, metrics and health under /cairn/v1/, and LINSTOR's REST API v1 under
// /v1/ (package linstor). Commands travel over NATS to admission like any
// other client's, so the gateway holds no rules of its own.
package gateway

import (
	"net/http"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/projections"
)

// The cluster and node reads.

// NodeView is a node as the API shows it: spec and observed status apart.
type NodeView struct {
	Name          string                 `json:"name"`
	Spec          projections.NodeSpec   `json:"spec"`
	Status        projections.NodeStatus `json:"status"`
	LastHeartbeat *time.Time             `json:"last_heartbeat,omitempty"`
}

func (g *Gateway) nodeView(n projections.Node) NodeView {
	nv := NodeView{Name: n.Spec.Name, Spec: n.Spec, Status: n.Status}
	if g.Liveness != nil {
		if t, ok := g.Liveness.LastHeartbeat(n.Spec.Name); ok {
			nv.LastHeartbeat = &t
		}
	}
	return nv
}

func (g *Gateway) withView(w http.ResponseWriter, fn func(v *projections.View) (any, error)) {
	v, err := g.DB.Read()
	if err != nil {
		writeError(w, cairn.Errorf(cairn.CodeUnavailable, "views unreadable: %v", err))
		return
	}
	defer v.Close()
	out, err := fn(v)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (g *Gateway) getCluster(w http.ResponseWriter, r *http.Request) {
	g.withView(w, func(v *projections.View) (any, error) {
		c, ok, err := v.Cluster()
		if err == nil && !ok {
			err = cairn.Errorf(cairn.CodeNotFound, "no cluster yet: send cluster.create")
		}
		return map[string]any{"seq": v.Seq(), "cluster": c}, err
	})
}

// listNodes serves the nodes, a page at a time as every list (see listPage), in the
// views' key order: the page resumes past the keys of the node named by after
// (projections.View.EachNode), and reads no further than the page.
func (g *Gateway) listNodes(w http.ResponseWriter, r *http.Request) {
	after, limit, err := pageQuery(r)
	if err != nil {
		writeError(w, err)
		return
	}
	g.withView(w, func(v *projections.View) (any, error) {
		out := map[string]any{"seq": v.Seq()}
		page := make([]NodeView, 0, min(limit, 64))
		err := v.EachNode(after, func(n projections.Node) (bool, error) {
			if len(page) == limit {
				out["next"] = page[len(page)-1].Name
				return false, nil
			}
			page = append(page, g.nodeView(n))
			return true, nil
		})
		out["nodes"] = page
		return out, err
	})
}

func (g *Gateway) getNode(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	g.withView(w, func(v *projections.View) (any, error) {
		n, ok, err := v.Node(name)
		if err == nil && !ok {
			err = cairn.Errorf(cairn.CodeNotFound, "node %s is not in the cluster", name)
		}
		return g.nodeView(n), err
	})
}
