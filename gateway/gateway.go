// Package gateway is the operators' HTTP API: reads of every view, commands as POST,
// the audit log, metrics and health under /cairn/v1/, and LINSTOR's REST API v1 under
// /v1/ (package linstor). Commands travel over NATS to admission like any
// other client's, so the gateway holds no rules of its own.
package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands"
	"github.com/cairn-io/cairn/commands/domains"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/gateway/linstor"
	"github.com/cairn-io/cairn/projections"
	"github.com/nats-io/nats.go"
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
	// Leader reports who holds the side-effect lease (server/lease.Info); nil: no route.
	Leader func() any
	// Auth admits requests by token; nil: no authentication (loopback only, see serve).
	Auth *Authenticator
	// Refusals lists the commands this serve refused lately (commands.Admission.
	// RecentRefusals); nil: none.
	Refusals func() []commands.Refusal
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
	mux.Handle("GET /metrics", metricsHandler)
	mux.HandleFunc("GET /cairn/v1/cluster", g.getCluster)
	if g.Leader != nil {
		mux.HandleFunc("GET /cairn/v1/leader", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, g.Leader()) })
	}
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
	mux.HandleFunc("GET /cairn/v1/events", g.listEvents)
	mux.HandleFunc("GET /cairn/v1/views/digest", g.digest)
	mux.HandleFunc("POST /cairn/v1/commands/{verb}", g.postCommand)
	mux.HandleFunc("GET /cairn/v1/tokens", g.listTokens)
	(&linstor.API{Send: g.Send, DB: g.DB, Version: cairn.Version, Refusals: g.Refusals, Actor: func(r *http.Request) string {
		return actorOf(r, "linstor:"+r.RemoteAddr)
	}}).Register(mux)
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
		return g.Auth.Wrap(mux)
	}
	return mux
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

