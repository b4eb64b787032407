package natsauth_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/agents"
	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/natsauth"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

var names = events.NewNames("")

// authServer starts serve with --auth, adds nodes n1 and n2, and puts one desired-state
// message on each node's subject.
func authServer(t *testing.T) (*server.Server, *nats.Conn) {
	t.Helper()
	s := servertest.Start(t, func(c *server.Config) { c.Auth = true })
	require.NotNil(t, s.Auth)
	require.Equal(t, filepath.Join(s.Auth.Dir(), natsauth.ControlCredsFile), s.ControlCreds)
	control := connectCreds(t, s, s.ControlCreds)
	r := servertest.Send(t, control, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	require.True(t, r.OK, "%+v", r)
	for _, n := range []string{"n1", "n2"} {
		r := servertest.Send(t, control, "node.add", `{"name":"`+n+`","host":"h`+n+`","address":"10.0.0.1"}`)
		require.True(t, r.OK, "%+v", r)
	}
	js, err := jetstream.New(control)
	require.NoError(t, err)
	for _, n := range []string{"n1", "n2"} {
		_, err := js.Publish(context.Background(), names.Node(n, "drbd", "r-"+n), []byte(`{"resource":"r-`+n+`"}`))
		require.NoError(t, err)
	}
	return s, control
}

// connectCreds connects with the credentials file at path; closed at test end.
func connectCreds(t *testing.T, s *server.Server, path string, extra ...nats.Option) *nats.Conn {
	t.Helper()
	opts, err := natsauth.ConnectOptions(path)
	require.NoError(t, err)
	nc, err := nats.Connect(s.NATSAddr, append(opts, extra...)...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// nodeConn connects as node's agent does: its credentials and its inbox prefix.
// Asynchronous errors (permission violations) go to the returned channel.
func nodeConn(t *testing.T, s *server.Server, node string, extra ...nats.Option) (*nats.Conn, <-chan error) {
	t.Helper()
	creds, err := s.Auth.NodeCreds(node)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), node+".creds")
	require.NoError(t, os.WriteFile(path, creds, 0o600))
	errs := make(chan error, 16)
	opts := append([]nats.Option{nats.CustomInboxPrefix(names.NodeInbox(node)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		})}, extra...)
	return connectCreds(t, s, path, opts...), errs
}

func wantViolation(t *testing.T, errs <-chan error, what string) {
	t.Helper()
	select {
	case err := <-errs:
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
		require.Contains(t, err.Error(), what)
	case <-time.After(5 * time.Second):
		t.Fatalf("no permission violation for %s", what)
	}
}

// The real agent of n1, with n1's credentials, consumes exactly its own desired state
// and its heartbeat arrives.
func TestNodeAgentWithCredentials(t *testing.T) {
	s, control := authServer(t)
	beats, err := control.SubscribeSync(names.StatusFilter(""))
	require.NoError(t, err)
	require.NoError(t, control.Flush())

	nc, errs := nodeConn(t, s, "n1")
	a, err := agents.New(nc, agents.Options{Node: "n1", Names: names, HeartbeatInterval: 100 * time.Millisecond,
		Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	m, err := beats.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "cairn.status.n1.node.n1", m.Subject)
	require.Eventually(t, func() bool { return len(a.Desired()) == 1 }, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, []string{"cairn.node.n1.drbd.r-n1"}, a.Desired())

	// A change published later arrives too.
	js, err := jetstream.New(control)
	require.NoError(t, err)
	_, err = js.Publish(context.Background(), names.Node("n1", "drbd", "r-b"), []byte(`{}`))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(a.Desired()) == 2 }, 5*time.Second, 20*time.Millisecond)
	select {
	case err := <-errs:
		t.Fatalf("agent ran into %v", err)
	default:
	}
}

