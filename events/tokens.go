package events

import "time"

// Roles of an HTTP API token: viewer reads, operator also sends commands, admin also
// manages tokens.
const (
	RoleViewer   = "viewer"
	RoleOperator = "operator"
	RoleAdmin    = "admin"
)

// TokenCreated: a bearer token of the HTTP API exists. Hash is the SHA-256 (hex) of
// the token; the token itself is never stored. Its creator is the event's actor.
type TokenCreated struct {
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	Hash      string     `json:"hash"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// TokenRevoked: a token no longer authenticates anyone.
type TokenRevoked struct {
	Name string `json:"name"`
	Hash string `json:"hash"`
}

func (*TokenCreated) EventType() string { return "token.created" }
func (*TokenRevoked) EventType() string { return "token.revoked" }

func init() {
	Register(Type{Name: "token.created", Version: 1, New: func() Payload { return new(TokenCreated) }})
	Register(Type{Name: "token.revoked", Version: 1, New: func() Payload { return new(TokenRevoked) }})
}
