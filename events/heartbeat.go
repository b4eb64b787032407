package events

import "time"

// Heartbeat is what an agent publishes on <prefix>.status.<node>.node.<node> every
// heartbeat interval: the wire contract between agents and the watchdog.
type Heartbeat struct {
	Node         string    `json:"node"`
	SentAt       time.Time `json:"sent_at"`
	AgentVersion string    `json:"agent_version,omitempty"`
	Desired      int       `json:"desired"`
}
