package testtools

import (
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream starts a real nats-server with JetStream on a random port and a temporary
// store, connects to it, and returns the JetStream context; both are shut down when the
// test ends. No stream exists yet.
func JetStream(tb testing.TB) jetstream.JetStream {
	tb.Helper()
	srv, err := natsserver.NewServer(&natsserver.Options{Port: -1, JetStream: true, StoreDir: tb.TempDir(), NoSigs: true})
	if err != nil {
		tb.Fatalf("nats-server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats-server did not start within 10 s")
	}
	tb.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		tb.Fatalf("connect %s: %v", srv.ClientURL(), err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return js
}