// A node's user can neither read another node's desired state nor report for it,
// send commands, or touch events.
func TestNodeUserRefusals(t *testing.T) {
	s, control := authServer(t)
	ctx := context.Background()

	t.Run("subscribe to another node's desired state", func(t *testing.T) {
		nc, errs := nodeConn(t, s, "n1")
		_, err := nc.SubscribeSync(names.NodeFilter("n2"))
		require.NoError(t, err) // refused asynchronously
		wantViolation(t, errs, `Subscription to "cairn.node.n2.>"`)
	})
	// A DNS node name is one subject token (dots as tildes): neither it nor the short
	// name it starts with reaches the other's subjects.
	t.Run("a DNS node name and its short name are apart", func(t *testing.T) {
		nc, errs := nodeConn(t, s, "n1.rack2.example.com")
		_, err := nc.SubscribeSync(names.NodeFilter("n1.rack2.example.com"))
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		_, err = nc.SubscribeSync(names.NodeFilter("n1"))
		require.NoError(t, err)
		wantViolation(t, errs, `Subscription to "cairn.node.n1.>"`)
		nc1, errs1 := nodeConn(t, s, "n1")
		_, err = nc1.SubscribeSync("cairn.node.n1~rack2~example~com.>")
		require.NoError(t, err)
		wantViolation(t, errs1, `Subscription to "cairn.node.n1~rack2~example~com.>"`)
	})
	for _, subject := range []string{"_INBOX.>", "cairn.status.>", "cairn.ev.>", "cairn.node.>", "$JS.API.>", "_INBOX.cairn.node.n2.>"} {
		t.Run("subscribe "+subject, func(t *testing.T) {
			nc, errs := nodeConn(t, s, "n1")
			_, err := nc.SubscribeSync(subject)
			require.NoError(t, err)
			wantViolation(t, errs, `Subscription to "`+subject+`"`)
		})
	}
	t.Run("consume another node's desired state", func(t *testing.T) {
		nc, errs := nodeConn(t, s, "n1")
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err = js.OrderedConsumer(cctx, names.NodesStream(), jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{names.NodeFilter("n2")}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy})
		require.Error(t, err)
		wantViolation(t, errs, `Publish to "$JS.API.CONSUMER.CREATE.CAIRN_NODES.`)
	})
	t.Run("consume every node's desired state", func(t *testing.T) {
		nc, errs := nodeConn(t, s, "n1")
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err = js.OrderedConsumer(cctx, names.NodesStream(), jetstream.OrderedConsumerConfig{})
		require.Error(t, err)
		wantViolation(t, errs, `Publish to "$JS.API.CONSUMER.CREATE.CAIRN_NODES.`)
	})
	t.Run("consume its own subjects from another stream", func(t *testing.T) {
		nc, errs := nodeConn(t, s, "n1")
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err = js.OrderedConsumer(cctx, names.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.NodeFilter("n1")}})
		require.Error(t, err)
		wantViolation(t, errs, `Publish to "$JS.API.CONSUMER.CREATE.CAIRN_EVENTS.`)
	})
	t.Run("read another node's desired state directly", func(t *testing.T) {
		nc, errs := nodeConn(t, s, "n1")
		_, err := nc.Request("$JS.API.DIRECT.GET."+names.NodesStream()+"."+names.Node("n2", "drbd", "r-n2"), nil, time.Second)
		require.Error(t, err)
		wantViolation(t, errs, `Publish to "$JS.API.DIRECT.GET.CAIRN_NODES.cairn.node.n2.drbd.r-n2"`)
	})
	t.Run("publish status for another node", func(t *testing.T) {
		watch, err := control.SubscribeSync(names.StatusFilter("n2"))
		require.NoError(t, err)
		require.NoError(t, control.Flush())
		nc, errs := nodeConn(t, s, "n1")
		require.NoError(t, nc.Publish(names.Status("n2", "node", "n2"), []byte(`{"node":"n2"}`)))
		wantViolation(t, errs, `Publish to "cairn.status.n2.node.n2"`)
		_, err = watch.NextMsg(300 * time.Millisecond)
		require.ErrorIs(t, err, nats.ErrTimeout, "the forged heartbeat arrived")
	})
	t.Run("publish an event", func(t *testing.T) {
		before := servertest.LastSeq(t, s)
		nc, errs := nodeConn(t, s, "n1")
		require.NoError(t, nc.Publish(names.Event("node", "n9"), []byte(`{}`)))
		wantViolation(t, errs, `Publish to "cairn.ev.node.n9"`)
		require.Equal(t, before, servertest.LastSeq(t, s))
	})
	t.Run("send a command", func(t *testing.T) {
		before := servertest.LastSeq(t, s)
		nc, errs := nodeConn(t, s, "n1")
		_, err := nc.Request(names.Command("node.add"), []byte(`{"name":"n9","host":"h9","address":"10.0.0.9"}`), time.Second)
		require.Error(t, err)
		wantViolation(t, errs, `Publish to "cairn.cmd.node.add"`)
		require.Equal(t, before, servertest.LastSeq(t, s))
	})
	t.Run("its own status is allowed", func(t *testing.T) {
		watch, err := control.SubscribeSync(names.StatusFilter("n1"))
		require.NoError(t, err)
		require.NoError(t, control.Flush())
		nc, errs := nodeConn(t, s, "n1")
		require.NoError(t, nc.Publish(names.Status("n1", "drbd", "r-n1"), []byte(`{}`)))
		m, err := watch.NextMsg(5 * time.Second)
		require.NoError(t, err)
		require.Equal(t, "cairn.status.n1.drbd.r-n1", m.Subject)
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	})
}

