package gateway

import (
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/gateway/linstor"
	"github.com/cairn-io/cairn/metricset"
)

var metricsHandler = metricset.ServeHandler()

// Starting is the HTTP handler of a serve that is still catching its views up: probes
// and metrics answer (`/healthz` 200, `/readyz` 503 saying how far the views are), every
// other request 503 (unavailable; LINSTOR's shape under /v1/). Ready swaps in the real
// handler once the serve is up.
type Starting struct {
	// Progress says why the serve is not ready yet (server's ready check).
	Progress func() error
	handler  atomic.Pointer[http.Handler]
}

// Ready makes every request go to h from now on.
func (s *Starting) Ready(h http.Handler) { s.handler.Store(&h) }

// ServeHTTP implements http.Handler.
func (s *Starting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.handler.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	msg := "starting"
	if err := s.Progress(); err != nil {
		msg = "starting: " + err.Error()
	}
	switch {
	case r.URL.Path == "/healthz":
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	case r.URL.Path == "/metrics":
		metricsHandler.ServeHTTP(w, r)
	case strings.HasPrefix(r.URL.Path, "/v1/"):
		linstor.WriteAuthError(w, http.StatusServiceUnavailable, false, msg)
	default:
		writeError(w, cairn.Errorf(cairn.CodeUnavailable, "%s", msg))
	}
}
