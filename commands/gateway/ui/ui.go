// Package ui is the operators' dashboard: HTML, CSS and JavaScript embedded in the
// binary (no build step, nothing fetched at run time) and served by the gateway at
// /ui/. The page reads Cairn's HTTP API (/cairn/v1/…) with the operator's token, follows
// the event stream (GET /cairn/v1/events/stream) to refresh what it shows, and sends
// ordinary commands (POST /cairn/v1/commands/{verb}) for its few actions, so it holds
// no rule of its own and a viewer's token sees no command buttons.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Handler serves the dashboard's files under /ui/.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})
}