// Connections without valid credentials are refused at CONNECT.
func TestConnectRefusals(t *testing.T) {
	s, _ := authServer(t)
	other, err := natsauth.Open(t.TempDir(), true)
	require.NoError(t, err)
	mine, err := s.Auth.NodeCreds("n1")
	require.NoError(t, err)
	n1, err := natsauth.ParseCreds(mine)
	require.NoError(t, err)
	n1pub, err := n1.Key.PublicKey()
	require.NoError(t, err)
	parse := func(b []byte, err error) natsauth.Creds {
		require.NoError(t, err)
		c, err := natsauth.ParseCreds(b)
		require.NoError(t, err)
		return c
	}
	credsOpts := func(c natsauth.Creds) []nats.Option {
		o, err := c.Options()
		require.NoError(t, err)
		return o
	}
	asN2 := n1
	asN2.Node = "n2" // n1's key under n2's name
	asControl := n1
	asControl.Role = natsauth.RoleControl // n1's key without a name
	tests := []struct {
		name string
		opts []nats.Option
	}{
		{name: "no credentials"},
		{name: "user and password", opts: []nats.Option{nats.UserInfo("n1", "secret")}},
		{name: "another deployment's node", opts: credsOpts(parse(other.NodeCreds("n1")))},
		{name: "another deployment's control user", opts: credsOpts(parse(other.ControlCreds()))},
		{name: "node key under another node's name", opts: credsOpts(asN2)},
		{name: "node key as the control user", opts: credsOpts(asControl)},
		{name: "node key with a password", opts: []nats.Option{nats.Nkey(n1pub, n1.Key.Sign), nats.UserInfo("n1", "x")}},
		{name: "node name as user and token", opts: []nats.Option{nats.Nkey(n1pub, n1.Key.Sign), nats.UserInfo("n1", ""), nats.Token("n1")}},
		{name: "wildcard node name", opts: []nats.Option{nats.Nkey(n1pub, n1.Key.Sign), nats.UserInfo("*", "")}},
		{name: "wrong signature", opts: []nats.Option{nats.Nkey(n1pub, func([]byte) ([]byte, error) { return make([]byte, 64), nil }), nats.UserInfo("n1", "")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, err := nats.Connect(s.NATSAddr, append(tt.opts, nats.NoReconnect())...)
			if err == nil {
				nc.Close()
			}
			require.Error(t, err)
			require.True(t, errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization violation"), "%v", err)
		})
	}
}

func TestParseCreds(t *testing.T) {
	a, err := natsauth.Open(t.TempDir(), true)
	require.NoError(t, err)
	node, err := a.NodeCreds("n1")
	require.NoError(t, err)
	again, err := a.NodeCreds("n1")
	require.NoError(t, err)
	require.Equal(t, node, again, "node credentials are deterministic")
	control, err := a.ControlCreds()
	require.NoError(t, err)
	seed := node[strings.Index(string(node), "-----BEGIN"):]
	tests := []struct {
		name string
		data string
		role string
		node string
		err  string
	}{
		{name: "node", data: string(node), role: natsauth.RoleNode, node: "n1"},
		{name: "control", data: string(control), role: natsauth.RoleControl},
		{name: "no role", data: string(seed), err: "credentials: no role line (not a Cairn credentials file)"},
		{name: "bad role", data: "role: admin\n" + string(seed), err: `credentials: role "admin": must be control or node`},
		{name: "node without name", data: "role: node\n" + string(seed), err: `credentials: node "": must be labels of 1-63 letters, digits, '-' or '_', each starting with a letter or digit, joined by dots (at most 253 characters)`},
		{name: "node with wildcard", data: "role: node\nnode: n1.>\n" + string(seed), err: `credentials: node "n1.>": must be`},
		{name: "control with node", data: "role: control\nnode: n1\n" + string(seed), err: "credentials: role control takes no node"},
		{name: "no seed", data: "role: control\n", err: "credentials: user seed:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := natsauth.ParseCreds([]byte(tt.data))
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.role, c.Role)
			require.Equal(t, tt.node, c.Node)
		})
	}
	_, err = a.NodeCreds("n1.>")
	require.Error(t, err)
	_, err = natsauth.Open(t.TempDir(), false)
	require.ErrorContains(t, err, "no master key")
	bad := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bad, natsauth.MasterKeyFile), []byte("abc\n"), 0o600))
	_, err = natsauth.Open(bad, false)
	require.ErrorContains(t, err, "must hold 32 bytes as 64 hex digits")
}

