// Package tokens decides the API token verbs (token.create, token.revoke): a token is
// stored as its hash with its role, never in the clear.
package tokens

import (
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// TokenCreate is the body of token.create: the client makes the token and sends only
// its SHA-256.
type TokenCreate struct {
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	Hash      string     `json:"hash"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// DecideTokenCreate records a token. Refuses with already_exists while a token of the
// name is in force (revoke it first) or when another token has the same hash, and
// invalid_argument (field expires_at) for an expiry in the past.
func DecideTokenCreate(existing *projections.Token, hashOwner string, now time.Time, c TokenCreate) (*events.TokenCreated, error) {
	if existing != nil && !existing.Revoked {
		return nil, cairn.Errorf(cairn.CodeAlreadyExists, "token %s exists (role %s); revoke it first to replace it", c.Name, existing.Role)
	}
	if hashOwner != "" {
		return nil, cairn.Errorf(cairn.CodeAlreadyExists, "token %s already has this hash; make a new token", hashOwner)
	}
	if c.ExpiresAt != nil && !c.ExpiresAt.After(now) {
		return nil, cairn.InvalidField("expires_at", "expires_at %s is not in the future", c.ExpiresAt.Format(time.RFC3339))
	}
	return &events.TokenCreated{Name: c.Name, Role: c.Role, Hash: c.Hash, ExpiresAt: c.ExpiresAt}, nil
}

// DecideTokenRevoke revokes a token in force. Refuses with not_found for a name that
// never had one; revoking a revoked token is a no-op with a warning.
func DecideTokenRevoke(existing *projections.Token, c decide.NameOnly) (*events.TokenRevoked, []string, error) {
	if existing == nil {
		return nil, nil, cairn.Errorf(cairn.CodeNotFound, "token %s does not exist", c.Name)
	}
	if existing.Revoked {
		return nil, []string{"token " + c.Name + " is already revoked; nothing changed"}, nil
	}
	return &events.TokenRevoked{Name: c.Name, Hash: existing.Hash}, nil, nil
}

// Handlers decide the token verbs; each is bounded by its token's subject (and the
// hash index it reads is only written on token subjects, by these verbs).
func Handlers() []decide.Handler {
	return []decide.Handler{
		{Verb: "token.create", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			// Every token subject: a hash is unique across names.
			var c TokenCreate
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.AggregateBoundary(v, names, "token") })
			if err != nil {
				return d, err
			}
			t, ok, err := v.Token(c.Name)
			if err != nil {
				return d, err
			}
			owner, _, err := v.TokenByHash(c.Hash)
			if err != nil {
				return d, err
			}
			ev, err := DecideTokenCreate(decide.Ptr(t, ok), owner.Name, time.Now(), c)
			return d.With(names.Event("token", c.Name), ev, nil), err
		}},
		{Verb: "token.revoke", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c decide.NameOnly
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, names.Event("token", c.Name)) })
			if err != nil {
				return d, err
			}
			subject := names.Event("token", c.Name)
			t, ok, err := v.Token(c.Name)
			if err != nil {
				return d, err
			}
			ev, warnings, err := DecideTokenRevoke(decide.Ptr(t, ok), c)
			return d.With(subject, ev, warnings), err
		}},
	}
}
