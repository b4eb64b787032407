package events

import (
	"strings"
	"time"
)

// Heartbeat is what an agent publishes on <prefix>.status.<node>.node.<node> every
// heartbeat interval: the wire contract between agents and the watchdog.
type Heartbeat struct {
	Node         string    `json:"node"`
	SentAt       time.Time `json:"sent_at"`
	AgentVersion string    `json:"agent_version,omitempty"`
	Desired      int       `json:"desired"`
	// AllowExtFiles are the host path prefixes the agent writes external files under
	// (its --allow-ext-files; LINSTOR's /v1/files/{path}/check/{node} reads them).
	AllowExtFiles []string `json:"allow_ext_files,omitempty"`
}

// PathAllowed reports whether path is one of prefixes (clean absolute paths) or under
// one: what an agent's --allow-ext-files lets it write.
func PathAllowed(prefixes []string, path string) bool {
	for _, a := range prefixes {
		if path == a || a == "/" || strings.HasPrefix(path, a+"/") {
			return true
		}
	}
	return false
}