// listNodes serves the nodes, a page at a time as every list (see listPage).
func (g *Gateway) listNodes(w http.ResponseWriter, r *http.Request) {
	after, limit, err := pageQuery(r)
	if err != nil {
		writeError(w, err)
		return
	}
	g.withView(w, func(v *projections.View) (any, error) {
		nodes, err := v.Nodes()
		out := map[string]any{"seq": v.Seq()}
		page := make([]NodeView, 0, min(len(nodes), limit))
		for _, n := range nodes {
			if n.Spec.Name <= after && after != "" {
				continue
			}
			if len(page) == limit {
				out["next"] = page[len(page)-1].Name
				break
			}
			page = append(page, g.nodeView(n))
		}
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

func (g *Gateway) digest(w http.ResponseWriter, r *http.Request) {
	d, err := g.DB.Digest()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// listEvents serves the audit log: ?subject=&type=&actor=&command_id=&from_seq=&to_seq=
// &since=&until= (RFC 3339) &limit= (default 100, at most 10000). The answer is
// {"events": [...], "next": S} with next the from_seq of the following page when the
// page is full (absent otherwise). A query for a command id the views know reads only
// that command's events (the views index every accepted command's sequences).
func (g *Gateway) listEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rng, match, limit, err := ParseAuditQuery(q.Get, 100)
	if err != nil {
		writeError(w, err)
		return
	}
	if match.CommandID != "" && g.DB != nil {
		if from, to, ok := g.commandSeqs(match.CommandID); ok {
			rng.FromSeq, rng.ToSeq = max(rng.FromSeq, from), min(nonZero(rng.ToSeq, to), to)
			if rng.FromSeq > rng.ToSeq {
				writeJSON(w, http.StatusOK, map[string]any{"events": []events.Record{}})
				return
			}
		}
	}
	out := []events.Record{}
	err = g.Store.Audit(r.Context(), rng, match, limit, func(rec events.Record) bool {
		out = append(out, rec)
		return true
	})
	if err != nil {
		writeError(w, cairn.Errorf(cairn.CodeUnavailable, "read events: %v", err))
		return
	}
	resp := map[string]any{"events": out}
	if limit > 0 && len(out) == limit {
		resp["next"] = out[len(out)-1].Seq + 1
	}
	writeJSON(w, http.StatusOK, resp)
}

// commandSeqs is the range of sequences of an accepted command's events, from the views.
func (g *Gateway) commandSeqs(id string) (from, to uint64, ok bool) {
	v, err := g.DB.Read()
	if err != nil {
		return 0, 0, false
	}
	defer v.Close()
	rec, ok, err := v.Command(id)
	if err != nil || !ok || len(rec.Events) == 0 {
		return 0, 0, false
	}
	from, to = rec.Events[0].Seq, rec.Events[0].Seq
	for _, e := range rec.Events {
		from, to = min(from, e.Seq), max(to, e.Seq)
	}
	return from, to, true
}

func nonZero(v, otherwise uint64) uint64 {
	if v == 0 {
		return otherwise
	}
	return v
}

// ParseAuditQuery reads audit filters from named parameters (HTTP query or CLI flags).
// Errors are invalid_argument naming the parameter.
func ParseAuditQuery(get func(string) string, defaultLimit int) (events.Range, events.Match, int, error) {
	var rng events.Range
	var err error
	rng.Subject = get("subject")
	parseSeq := func(name string) uint64 {
		s := get(name)
		if s == "" || err != nil {
			return 0
		}
		v, perr := strconv.ParseUint(s, 10, 64)
		if perr != nil {
			err = cairn.InvalidField(name, "%s must be a sequence number, got %q", name, s)
		}
		return v
	}
	parseTime := func(name string) time.Time {
		s := get(name)
		if s == "" || err != nil {
			return time.Time{}
		}
		t, perr := time.Parse(time.RFC3339Nano, s)
		if perr != nil {
			err = cairn.InvalidField(name, "%s must be an RFC 3339 time, got %q", name, s)
		}
		return t
	}
	rng.FromSeq = parseSeq("from_seq")
	rng.ToSeq = parseSeq("to_seq")
	rng.Since = parseTime("since")
	rng.Until = parseTime("until")
	limit := defaultLimit
	if s := get("limit"); s != "" && err == nil {
		l, perr := strconv.Atoi(s)
		if perr != nil || l < 0 || l > 10000 {
			err = cairn.InvalidField("limit", "limit must be 0..10000, got %q", s)
		}
		limit = l
	}
	if err == nil && rng.ToSeq > 0 && rng.FromSeq > rng.ToSeq {
		err = cairn.InvalidField("from_seq", "from_seq %d is after to_seq %d", rng.FromSeq, rng.ToSeq)
	}
	return rng, events.Match{Type: get("type"), Actor: get("actor"), CommandID: get("command_id")}, limit, err
}

func (g *Gateway) postCommand(w http.ResponseWriter, r *http.Request) {
	verb := r.PathValue("verb")
	const limit = 1 << 20
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		writeError(w, cairn.Errorf(cairn.CodePayloadTooLarge, "request body over %d bytes", limit))
		return
	}
	hdr := nats.Header{}
	for _, h := range []string{commands.HeaderCommandID, commands.HeaderCorrelationID, commands.HeaderCausationID} {
		if v := r.Header.Get(h); v != "" {
			hdr.Set(h, v)
		}
	}
	actor := r.Header.Get(commands.HeaderActor)
	if actor == "" {
		actor = "http:" + r.RemoteAddr
	}
	actor = actorOf(r, actor)
	reply, err := g.Send(r.Context(), verb, body, actor, hdr)
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if !reply.OK {
		status = HTTPStatus(reply.Error.Code)
	}
	writeJSON(w, status, reply)
}

// actorOf is the actor of a request's commands: its token's name ("token:<name>", which
// no header can change) when it was authenticated, otherwise fallback.
func actorOf(r *http.Request, fallback string) string {
	if p, ok := PrincipalOf(r); ok {
		return "token:" + p.Name
	}
	return fallback
}

// Send sends one command to admission over NATS, as actor, with extra headers (command,
// correlation and causation ids; nil for none), and returns admission's reply. Errors are
// *cairn.Error: payload_too_large for a body the NATS server cannot carry, unavailable
// when admission does not answer within CommandTimeout, internal for an unreadable reply.
func (g *Gateway) Send(ctx context.Context, verb string, body []byte, actor string, hdr nats.Header) (commands.Reply, error) {
	// Checked here, before the publish: a body over the NATS server's max payload (1 MiB
	// by default, less on some clusters) would fail the publish and read as unavailable.
	if maxp := g.NC.MaxPayload(); maxp > 0 && int64(len(body)) > maxp-4096 {
		return commands.Reply{}, cairn.Errorf(cairn.CodePayloadTooLarge, "request body of %d bytes is over what the NATS server carries (%d bytes, less headers)", len(body), maxp)
	}
	m := nats.NewMsg(g.Store.Names().Command(verb))
	m.Data = body
	for k, v := range hdr {
		m.Header[k] = v
	}
	m.Header.Set(commands.HeaderActor, actor)
	timeout := g.CommandTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := g.NC.RequestMsgWithContext(ctx, m)
	if err != nil {
		return commands.Reply{}, cairn.Errorf(cairn.CodeUnavailable, "admission did not answer %s: %v", verb, err)
	}
	var reply commands.Reply
	if err := json.Unmarshal(resp.Data, &reply); err != nil {
		return commands.Reply{}, cairn.Errorf(cairn.CodeInternal, "unreadable reply from admission")
	}
	return reply, nil
}

// HTTPStatus maps an error code to its HTTP status; this is the only place that does.
func HTTPStatus(code string) int {
	switch code {
	case cairn.CodeInvalidArgument:
		return http.StatusBadRequest
	case cairn.CodeNotFound, cairn.CodeUnknownCommand:
		return http.StatusNotFound
	case cairn.CodeAlreadyExists, cairn.CodeConflict, cairn.CodeIdempotencyMismatch:
		return http.StatusConflict
	case cairn.CodePreconditionFailed, cairn.CodeDomainUnbalanced:
		return http.StatusUnprocessableEntity
	case cairn.CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case cairn.CodeUnauthorized:
		return http.StatusForbidden
	case cairn.CodeUnauthenticated:
		return http.StatusUnauthorized
	case cairn.CodeRateLimited:
		return http.StatusTooManyRequests
	case cairn.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, err error) {
	e := cairn.AsError(err)
	writeJSON(w, HTTPStatus(e.Code), map[string]any{"ok": false, "error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
