package test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testCA writes a CA and a server certificate for 127.0.0.1 into dir and returns the
// paths of the CA certificate, the server certificate and its key.
func testCA(t *testing.T, dir string) (caPath, certPath, keyPath string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cairn test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600))
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", der), write("server.key", "EC PRIVATE KEY", keyDER)
}

// TestHTTPAuthAndTLS: `cairn serve --http-auth --tls-cert/--tls-key` serves HTTPS only
// to tokens made with `cairn auth token create`: 401 without one (LINSTOR's sign-in
// codes under /v1/), 403 for a role too low, the token's name as the actor of every
// command whatever the headers say, revocation and expiry effective at once, failed
// sign-ins limited, Basic credentials (what the LINSTOR CLI sends) accepted, and a
// listener off loopback refused without tokens and TLS.
func TestHTTPAuthAndTLS(t *testing.T) {
	dir := t.TempDir()
	caPath, certPath, keyPath := testCA(t, dir)

	// Off loopback, serve refuses to start without tokens and TLS.
	_, stderr, code := runAll(t, "serve", "--data", t.TempDir(), "--nats-listen", freeAddr(t), "--http", "0.0.0.0:0")
	require.NotEqual(t, 0, code)
	assert.Contains(t, stderr, "--http-auth")
	_, stderr, code = runAll(t, "serve", "--data", t.TempDir(), "--nats-listen", freeAddr(t), "--http", "0.0.0.0:0", "--http-auth")
	require.NotEqual(t, 0, code)
	assert.Contains(t, stderr, "--tls-cert")

	s := startServe(t, t.TempDir(), "--http-auth", "--tls-cert", certPath, "--tls-key", keyPath)
	pemCA, err := os.ReadFile(caPath)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pemCA))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	base := "https://" + s.httpAddr
	do := func(method, path, token, body string, hdr ...string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	mint := func(name, role string, extra ...string) string {
		t.Helper()
		out, errb, code := runAll(t, append([]string{"auth", "token", "create", name, "--role", role, "--nats", s.natsURL()}, extra...)...)
		require.Equal(t, 0, code, errb)
		tok := strings.TrimSpace(out)
		require.True(t, strings.HasPrefix(tok, "cairn_"), out)
		return tok
	}

	// Plain HTTP on the TLS port gets nothing useful.
	resp, err := http.Get("http://" + s.httpAddr + "/cairn/v1/nodes")
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP on the HTTPS port")
	resp.Body.Close()

	status, hdr, body := do("GET", "/cairn/v1/nodes", "", "")
	assert.Equal(t, 401, status, body)
	assert.Contains(t, hdr.Get("WWW-Authenticate"), "Bearer")
	assert.Contains(t, body, `"unauthenticated"`)
	status, _, body = do("GET", "/v1/nodes", "", "")
	assert.Equal(t, 401, status)
	rc := decode[[]apiCallRc](t, body)
	assert.Equal(t, retCode(lsError, 10001), rc[0].RetCode, "FAIL_SIGN_IN_MISSING_CREDENTIALS")
	status, _, _ = do("GET", "/healthz", "", "")
	assert.Equal(t, 200, status, "probes stay open")
	status, _, _ = do("GET", "/health", "", "")
	assert.Equal(t, 200, status, "LINSTOR's health check stays open")

	admin := mint("root", "admin")
	viewer := mint("watcher", "viewer")
	op := mint("csi", "operator")
	_, code = run(t, "cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`, "--nats", s.natsURL())
	require.Equal(t, 0, code)

	status, _, body = do("GET", "/cairn/v1/nodes", viewer, "")
	assert.Equal(t, 200, status, body)
	status, _, body = do("POST", "/cairn/v1/commands/node.add", viewer, `{"name":"n1","host":"h1","address":"10.0.0.1"}`)
	assert.Equal(t, 403, status, body)
	assert.Contains(t, body, "has role viewer")
	status, _, body = do("POST", "/v1/nodes", viewer, `{"name":"n1","type":"satellite","net_interfaces":[{"name":"default","address":"10.0.0.1"}]}`)
	assert.Equal(t, 403, status)
	assert.Equal(t, retCode(lsError, 412), decode[[]apiCallRc](t, body)[0].RetCode, "FAIL_ACC_DENIED_COMMAND")

	// The token's name is the actor, whatever Cairn-Actor claims.
	status, _, body = do("POST", "/cairn/v1/commands/node.add", op, `{"name":"n1","host":"h1","address":"10.0.0.1"}`, "Cairn-Actor", "mallory")
	require.Equal(t, 200, status, body)
	status, _, body = do("POST", "/v1/nodes", op, `{"name":"n2","type":"satellite","net_interfaces":[{"name":"default","address":"10.0.0.2"}]}`)
	require.Equal(t, 201, status, body)
	out, code := run(t, "audit", "--nats", s.natsURL(), "--type", "node.added", "--json")
	require.Equal(t, 0, code)
	assert.Equal(t, 2, strings.Count(out, `"actor":"token:csi"`), out)
	assert.NotContains(t, out, "mallory")

	// Tokens are admin business; the list never shows a token or its hash.
	status, _, _ = do("GET", "/cairn/v1/tokens", op, "")
	assert.Equal(t, 403, status)
	status, _, body = do("GET", "/cairn/v1/tokens", admin, "")
	require.Equal(t, 200, status, body)
	assert.Contains(t, body, `"creator":"cli:`)
	assert.NotContains(t, body, "hash")
	assert.NotContains(t, body, "cairn_")
	out, code = run(t, "auth", "token", "list", "--http", base, "--token", admin, "--cacert", caPath)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, `"name": "watcher"`)
	out, code = run(t, "domains", "status", "--http", base, "--token", viewer, "--cacert", caPath)
	require.Equal(t, 0, code, out)
	_, code = run(t, "domains", "status", "--http", base, "--cacert", caPath)
	assert.Equal(t, 1, code, "no token")

	// Basic credentials, as the LINSTOR CLI sends them: the user must be the token's name.
	basic := func(user, pass string) int {
		req, err := http.NewRequest("GET", base+"/v1/nodes", nil)
		require.NoError(t, err)
		req.SetBasicAuth(user, pass)
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, 200, basic("watcher", viewer))
	assert.Equal(t, 401, basic("root", viewer))

	// Revocation holds at once; revoking twice is a no-op.
	_, code = run(t, "auth", "token", "revoke", "csi", "--nats", s.natsURL())
	require.Equal(t, 0, code)
	status, _, body = do("GET", "/cairn/v1/nodes", op, "")
	assert.Equal(t, 401, status, "a revoked token is refused as soon as the command is answered: %s", body)
	out, code = run(t, "auth", "token", "revoke", "csi", "--nats", s.natsURL())
	require.Equal(t, 0, code)
	assert.Contains(t, out, "already revoked")
	_, code = run(t, "auth", "token", "revoke", "ghost", "--nats", s.natsURL())
	assert.Equal(t, 1, code)
	// A revoked name can be used anew; a name in force cannot.
	mint("csi", "operator")
	_, errb, code := runAll(t, "auth", "token", "create", "csi", "--role", "viewer", "--nats", s.natsURL())
	assert.Equal(t, 1, code)
	assert.Contains(t, errb, "already_exists")

	// Expiry.
	brief := mint("brief", "viewer", "--expires-in", "2s")
	status, _, _ = do("GET", "/cairn/v1/nodes", brief, "")
	require.Equal(t, 200, status)
	require.Eventually(t, func() bool {
		status, _, body = do("GET", "/cairn/v1/nodes", brief, "")
		return status == 401 && strings.Contains(body, "expired")
	}, 10*time.Second, 200*time.Millisecond)

	// Failed sign-ins are limited per address: past the burst, 429 for bad tokens, while
	// a good token from the same address still gets in (credentials are checked before
	// the budget: a busy NAT address locks no valid client out); the serve logs every
	// failure.
	limited := false
	for i := 0; i < 30 && !limited; i++ {
		status, _, _ = do("GET", "/cairn/v1/nodes", "cairn_wrong", "")
		limited = status == http.StatusTooManyRequests
	}
	require.True(t, limited, "no 429 after 30 bad tokens")
	status, _, _ = do("GET", "/cairn/v1/nodes", viewer, "")
	assert.Equal(t, http.StatusOK, status, "a valid token refused for its address's failures")
	status, _, _ = do("GET", "/cairn/v1/nodes", "cairn_wrong", "")
	assert.Equal(t, http.StatusTooManyRequests, status)
	assert.Contains(t, s.log.String(), "http sign-in failed")
}

