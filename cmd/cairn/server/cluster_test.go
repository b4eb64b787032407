package server_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/projections"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func freePorts(t *testing.T, n int) []int {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		defer l.Close()
	}
	return ports
}

// startNATSCluster starts three JetStream servers clustered over loopback routes.
func startNATSCluster(t *testing.T) []*natsserver.Server {
	ports := freePorts(t, 3)
	var routes []string
	for _, p := range ports {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(p))
	}
	var servers []*natsserver.Server
	for i, p := range ports {
		opts := &natsserver.Options{
			ServerName: fmt.Sprintf("s%d", i), Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true,
			Cluster: natsserver.ClusterOpts{Name: "cairn-test", Host: "127.0.0.1", Port: p},
			Routes:  natsserver.RoutesFromStr(strings.Join(routes, ",")),
		}
		srv, err := natsserver.NewServer(opts)
		require.NoError(t, err)
		go srv.Start()
		servers = append(servers, srv)
		t.Cleanup(srv.Shutdown)
	}
	for _, srv := range servers {
		require.True(t, srv.ReadyForConnections(20*time.Second))
	}
	return servers
}

// Cairn on a three-node NATS cluster with R3 streams: commands keep landing exactly once
// while the events stream's leader is killed, and the views equal a rebuild afterwards.
func TestOnANATSClusterAcrossLeaderFailover(t *testing.T) {
	servers := startNATSCluster(t)
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.ClientURL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Start waits for the cluster's JetStream meta leader by itself.
	s, err := server.Start(ctx, server.Config{DataDir: t.TempDir(), NATSURL: strings.Join(urls, ","), Replicas: 3,
		HTTPListen: "-", HeartbeatTimeout: time.Hour, Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	require.NoError(t, err)
	defer s.Close()

	info, err := s.JS.Stream(ctx, "CAIRN_EVENTS")
	require.NoError(t, err)
	si, err := info.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, si.Config.Replicas)

	// submit retries "unavailable" with the same command id, as a client should.
	submit := func(verb, id, body string) admission.Reply {
		for {
			r := s.Admission.Submit(ctx, admission.Request{Verb: verb, Body: []byte(body), CommandID: id, Actor: "test"})
			if r.OK || r.Error.Code != "unavailable" || ctx.Err() != nil {
				return r
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	require.True(t, submit("cluster.create", "create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`).OK)
	for i := range 20 {
		r := submit("node.add", fmt.Sprintf("add-%d", i), fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.1"}`, i, i))
		require.True(t, r.OK, "%+v", r.Error)
		if i == 9 {
			leader := si.Cluster.Leader
			for _, srv := range servers {
				if srv.Name() == leader {
					srv.Shutdown()
					t.Logf("killed stream leader %s", leader)
				}
			}
		}
	}
	// a retried command after the failover still appends nothing
	again := submit("node.add", "add-3", `{"name":"n3","host":"h3","address":"10.0.0.1"}`)
	require.True(t, again.OK)
	last, err := s.Store.LastSeq(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(21), last, "every command exactly once")
	require.NoError(t, s.Projector.WaitFor(ctx, last))

	live, err := s.DB.Digest()
	require.NoError(t, err)
	db, err := projections.OpenInMem()
	require.NoError(t, err)
	defer db.Close()
	js, _ := jetstream.New(s.NC)
	rebuilt, err := server.ProjectInto(ctx, db, js, s.Store.Names(), 0, 0, zerolog.Nop())
	require.NoError(t, err)
	assert.Equal(t, live, rebuilt)
}
