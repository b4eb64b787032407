package gateway

import (
	"net/http"
	"strings"
)

// prettyWriter carries, for the handler's writeJSON, whether this request's answer is
// indented. It keeps the underlying writer's Flush (the event streams) and Unwrap
// (http.ResponseController).
type prettyWriter struct {
	http.ResponseWriter
	pretty bool
}

func (p *prettyWriter) Flush() {
	if f, ok := p.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (p *prettyWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// wantsPretty reports whether a request's JSON answer is indented: when it asks with
// ?pretty (any value but false/0), or comes from curl or wget, whose output a person
// reads, as the Kubernetes API server does. Every other client (programs, the dashboard)
// gets compact JSON.
func wantsPretty(r *http.Request) bool {
	if v, ok := r.URL.Query()["pretty"]; ok {
		return len(v) == 0 || (v[0] != "false" && v[0] != "0")
	}
	ua := strings.ToLower(r.UserAgent())
	return strings.HasPrefix(ua, "curl/") || strings.HasPrefix(ua, "wget/")
}

// withPretty decides wantsPretty once per request for writeJSON.
func withPretty(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&prettyWriter{ResponseWriter: w, pretty: wantsPretty(r)}, r)
	})
}

// isPretty reports whether w answers a request that wants indented JSON.
func isPretty(w http.ResponseWriter) bool {
	for {
		switch x := w.(type) {
		case *prettyWriter:
			return x.pretty
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return false
		}
	}
}
