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

// FilesKind is the status kind of an agent's report of the external files it wrote:
// <prefix>.status.<node>.files.<node>.
const FilesKind = "files"

// FilesReport is what an agent found of the external files it wrote, at At (after
// every change): each file's path and the SHA-256 of its content on disk then ("" when
// it was gone).
type FilesReport struct {
	Node  string            `json:"node"`
	At    time.Time         `json:"at"`
	Files map[string]string `json:"files"`
}
