package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/projections"
)

// atViewsKept is how many views of past sequences a serve keeps built (each is a replay
// of the stream up to its sequence, held in memory).
const atViewsKept = 2

type atView struct {
	seq uint64
	db  *projections.DB
}

// atSeq serves GET /cairn/v1/at/{seq}/{rest}: the read {rest} (nodes, resources, domains,
// health, pools, … as under /cairn/v1/) on the views as they were right after the event
// at stream sequence seq, built by replaying the stream up to it (the last two kept); and
// GET /cairn/v1/at/{seq}/diff?with=now|N: what differs between the two moments. Agents'
// reports are not events: the past views hold no observed state. Refuses
// invalid_argument for a sequence that is not a number or not stored yet.
func (g *Gateway) atSeq(w http.ResponseWriter, r *http.Request) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || seq == 0 {
		writeError(w, cairn.InvalidField("seq", "seq must be a stream sequence (1 or more), got %q", r.PathValue("seq")))
		return
	}
	last, err := g.Store.LastSeq(r.Context())
	if err != nil {
		writeError(w, cairn.Errorf(cairn.CodeUnavailable, "read events: %v", err))
		return
	}
	if seq > last {
		writeError(w, cairn.InvalidField("seq", "the stream holds events up to sequence %d, not %d", last, seq))
		return
	}
	db, err := g.viewsAt(r, seq)
	if err != nil {
		writeError(w, cairn.Errorf(cairn.CodeUnavailable, "views at %d: %v", seq, err))
		return
	}
	rest := r.PathValue("rest")
	if rest == "diff" {
		g.diffViews(w, r, db, last)
		return
	}
	past := &Gateway{DB: db, Store: g.Store}
	mux := http.NewServeMux()
	past.readRoutes(mux)
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/cairn/v1/" + rest
	r2.URL.RawPath = ""
	if _, pattern := mux.Handler(r2); pattern == "" {
		writeError(w, cairn.Errorf(cairn.CodeNotFound, "no read %s as of a sequence", rest))
		return
	}
	mux.ServeHTTP(w, r2) // (ServeHTTP sets the path's wildcards; Handler's handler would not)
}

// viewsAt returns the views as of seq, building them when not kept.
func (g *Gateway) viewsAt(r *http.Request, seq uint64) (*projections.DB, error) {
	g.atMu.Lock()
	defer g.atMu.Unlock()
	for _, v := range g.atViews {
		if v.seq == seq {
			return v.db, nil
		}
	}
	db, err := g.At(r.Context(), seq)
	if err != nil {
		return nil, err
	}
	g.atViews = append(g.atViews, atView{seq, db})
	if len(g.atViews) > atViewsKept {
		// Requests still reading the oldest hold their own snapshot of it; closing the
		// store under them fails their read, which they answer as unavailable.
		_ = g.atViews[0].db.Close()
		g.atViews = g.atViews[1:]
	}
	return db, nil
}

// diffViews answers what differs between the views in then and those at ?with= (now,
// the default, or another sequence): nodes and resource definitions added, removed and
// changed, by name.
func (g *Gateway) diffViews(w http.ResponseWriter, r *http.Request, then *projections.DB, last uint64) {
	other := g.DB
	with := r.URL.Query().Get("with")
	if with != "" && with != "now" {
		seq, err := strconv.ParseUint(with, 10, 64)
		if err != nil || seq == 0 || seq > last {
			writeError(w, cairn.InvalidField("with", "with must be now or a stored sequence (1..%d), got %q", last, with))
			return
		}
		if other, err = g.viewsAt(r, seq); err != nil {
			writeError(w, cairn.Errorf(cairn.CodeUnavailable, "views at %d: %v", seq, err))
			return
		}
	}
	a, err := then.Read()
	if err != nil {
		writeError(w, cairn.Errorf(cairn.CodeUnavailable, "views unreadable: %v", err))
		return
	}
	defer a.Close()
	b, err := other.Read()
	if err != nil {
		writeError(w, cairn.Errorf(cairn.CodeUnavailable, "views unreadable: %v", err))
		return
	}
	defer b.Close()
	out := map[string]any{"from_seq": a.Seq(), "to_seq": b.Seq()}
	for _, kind := range []struct {
		key  string
		read func(*projections.View) (map[string][]byte, error)
	}{{"nodes", nodeDocs}, {"resources", definitionDocs}} {
		x, err := kind.read(a)
		if err == nil {
			var y map[string][]byte
			if y, err = kind.read(b); err == nil {
				out[kind.key] = diffDocs(x, y)
			}
		}
		if err != nil {
			writeError(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// diffDocs compares two sets of named documents.
func diffDocs(a, b map[string][]byte) map[string][]string {
	d := map[string][]string{"added": {}, "removed": {}, "changed": {}}
	for name, doc := range a {
		if other, ok := b[name]; !ok {
			d["removed"] = append(d["removed"], name)
		} else if !bytes.Equal(doc, other) {
			d["changed"] = append(d["changed"], name)
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			d["added"] = append(d["added"], name)
		}
	}
	for _, l := range d {
		slices.Sort(l)
	}
	return d
}

func nodeDocs(v *projections.View) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := v.EachNode("", func(n projections.Node) (bool, error) {
		b, err := json.Marshal(n.Spec) // the spec: the state changes with every heartbeat timeout
		out[n.Spec.Name] = b
		return true, err
	})
	return out, err
}

func definitionDocs(v *projections.View) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := v.EachResourceDefinition(func(rd projections.ResourceDefinition) (bool, error) {
		b, err := json.Marshal(rd)
		out[rd.Name] = b
		return true, err
	})
	return out, err
}
