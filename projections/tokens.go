package projections

import (
	"time"

	"github.com/cairn-io/cairn/events"
)

// Token is an HTTP API bearer token as recorded: its hash, never the token.
type Token struct {
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	Hash       string     `json:"hash,omitempty"`
	Creator    string     `json:"creator"`
	CreatedAt  time.Time  `json:"created_at"`
	CreatedSeq uint64     `json:"created_seq"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	Revoked    bool       `json:"revoked,omitempty"`
	RevokedBy  string     `json:"revoked_by,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// Valid reports whether the token authenticates at now: not revoked, not expired.
func (t Token) Valid(now time.Time) bool {
	return !t.Revoked && (t.ExpiresAt == nil || now.Before(*t.ExpiresAt))
}

func tokenKey(name string) string     { return "v/token/" + name }
func tokenHashKey(hash string) string { return "v/token-hash/" + hash }

// applyToken folds the token events; handled is false for other types.
func applyToken(t *tx, ev events.Event) (handled bool, err error) {
	switch d := ev.Data.(type) {
	case *events.TokenCreated:
		if err := t.put(tokenHashKey(d.Hash), d.Name); err != nil {
			return true, err
		}
		return true, t.put(tokenKey(d.Name), Token{Name: d.Name, Role: d.Role, Hash: d.Hash, Creator: ev.Actor,
			CreatedAt: ev.OccurredAt, CreatedSeq: ev.Seq, ExpiresAt: d.ExpiresAt})
	case *events.TokenRevoked:
		var tok Token
		if _, err := getJSON(t, tokenKey(d.Name), &tok); err != nil {
			return true, err
		}
		at := ev.OccurredAt
		tok.Revoked, tok.RevokedBy, tok.RevokedAt = true, ev.Actor, &at
		t.del(tokenHashKey(d.Hash))
		return true, t.put(tokenKey(d.Name), tok)
	}
	return false, nil
}

// Token returns a token by name (revoked ones too).
func (v *View) Token(name string) (tok Token, ok bool, err error) {
	ok, err = getJSON(v.r, tokenKey(name), &tok)
	return
}

// TokenByHash returns the token in force, not revoked, with the hash (ok false when
// none); the caller checks its expiry.
func (v *View) TokenByHash(hash string) (tok Token, ok bool, err error) {
	var name string
	if ok, err = getJSON(v.r, tokenHashKey(hash), &name); !ok || err != nil {
		return Token{}, false, err
	}
	return v.Token(name)
}

// Tokens returns every token, by name.
func (v *View) Tokens() ([]Token, error) { return scanAll[Token](v, "v/token/") }