// A token revoked through one serve is refused by another serve of the same stream
// within a second: each looks tokens up in its own views, which the revocation reaches
// through the stream.
func TestTokenRevocationReachesEveryServe(t *testing.T) {
	a := startServe(t, t.TempDir(), "--http-auth", "--name", "a")
	b := &serve{t: t, data: t.TempDir(), httpAddr: freeAddr(t)}
	b.args = []string{"serve", "--data", b.data, "--nats", a.natsURL(), "--http", b.httpAddr, "--http-auth", "--name", "b"}
	b.run("b")
	out, errb, code := runAll(t, "auth", "token", "create", "csi", "--role", "viewer", "--nats", a.natsURL())
	require.Equal(t, 0, code, errb)
	token := strings.TrimSpace(out)
	get := func(s *serve) int {
		status, _ := httpJSON(t, "GET", s.url("/cairn/v1/nodes"), "", "Authorization", "Bearer "+token)
		return status
	}
	require.Eventually(t, func() bool { return get(b) == 200 }, 10*time.Second, 20*time.Millisecond, "serve b never accepted the token")

	_, code = run(t, "auth", "token", "revoke", "csi", "--nats", a.natsURL())
	require.Equal(t, 0, code)
	revoked := time.Now()
	assert.Equal(t, 401, get(a), "the serve that answered the revoke refuses at once")
	require.Eventually(t, func() bool { return get(b) == 401 }, time.Second, 10*time.Millisecond, "serve b still accepts a revoked token after 1 s")
	t.Logf("serve b refused the revoked token %s after the revoke was answered", time.Since(revoked).Round(time.Millisecond))

	// A serve that no longer sees the stream could miss the next revocation: it refuses
	// every authenticated request (503) until it sees the stream again; probes stay open.
	out, errb, code = runAll(t, "auth", "token", "create", "ops", "--role", "viewer", "--nats", a.natsURL())
	require.Equal(t, 0, code, errb)
	token = strings.TrimSpace(out)
	require.Eventually(t, func() bool { return get(b) == 200 }, 10*time.Second, 20*time.Millisecond)
	a.kill9()
	require.Eventually(t, func() bool { return get(b) == 503 }, 10*time.Second, 20*time.Millisecond, "serve b kept vouching for tokens without the stream")
	status, _ := httpJSON(t, "GET", b.url("/healthz"), "")
	assert.Equal(t, 200, status)
}
