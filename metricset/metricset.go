// Package metricset splits the process's Prometheus series between the two programs
// of the one binary: an agent exports the series of the node agents (cairn_agent_*,
// cairn_zpool_*, cairn_exec_*, and the Go runtime's and the process's), a serve every
// other one. Both register in the default registry (promauto), so without the split a
// serve would export agent series that are always 0, and an agent the serve's.
package metricset

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// agentPrefixes are the series only agents fill.
var agentPrefixes = []string{"cairn_agent_", "cairn_zpool_", "cairn_exec_"}

// IsAgent reports whether the series family name belongs to the agents.
func IsAgent(name string) bool {
	for _, p := range agentPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// shared are the families both programs export (Go runtime, process).
func shared(name string) bool {
	return strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_")
}

// AgentHandler serves the agents' series of the default registry.
func AgentHandler() http.Handler {
	return handler(func(name string) bool { return IsAgent(name) || shared(name) })
}

// ServeHandler serves the default registry's series but the agents'.
func ServeHandler() http.Handler {
	return handler(func(name string) bool { return !IsAgent(name) })
}

func handler(keep func(string) bool) http.Handler {
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		all, err := prometheus.DefaultGatherer.Gather()
		out := all[:0]
		for _, mf := range all {
			if keep(mf.GetName()) {
				out = append(out, mf)
			}
		}
		return out, err
	})
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}