// serve's own connection and the control credentials have full access; the key and
// the control credentials survive a restart, so issued credentials stay valid.
func TestControlAndRestart(t *testing.T) {
	data := t.TempDir()
	cfg := server.Config{DataDir: data, NATSListen: "127.0.0.1:0", HTTPListen: "-", Auth: true,
		Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)}
	s := servertest.StartConfig(t, cfg)
	key, err := s.Auth.NodeKey("n1")
	require.NoError(t, err)
	creds, err := s.Auth.NodeCreds("n1")
	require.NoError(t, err)
	control, err := os.ReadFile(s.ControlCreds)
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Join(data, "auth", natsauth.MasterKeyFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.NoError(t, s.Close())

	s = servertest.StartConfig(t, cfg)
	again1, err := s.Auth.NodeKey("n1")
	require.NoError(t, err)
	require.Equal(t, key, again1)
	again, err := os.ReadFile(s.ControlCreds)
	require.NoError(t, err)
	require.Equal(t, control, again)
	path := filepath.Join(t.TempDir(), "n1.creds")
	require.NoError(t, os.WriteFile(path, creds, 0o600))
	connectCreds(t, s, path)
	cc := connectCreds(t, s, s.ControlCreds)
	// What the nats CLI sends: `--nkey FILE` for the control user (the seed read from
	// the credentials file), `--user n1 --nkey FILE` (the name as a token) for a node.
	seedOpt, err := nats.NkeyOptionFromSeed(s.ControlCreds)
	require.NoError(t, err)
	cli, err := nats.Connect(s.NATSAddr, seedOpt)
	require.NoError(t, err)
	cli.Close()
	nodeSeed, err := nats.NkeyOptionFromSeed(path)
	require.NoError(t, err)
	cli, err = nats.Connect(s.NATSAddr, nodeSeed, nats.Token("n1"))
	require.NoError(t, err)
	cli.Close()
	r := servertest.Send(t, cc, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	require.True(t, r.OK, "%+v", r)
}

func TestAuthWithExternalNATSRefused(t *testing.T) {
	_, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), NATSURL: "nats://127.0.0.1:1", Auth: true, Log: zerolog.Nop()})
	require.EqualError(t, err, "--auth secures the embedded NATS server; with --nats use that NATS system's own users and --nats-creds")
}

// TestControlCredsFollowARotatedMasterKey: after master.key is replaced, the control
// credentials file left from the old key is rewritten, so serve (which connects with
// it) still starts; a current file is left as it is.
func TestControlCredsFollowARotatedMasterKey(t *testing.T) {
	dir := t.TempDir()
	a, err := natsauth.Open(dir, true)
	require.NoError(t, err)
	path, err := a.EnsureControlCreds()
	require.NoError(t, err)
	old, err := os.ReadFile(path)
	require.NoError(t, err)
	info, err := os.Stat(path)
	require.NoError(t, err)
	_, err = a.EnsureControlCreds()
	require.NoError(t, err)
	again, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, info.ModTime(), again.ModTime(), "a current file is not rewritten")

	require.NoError(t, os.Remove(filepath.Join(dir, natsauth.MasterKeyFile)))
	b, err := natsauth.Open(dir, true)
	require.NoError(t, err)
	_, err = b.EnsureControlCreds()
	require.NoError(t, err)
	now, err := os.ReadFile(path)
	require.NoError(t, err)
	want, err := b.ControlCreds()
	require.NoError(t, err)
	require.NotEqual(t, string(old), string(now), "the old key's file was kept")
	require.Equal(t, string(want), string(now))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
}

