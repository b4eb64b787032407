package linstor

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-io/cairn/projections"
	"github.com/rs/zerolog"
)

// statsRoutes adds LINSTOR's object counts (/v1/stats/*, linstor-gui's dashboard), the
// controller's configuration (linstor-gui's connection indicator) and the space report
// (`linstor space-reporting query`, linstor-proxmox).
func (a *API) statsRoutes(mux *http.ServeMux) {
	count := func(obj uint64, of func(c projections.Counts) int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			a.withView(w, obj, func(v *projections.View) (any, error) {
				c, err := v.Counts()
				return map[string]int{"count": of(c)}, err
			})
		}
	}
	mux.HandleFunc("GET /v1/stats/nodes", count(objNode, func(c projections.Counts) int { return c.Nodes }))
	mux.HandleFunc("GET /v1/stats/resource-groups", count(objRscGrp, func(c projections.Counts) int { return c.Groups }))
	mux.HandleFunc("GET /v1/stats/resource-definitions", count(objRscDfn, func(c projections.Counts) int { return c.Definitions }))
	mux.HandleFunc("GET /v1/stats/resources", count(objRsc, func(c projections.Counts) int { return c.Replicas }))
	mux.HandleFunc("GET /v1/stats/storage-pools", count(objStorPool, func(c projections.Counts) int { return c.StoragePools }))
	mux.HandleFunc("GET /v1/stats/error-reports", func(w http.ResponseWriter, r *http.Request) {
		a.withView(w, 0, func(v *projections.View) (any, error) {
			all, err := errorReports(v, a.refusals())
			return map[string]int{"count": len(all)}, err
		})
	})
	mux.HandleFunc("GET /v1/controller/config", a.controllerConfig)
	mux.HandleFunc("GET /v1/space-report", a.spaceReport)
}

// ControllerConfig is LINSTOR's controller configuration, as far as a serve has one.
type ControllerConfig struct {
	DB    map[string]any `json:"db"`
	HTTP  map[string]any `json:"http"`
	HTTPS map[string]any `json:"https"`
	Log   map[string]any `json:"log"`
	Debug map[string]any `json:"debug"`
}

// controllerConfig answers what the serve that got the request runs with: the address
// and scheme it was reached on, its log level, and where its state lives.
func (a *API) controllerConfig(w http.ResponseWriter, r *http.Request) {
	host, port := "", 0
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		h, p, _ := net.SplitHostPort(addr.String())
		host = h
		port, _ = strconv.Atoi(p)
	}
	listener := map[string]any{"enabled": true, "listen_address": host, "port": port}
	off := map[string]any{"enabled": false}
	cfg := ControllerConfig{
		DB:    map[string]any{"connection_url": "cairn: events on NATS JetStream, views in Pebble", "version_check_disabled": false},
		HTTP:  listener,
		HTTPS: off,
		Log:   map[string]any{"level": logLevel(zerolog.GlobalLevel()), "print_stack_trace": false, "rest_access_mode": "NO_LOG"},
		Debug: map[string]any{"console_enabled": false},
	}
	if r.TLS != nil {
		cfg.HTTP, cfg.HTTPS = off, listener
	}
	writeJSON(w, http.StatusOK, cfg)
}

// logLevel is LINSTOR's name of a zerolog level (its LogLevel enum).
func logLevel(l zerolog.Level) string {
	switch {
	case l <= zerolog.TraceLevel:
		return "TRACE"
	case l == zerolog.DebugLevel:
		return "DEBUG"
	case l == zerolog.InfoLevel:
		return "INFO"
	case l == zerolog.WarnLevel:
		return "WARN"
	default:
		return "ERROR"
	}
}

// spaceReport answers LINSTOR's space report: a text (reportText) with, per storage
// pool, the space its replicas were given and its capacity, and the totals. Diskless
// pools are not in the views and take no space.
func (a *API) spaceReport(w http.ResponseWriter, r *http.Request) {
	a.withView(w, objStorPool, func(v *projections.View) (any, error) {
		var b strings.Builder
		fmt.Fprintf(&b, "Cairn space report\nGenerated: %s (views at event %d)\n\n", time.Now().UTC().Format(time.RFC3339), v.Seq())
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "Node\tStorage pool\tProvider\tAllocated KiB\tCapacity KiB\t")
		var allocated, capacity uint64
		err := v.EachStoragePool(func(sp projections.StoragePool) (bool, error) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t\n", sp.Node, sp.Name, providerKinds[sp.Provider], sp.AllocatedKiB, sp.TotalKiB())
			allocated += sp.AllocatedKiB
			capacity += sp.TotalKiB()
			return true, nil
		})
		if err != nil {
			return nil, err
		}
		if err := tw.Flush(); err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "\nTotal allocated: %d KiB\nTotal capacity: %d KiB\n", allocated, capacity)
		return map[string]string{"reportText": b.String()}, nil
	})
}
