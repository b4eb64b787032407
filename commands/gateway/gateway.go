// Package gateway is the operators' HTTP API: reads of every view, commands as POST,
// the audit log, metrics and health under /cairn/v1/, and LINSTOR's REST API v1 under
// /v1/ (package linstor). Commands travel over NATS to admission like any
// other client's, so the gateway holds no rules of its own.
package gateway

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/commands/gateway/linstor"
	"github.com/cairn-io/cairn/commands/gateway/ui"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backup"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Liveness tells when a node's agent was last heard from.
type Liveness interface {
	LastHeartbeat(node string) (time.Time, bool)
}

// Gateway serves the HTTP API.
type Gateway struct {
	NC       *nats.Conn
	Store    *events.Store
	DB       *projections.DB
	Liveness Liveness
	// Ready reports whether the process serves current views (projector caught up).
	Ready func() error
	// CommandTimeout bounds a command's round trip (30 s).
	CommandTimeout time.Duration
	// Leader reports who holds the side-effect lease (cmd/cairn/server/lease.Info); nil: no route.
	Leader func() any
	// Auth admits requests by token; nil: no authentication (loopback only, see serve).
	Auth *Authenticator
	// Policies reports what each policy is doing (its settings, what it waits for, its
	// recent decisions); nil: no route.
	Policies func() any
	// Refusals lists the commands this serve refused lately (admission.Admission.
	// RecentRefusals); nil: none.
	Refusals func() []admission.Refusal
	// StreamBuffer is how many events a subscriber of GET /cairn/v1/events/stream may be
	// behind before it is cut off (DefaultStreamBuffer).
	StreamBuffer int
	// At builds the views as of stream sequence seq into a store of their own (a replay
	// of the stream up to seq, for /cairn/v1/at/{seq}/…); nil: no such routes.
	At func(ctx context.Context, seq uint64) (*projections.DB, error)
	// Remotes opens a remote's object store with its secret (the serve's RemoteStore);
	// nil: no backup routes but the list of remotes.
	Remotes func(name string) (backup.Store, error)
	// Received is this cluster's store of the backups other clusters ship to it (the
	// received routes); nil: no such routes.
	Received backup.Store

	atMu    sync.Mutex
	atViews []atView // the last views built, newest last
}

// Handler returns the routes.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := g.Ready(); err != nil {
			writeError(w, cairn.Errorf(cairn.CodeUnavailable, "%v", err))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	})
	// LINSTOR's controller health check (linstor-proxmox probes it to find a controller):
	// 200 with an empty body when this serve is ready, else 503 saying why.
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if err := g.Ready(); err != nil {
			writeError(w, cairn.Errorf(cairn.CodeUnavailable, "%v", err))
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /metrics", g.metrics)
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound)) // a browser at the address gets the dashboard
	g.readRoutes(mux)
	if g.At != nil {
		mux.HandleFunc("GET /cairn/v1/at/{seq}/{rest...}", g.atSeq)
	}
	if g.Leader != nil {
		mux.HandleFunc("GET /cairn/v1/leader", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, g.Leader()) })
	}
	if g.Policies != nil {
		mux.HandleFunc("GET /cairn/v1/policies", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, g.Policies()) })
	}
	g.backupRoutes(mux)
	g.receivedRoutes(mux)
	mux.HandleFunc("GET /cairn/v1/events", g.listEvents)
	mux.HandleFunc("GET /cairn/v1/events/stream", g.streamEvents)
	mux.HandleFunc("GET /cairn/v1/status/stream", g.streamStatus)
	mux.HandleFunc("GET /cairn/v1/views/digest", g.digest)
	mux.HandleFunc("POST /cairn/v1/commands/{verb}", g.postCommand)
	mux.HandleFunc("GET /cairn/v1/tokens", g.listTokens)
	mux.HandleFunc("GET /cairn/v1/whoami", g.whoami)
	mux.Handle("GET /ui/", ui.Handler())
	mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	mux.HandleFunc("GET /v1/events/drbd/promotion", g.promotionEvents) // LINSTOR's, served from the status stream
	var status linstor.StatusOf
	if g.Store != nil {
		status = linstor.StatusFrom(g.Store.LastStatus, g.Store.Names().Status)
	}
	(&linstor.API{Send: g.Send, DB: g.DB, Version: cairn.Version, Refusals: g.Refusals, Remotes: g.Remotes, Status: status,
		Actor: func(r *http.Request) string { return actorOf(r, "linstor:"+r.RemoteAddr) }}).Register(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allowed := allowedMethods(mux, r); len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"ok": false, "error": cairn.Errorf(cairn.CodeInvalidArgument,
				"%s %s: this path answers %s", r.Method, r.URL.Path, strings.Join(allowed, ", "))})
			return
		}
		writeError(w, cairn.Errorf(cairn.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	if g.Auth != nil {
		return withPretty(g.Auth.Wrap(mux))
	}
	return withPretty(mux)
}

// listTokens serves every token (revoked ones too) without its hash: name, role,
// creator, creation, expiry and revocation.
func (g *Gateway) listTokens(w http.ResponseWriter, r *http.Request) {
	g.withView(w, func(v *projections.View) (any, error) {
		tokens, err := v.Tokens()
		for i := range tokens {
			tokens[i].Hash = ""
		}
		return map[string]any{"seq": v.Seq(), "tokens": nonNil(tokens)}, err
	})
}

// allowedMethods lists the methods another route of mux answers for r's path (none: the
// path is unknown), so that a wrong method is told 405 rather than 404.
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
			out = append(out, m)
		}
	}
	return out
}