// TestNodeUserJetStreamAPIIsItsOwnConsumerOnly (issue 11): with n1's credentials one
// can neither pull from nor delete n2's consumer (whose name is known: agent-n2), nor
// attach for n2, nor create any consumer, a push consumer delivering to cairn.ev.* or
// cairn.cmd.* least of all. Before, any CAIRN_NODES consumer name was allowed.
func TestNodeUserJetStreamAPIIsItsOwnConsumerOnly(t *testing.T) {
	s, control := authServer(t)
	ctx := context.Background()
	cjs, err := jetstream.New(control)
	require.NoError(t, err)
	_, err = events.AttachAgentConsumer(ctx, cjs, names, "n2", 0) // n2's agent attached
	require.NoError(t, err)
	denied := func(name, subject string, body []byte, want string) {
		t.Run(name, func(t *testing.T) {
			nc, errs := nodeConn(t, s, "n1")
			_, err := nc.Request(subject, body, time.Second)
			require.Error(t, err)
			wantViolation(t, errs, want)
		})
	}
	stream := names.NodesStream()
	denied("pull from n2's consumer", "$JS.API.CONSUMER.MSG.NEXT."+stream+".agent-n2", []byte(`{"batch":1}`), `Publish to "$JS.API.CONSUMER.MSG.NEXT.CAIRN_NODES.agent-n2"`)
	denied("look up n2's consumer", "$JS.API.CONSUMER.INFO."+stream+".agent-n2", nil, `Publish to "$JS.API.CONSUMER.INFO.CAIRN_NODES.agent-n2"`)
	denied("delete n2's consumer", "$JS.API.CONSUMER.DELETE."+stream+".agent-n2", nil, `Publish to "$JS.API.CONSUMER.DELETE.CAIRN_NODES.agent-n2"`)
	denied("delete its own consumer", "$JS.API.CONSUMER.DELETE."+stream+".agent-n1", nil, `Publish to "$JS.API.CONSUMER.DELETE.CAIRN_NODES.agent-n1"`)
	denied("attach for n2", names.AgentAttach("n2"), nil, `Publish to "cairn.agent.n2.attach"`)
	denied("ask for a remote's credentials as n2", names.AgentRemote("n2"), []byte(`{"remote":"s3"}`), `Publish to "cairn.agent.n2.remote"`)
	denied("read the received store as n2", names.AgentReceived("n2"), []byte(`{"key":"cairn/backups/r1/s1.json"}`), `Publish to "cairn.agent.n2.received"`)
	denied("read the received object store directly", "$JS.API.STREAM.INFO.OBJ_CAIRN_RECEIVED", nil, `Publish to "$JS.API.STREAM.INFO.OBJ_CAIRN_RECEIVED"`)
	push := []byte(`{"stream_name":"CAIRN_NODES","config":{"name":"agent-n1","filter_subject":"cairn.node.n1.>","deliver_subject":"cairn.ev.node.x","ack_policy":"none"}}`)
	denied("a push consumer into the events", "$JS.API.CONSUMER.CREATE."+stream+".agent-n1.cairn.node.n1.>", push, `Publish to "$JS.API.CONSUMER.CREATE.CAIRN_NODES.agent-n1.cairn.node.n1.>"`)
	denied("a consumer of another name", "$JS.API.CONSUMER.CREATE."+stream+".x.cairn.node.n1.>", []byte(`{}`), `Publish to "$JS.API.CONSUMER.CREATE.CAIRN_NODES.x.cairn.node.n1.>"`)

	// n2's consumer is still there, untouched.
	_, err = cjs.Consumer(ctx, stream, "agent-n2")
	require.NoError(t, err)
}
