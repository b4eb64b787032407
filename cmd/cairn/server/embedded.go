// Package server wires a Cairn control-plane process: NATS (embedded or external),
// the streams, the views and their projector, admission, the heartbeat watchdog and the
// HTTP gateway. cmd/cairn only parses flags and calls in here.
package server

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// EmbeddedOptions configure the embedded single-node NATS server.
type EmbeddedOptions struct {
	StoreDir string // JetStream store (<data>/jetstream)
	Listen   string // host:port for clients; "" = no listener (offline tools)
	// SyncAlways fsyncs every JetStream write, so an acknowledged command survives
	// power loss on a single node. Default on; benchmarks may turn it off.
	SyncAlways bool
	// Auth, when set, authenticates every client connection (in-process ones too) and
	// gives it its permissions; the server then presents a nonce to every client.
	// See natsauth.Authority.Authenticator. nil: no authorization at all.
	Auth natsserver.Authentication
}

// StartEmbedded starts an embedded nats-server with JetStream and waits until it
// accepts connections.
func StartEmbedded(o EmbeddedOptions) (*natsserver.Server, error) {
	opts := &natsserver.Options{
		ServerName:         "cairn",
		JetStream:          true,
		StoreDir:           o.StoreDir,
		SyncAlways:         o.SyncAlways,
		NoSigs:             true,
		MaxPayload:         8 << 20,
		JetStreamMaxMemory: 256 << 20,
	}
	if o.Auth != nil {
		opts.CustomClientAuthentication = o.Auth
		opts.AlwaysEnableNonce = true
	}
	if o.Listen == "" {
		opts.DontListen = true
	} else {
		host, portStr, err := net.SplitHostPort(o.Listen)
		if err != nil {
			return nil, fmt.Errorf("nats listen address %q: %w", o.Listen, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil {
			return nil, fmt.Errorf("nats listen port %q: %w", portStr, err)
		}
		opts.Host, opts.Port = host, port
		if port <= 0 {
			opts.Port = natsserver.RANDOM_PORT
		} else {
			// nats-server logs a busy port and retries instead of failing: say so now,
			// naming the address, rather than waiting for it to be ready.
			l, err := net.Listen("tcp", o.Listen)
			if err != nil {
				return nil, fmt.Errorf("embedded nats cannot listen on %s: %w (another cairn serve or nats-server there? choose another with --nats-listen)", o.Listen, err)
			}
			l.Close()
		}
	}
	srv, err := natsserver.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded nats did not start within 30s (store %s)", o.StoreDir)
	}
	return srv, nil
}

// ConnectInProcess opens a client connection to an embedded server without TCP.
func ConnectInProcess(srv *natsserver.Server, name string, opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.InProcessServer(srv), nats.Name(name), nats.MaxReconnects(-1)}, opts...)
	return nats.Connect("", opts...)
}

// OpenOffline starts the embedded server of a data directory without any listener and
// connects to it: for the offline tools (views rebuild, digest, audit --data).
// The caller must shut both down. Refuses if `cairn serve` holds the store.
func OpenOffline(dataDir string) (*natsserver.Server, *nats.Conn, jetstream.JetStream, error) {
	srv, err := StartEmbedded(EmbeddedOptions{StoreDir: filepath.Join(dataDir, "jetstream"), SyncAlways: true})
	if err != nil {
		return nil, nil, nil, err
	}
	nc, err := ConnectInProcess(srv, "cairn-offline")
	if err != nil {
		srv.Shutdown()
		return nil, nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		srv.Shutdown()
		return nil, nil, nil, err
	}
	return srv, nc, js, nil
}