// whoami answers who the request's token is: {"authenticated": true, "name", "role"};
// without authentication (a loopback serve without --http-auth) every caller may do
// everything: {"authenticated": false, "role": "admin"}. The dashboard shows command
// buttons by it.
func (g *Gateway) whoami(w http.ResponseWriter, r *http.Request) {
	if p, ok := PrincipalOf(r); ok {
		writeJSON(w, http.StatusOK, map[string]any{"authenticated": true, "name": p.Name, "role": p.Role})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"authenticated": false, "role": events.RoleAdmin})
}

// readRoutes are the reads of the views: the same on the current views and, under
// /cairn/v1/at/{seq}/, on the views as of a sequence.
func (g *Gateway) readRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /cairn/v1/cluster", g.getCluster)
	mux.HandleFunc("GET /cairn/v1/nodes", g.listNodes)
	mux.HandleFunc("GET /cairn/v1/nodes/{name}", g.getNode)
	mux.HandleFunc("GET /cairn/v1/domains", g.listDomains)
	mux.HandleFunc("GET /cairn/v1/placement", g.placementPlan)
	mux.HandleFunc("GET /cairn/v1/health", g.clusterHealth)
	mux.HandleFunc("GET /cairn/v1/volume-stores", g.recordedPlacement)
	mux.HandleFunc("GET /cairn/v1/storage-pools", g.listStoragePools)
	mux.HandleFunc("GET /cairn/v1/resource-groups", g.listResourceGroups)
	mux.HandleFunc("GET /cairn/v1/resources", g.listResources)
	mux.HandleFunc("GET /cairn/v1/resources/{name}", g.getResource)
	mux.HandleFunc("GET /cairn/v1/resources/{name}/snapshots", g.listSnapshots)
	mux.HandleFunc("GET /cairn/v1/resources/{name}/snapshots/{snap}", g.getSnapshot)
	mux.HandleFunc("GET /cairn/v1/pools", g.listPools)
	mux.HandleFunc("GET /cairn/v1/pools/{name}", g.getPool)
}

var metricNodes = promauto.NewGaugeVec(prometheus.GaugeOpts{Name: "cairn_nodes",
	Help: "Nodes in the cluster by state (online, offline), as this serve's views have them at the scrape: alert on offline > 0."}, []string{"state"})

// metrics serves /metrics, counting the nodes by state from the views first.
func (g *Gateway) metrics(w http.ResponseWriter, r *http.Request) {
	if v, err := g.DB.Read(); err == nil {
		counts := map[string]float64{events.StateOnline: 0, events.StateOffline: 0}
		_ = v.EachNode("", func(n projections.Node) (bool, error) {
			counts[n.Status.State]++
			return true, nil
		})
		v.Close()
		for state, n := range counts {
			metricNodes.WithLabelValues(state).Set(n)
		}
	}
	metricsHandler.ServeHTTP(w, r)
}
