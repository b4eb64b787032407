// Package servertest starts real control-plane processes for tests: an embedded
// nats-server with JetStream, real Pebble, real admission and projector. Nothing is faked.
package servertest

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// startTimeout bounds the start of Start and StartConfig.
const startTimeout = 60 * time.Second

// Start runs a server on a temporary data directory with random ports; it is closed
// when the test ends. mod may adjust the configuration.
func Start(t testing.TB, mod ...func(*server.Config)) *server.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	return StartContext(ctx, t, mod...)
}

// StartContext is Start with ctx, not 60 s, bounding the start (which waits for the
// views to catch up with the stream): for a data directory with a big history.
func StartContext(ctx context.Context, t testing.TB, mod ...func(*server.Config)) *server.Server {
	t.Helper()
	cfg := server.Config{
		DataDir:    t.TempDir(),
		NATSListen: "127.0.0.1:0",
		HTTPListen: "127.0.0.1:0",
		Log:        zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	}
	for _, m := range mod {
		m(&cfg)
	}
	return startConfig(ctx, t, cfg)
}

// StartConfig runs a server with cfg; closed when the test ends.
func StartConfig(t testing.TB, cfg server.Config) *server.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	return startConfig(ctx, t, cfg)
}

func startConfig(ctx context.Context, t testing.TB, cfg server.Config) *server.Server {
	t.Helper()
	s, err := server.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Client connects to the server over TCP like an external client; closed at test end.
func Client(t testing.TB, s *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.NATSAddr)
	if err != nil {
		t.Fatalf("connect %s: %v", s.NATSAddr, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Send sends a command over NATS and decodes the reply. headers are key, value pairs.
func Send(t testing.TB, nc *nats.Conn, verb string, body string, headers ...string) admission.Reply {
	t.Helper()
	m := nats.NewMsg("cairn.cmd." + verb)
	m.Data = []byte(body)
	for i := 0; i+1 < len(headers); i += 2 {
		m.Header.Set(headers[i], headers[i+1])
	}
	resp, err := nc.RequestMsg(m, 30*time.Second)
	if err != nil {
		t.Fatalf("%s: no reply: %v", verb, err)
	}
	var r admission.Reply
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		t.Fatalf("%s: bad reply %q: %v", verb, resp.Data, err)
	}
	return r
}

// answerTimeout bounds how long SendAnswered and SubmitAnswered keep retrying.
const answerTimeout = 2 * time.Minute

// SendAnswered sends a command over NATS as a client following the contract does: with
// a command id of its own (a Cairn-Command-Id header in headers is kept), resent with
// that id while the reply is "unavailable" (a deadline, a lost append reply), so that
// the reply it returns is the command's final answer. A command answered unavailable
// may still have been appended; only the retry with its id tells.
func SendAnswered(t testing.TB, nc *nats.Conn, verb string, body string, headers ...string) admission.Reply {
	t.Helper()
	if !hasHeader(headers, admission.HeaderCommandID) {
		headers = append(headers, admission.HeaderCommandID, uuid.NewString())
	}
	return untilAnswered(t, verb, func() admission.Reply { return Send(t, nc, verb, body, headers...) })
}

// SubmitAnswered is Submit with the retry of SendAnswered: one command id made up here,
// resent while the reply is "unavailable".
func SubmitAnswered(t testing.TB, s *server.Server, verb, body string) admission.Reply {
	t.Helper()
	req := admission.Request{Verb: verb, Body: []byte(body), Actor: "test", CommandID: uuid.NewString()}
	return untilAnswered(t, verb, func() admission.Reply { return s.Admission.Submit(context.Background(), req) })
}

func untilAnswered(t testing.TB, verb string, send func() admission.Reply) admission.Reply {
	t.Helper()
	deadline := time.Now().Add(answerTimeout)
	for {
		r := send()
		if r.OK || r.Error == nil || r.Error.Code != cairn.CodeUnavailable {
			return r
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: still unavailable after %s: %s", verb, answerTimeout, r.Error.Message)
			return r
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func hasHeader(headers []string, key string) bool {
	for i := 0; i+1 < len(headers); i += 2 {
		if http.CanonicalHeaderKey(headers[i]) == http.CanonicalHeaderKey(key) {
			return true
		}
	}
	return false
}

// Submit sends a command straight to admission (no NATS hop).
func Submit(s *server.Server, verb, body string) admission.Reply {
	return s.Admission.Submit(context.Background(), admission.Request{Verb: verb, Body: []byte(body), Actor: "test"})
}

// LastSeq returns the last sequence of the events stream.
func LastSeq(t testing.TB, s *server.Server) uint64 {
	t.Helper()
	seq, err := s.Store.LastSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return seq
}
