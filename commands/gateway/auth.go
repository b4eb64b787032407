package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/gateway/linstor"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"
)

// Authenticator admits HTTP requests by bearer token: a token's SHA-256 is looked up in
// the views at every request (so a revocation holds on a serve as soon as its views
// have the event), its role must cover the route (viewer reads, operator also writes,
// admin also manages tokens), and its name becomes the actor of every command the
// request sends. /healthz, /readyz and LINSTOR's /health stay open for probes. LINSTOR's CLI may also send
// the token as a Basic password with the token's name as user. Failed sign-ins are
// logged and limited per client address.
type Authenticator struct {
	DB  *projections.DB
	Log zerolog.Logger
	// Ready says whether this serve sees the stream (views caught up, projector running,
	// NATS connected); while it does not, it could miss a revocation, so it answers 503
	// to every request but the probes. nil: always.
	Ready func() error
	// FailureRate and FailureBurst bound failed sign-ins per client address (default 1
	// per second, burst 10); beyond them the address's failed attempts get 429 until the
	// budget refills. A valid token is admitted whatever its address's budget (one busy
	// NAT address full of failing clients locks no valid client out).
	FailureRate  rate.Limit
	FailureBurst int
	// FailureAddresses is how many client addresses the failure budgets are kept for
	// (DefaultFailureAddresses); beyond that the least recently failing one is forgotten,
	// never all at once.
	FailureAddresses int

	once     sync.Once
	failures *lru.Cache[string, *rate.Limiter]
}

// DefaultFailureAddresses is Authenticator.FailureAddresses' default.
const DefaultFailureAddresses = 100_000

type principalKey struct{}

// Principal is the token a request was admitted with.
type Principal struct {
	Name string
	Role string
}

// PrincipalOf returns the token that admitted r (ok false without authentication).
func PrincipalOf(r *http.Request) (Principal, bool) {
	p, ok := r.Context().Value(principalKey{}).(Principal)
	return p, ok
}

// TokenHash is what the views keep of a token: its SHA-256, lower-case hex.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

var roleRank = map[string]int{events.RoleViewer: 1, events.RoleOperator: 2, events.RoleAdmin: 3}

// requiredRole is the role a request needs ("" for none).
func requiredRole(r *http.Request) string {
	switch {
	case r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/health":
		return ""
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && (r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, "/ui/")):
		return "" // the dashboard's files: every call they make carries the token

	case strings.HasPrefix(r.URL.Path, "/cairn/v1/commands/token.") || strings.HasPrefix(r.URL.Path, "/cairn/v1/tokens") ||
		strings.HasPrefix(r.URL.Path, "/v1/controller/auth"):
		return events.RoleAdmin
	case strings.HasPrefix(r.URL.Path, "/cairn/v1/received/"):
		return events.RoleOperator // volume data, read and written by other clusters shipping here
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		return events.RoleViewer
	}
	return events.RoleOperator
}

// Wrap admits requests to next.
func (a *Authenticator) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		need := requiredRole(r)
		if need == "" {
			next.ServeHTTP(w, r)
			return
		}
		if a.Ready != nil {
			if err := a.Ready(); err != nil {
				refuse(w, r, http.StatusServiceUnavailable, cairn.Errorf(cairn.CodeUnavailable,
					"this serve does not see the event stream (%v), so it could miss a token's revocation: try another serve", err))
				return
			}
		}
		addr := clientAddr(r)
		secret, user, ok := credentials(r)
		var tok projections.Token
		var err error
		if !ok {
			err = cairn.Errorf(cairn.CodeUnauthenticated, "this API needs a token: send Authorization: Bearer <token> (cairn auth token create)")
		} else if tok, err = a.lookup(secret); err == nil && (user != "" && user != tok.Name) {
			err = cairn.Errorf(cairn.CodeUnauthenticated, "the token is not %s's", user)
		}
		if err != nil {
			if cairn.AsError(err).Code == cairn.CodeUnavailable {
				refuse(w, r, http.StatusServiceUnavailable, err)
				return
			}
			if !a.failed(addr, r, err.Error()) {
				a.Log.Warn().Str("remote", addr).Str("path", r.URL.Path).Msg("http sign-in refused: too many failed attempts")
				refuse(w, r, http.StatusTooManyRequests, cairn.Errorf(cairn.CodeRateLimited, "too many failed sign-ins from %s; wait and retry with a valid token", addr))
				return
			}
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="cairn"`)
			} else {
				w.Header().Set("WWW-Authenticate", `Bearer realm="cairn", error="invalid_token"`)
			}
			refuse(w, r, http.StatusUnauthorized, err)
			return
		}
		if roleRank[tok.Role] < roleRank[need] {
			a.Log.Warn().Str("remote", addr).Str("token", tok.Name).Str("role", tok.Role).Str("needs", need).
				Str("method", r.Method).Str("path", r.URL.Path).Msg("http request refused: role too low")
			refuse(w, r, http.StatusForbidden, cairn.Errorf(cairn.CodeUnauthorized, "token %s has role %s; %s %s needs %s", tok.Name, tok.Role, r.Method, r.URL.Path, need))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, Principal{Name: tok.Name, Role: tok.Role})))
	})
}

// lookup finds the token in force whose hash is secret's.
func (a *Authenticator) lookup(secret string) (projections.Token, error) {
	v, err := a.DB.Read()
	if err != nil {
		return projections.Token{}, cairn.Errorf(cairn.CodeUnavailable, "views unreadable: %v", err)
	}
	defer v.Close()
	tok, ok, err := v.TokenByHash(TokenHash(secret))
	switch {
	case err != nil:
		return tok, cairn.Errorf(cairn.CodeUnavailable, "views unreadable: %v", err)
	case !ok || tok.Revoked:
		return tok, cairn.Errorf(cairn.CodeUnauthenticated, "unknown or revoked token")
	case !tok.Valid(time.Now()):
		return tok, cairn.Errorf(cairn.CodeUnauthenticated, "token %s expired at %s", tok.Name, tok.ExpiresAt.Format(time.RFC3339))
	}
	return tok, nil
}

// credentials reads a bearer token, or a Basic password (LINSTOR's CLI) with its user.
func credentials(r *http.Request) (secret, user string, ok bool) {
	h := r.Header.Get("Authorization")
	if s, found := strings.CutPrefix(h, "Bearer "); found && strings.TrimSpace(s) != "" {
		return strings.TrimSpace(s), "", true
	}
	if u, p, found := r.BasicAuth(); found && p != "" {
		return p, u, true
	}
	return "", "", false
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// limiter returns addr's failure budget (a new full one for an address not seen, or
// forgotten as the least recently failing of more than FailureAddresses).
func (a *Authenticator) limiter(addr string) *rate.Limiter {
	a.once.Do(func() {
		n := a.FailureAddresses
		if n <= 0 {
			n = DefaultFailureAddresses
		}
		a.failures, _ = lru.New[string, *rate.Limiter](n)
	})
	if l, ok := a.failures.Get(addr); ok {
		return l
	}
	r, b := a.FailureRate, a.FailureBurst
	if r == 0 {
		r = 1
	}
	if b == 0 {
		b = 10
	}
	l := rate.NewLimiter(r, b)
	if prev, ok, _ := a.failures.PeekOrAdd(addr, l); ok {
		return prev
	}
	return l
}

// failed counts and logs a failed sign-in; false when addr's budget of failures is
// spent (the caller answers 429).
func (a *Authenticator) failed(addr string, r *http.Request, why string) bool {
	if !a.limiter(addr).Allow() {
		return false
	}
	a.Log.Warn().Str("remote", addr).Str("method", r.Method).Str("path", r.URL.Path).Str("reason", why).Msg("http sign-in failed")
	return true
}

// refuse answers an authentication refusal in the shape of the API the path belongs to:
// LINSTOR's ApiCallRc list under /v1/, Cairn's error elsewhere.
func refuse(w http.ResponseWriter, r *http.Request, status int, err error) {
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		linstor.WriteAuthError(w, status, r.Header.Get("Authorization") == "", cairn.AsError(err).Message)
		return
	}
	e := cairn.AsError(err)
	writeJSON(w, status, map[string]any{"ok": false, "error": e})
}
