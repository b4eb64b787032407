package commands_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/commands/nodes"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const cluster = `{"name":"c1","failure_domains":true,"data_chunks":2,"parity_chunks":1}`

// nodeBody is node.add of name on an address of its own (derived from the name).
func nodeBody(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	a := h.Sum32()
	return fmt.Sprintf(`{"name":%q,"host":"h-%s","address":"10.%d.%d.%d","failure_domain":"RACK1","role":"storage"}`, name, name, a>>16&255, a>>8&255, a&255)
}

func TestBadInputIsRefusedAndAppendsNothing(t *testing.T) {
	s := servertest.Start(t)
	nc := servertest.Client(t, s)
	require.True(t, servertest.Send(t, nc, "cluster.create", cluster).OK)
	before := servertest.LastSeq(t, s)

	cases := []struct {
		name, verb, body, code, field, msg string
	}{
		{"malformed JSON", "node.add", `{"name":`, cairn.CodeInvalidArgument, "", "not a valid JSON"},
		{"not an object", "node.add", `[1,2]`, cairn.CodeInvalidArgument, "", "must be object"},
		{"empty body", "node.add", ``, cairn.CodeInvalidArgument, "", "not a valid JSON"},
		{"unknown field", "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1","failure_domain":"R1","colour":"red"}`, cairn.CodeInvalidArgument, "colour", "not a known field"},
		{"wrong type", "node.add", `{"name":7,"host":"h1","address":"10.0.0.1"}`, cairn.CodeInvalidArgument, "name", "must be string, not number"},
		{"empty name", "node.add", `{"name":"","host":"h1","address":"10.0.0.1"}`, cairn.CodeInvalidArgument, "name", "must not be empty"},
		{"over-long name", "rd.create", `{"name":"` + strings.Repeat("r", 64) + `"}`, cairn.CodeInvalidArgument, "name", "at most 63"},
		{"over-long node label", "node.add", `{"name":"` + strings.Repeat("n", 64) + `","host":"h1","address":"10.0.0.1"}`, cairn.CodeInvalidArgument, "name", "must match"},
		{"over-long node name", "node.add", `{"name":"` + strings.Repeat("n.", 127) + `n","host":"h1","address":"10.0.0.1"}`, cairn.CodeInvalidArgument, "name", "at most 253"},
		{"definition name with a dot", "rd.create", `{"name":"r.1"}`, cairn.CodeInvalidArgument, "name", "must match"},
		{"node name with an empty label", "node.add", `{"name":"n..1","host":"h1","address":"10.0.0.1"}`, cairn.CodeInvalidArgument, "name", "must match"},
		{"node name with a tilde", "node.remove", `{"name":"n~1"}`, cairn.CodeInvalidArgument, "name", "must match"},
		{"name with a wildcard", "node.remove", `{"name":"*"}`, cairn.CodeInvalidArgument, "name", "must match"},
		{"missing field", "node.add", `{"name":"n1","address":"10.0.0.1"}`, cairn.CodeInvalidArgument, "host", "is required"},
		{"bad address", "node.add", `{"name":"n1","host":"h1","address":"10.0.0.256"}`, cairn.CodeInvalidArgument, "address", "10.0.0.256 is not an ipv4 or ipv6 address"},
		{"host name as address", "node.add", `{"name":"n1","host":"h1","address":"n1.example.com"}`, cairn.CodeInvalidArgument, "address", "a host name is not taken"},
		{"every error named", "node.add", `{"name":"n1","host":"h1","address":"nowhere","role":"boss"}`, cairn.CodeInvalidArgument, "address", "; also: role"},
		{"bad role", "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1","role":"boss"}`, cairn.CodeInvalidArgument, "role", "must be one of"},
		{"bad state", "node.set-state", `{"name":"n1","state":"sleeping"}`, cairn.CodeInvalidArgument, "state", "must be one of"},
		{"set-state with nothing to set", "node.set-state", `{"name":"n1"}`, cairn.CodeInvalidArgument, "state", "is required"},
		{"negative failed devices", "node.set-state", `{"name":"n1","devices_failed":-1}`, cairn.CodeInvalidArgument, "devices_failed", "minimum"},
		{"bad scheme", "cluster.create", `{"name":"c2","failure_domains":true,"data_chunks":3,"parity_chunks":1}`, cairn.CodeInvalidArgument, "data_chunks", "must be one of"},
		{"label required with failure domains", "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`, cairn.CodeInvalidArgument, "failure_domain", "required"},
		{"payload over the limit", "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1","pad":"` + strings.Repeat("x", 70<<10) + `"}`, cairn.CodePayloadTooLarge, "", "over the limit"},
		{"unknown verb", "node.explode", `{}`, cairn.CodeUnknownCommand, "", "unknown command"},
		{"mistyped verb", "node.ad", `{}`, cairn.CodeUnknownCommand, "", `unknown command "node.ad"; did you mean node.add?`},
		// Invalid UTF-8 was stored rewritten with replacement characters (issue 11).
		{"invalid UTF-8 in a string", "node.set-state", "{\"name\":\"n1\",\"state\":\"offline\",\"reason\":\"disk \xff gone\"}", cairn.CodeInvalidArgument, "reason", "not valid UTF-8"},
		{"invalid UTF-8 in a key", "node.add", "{\"name\":\"n1\",\"h\xc3st\":\"h1\",\"address\":\"10.0.0.1\"}", cairn.CodeInvalidArgument, "h\ufffdst", "not valid UTF-8"},
		{"bad command id", "node.add", `{"command_id":"has space","name":"n1","host":"h1","address":"10.0.0.1"}`, cairn.CodeInvalidArgument, "command_id", "command_id must be"},
		{"unknown node", "node.remove", `{"name":"ghost"}`, cairn.CodeNotFound, "", "not in the cluster"},
		{"second cluster", "cluster.create", `{"name":"c2","failure_domains":false,"data_chunks":1,"parity_chunks":1}`, cairn.CodeAlreadyExists, "", "fixed at creation"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := servertest.Send(t, nc, c.verb, c.body)
			require.False(t, r.OK, "accepted: %+v", r)
			assert.Equal(t, c.code, r.Error.Code)
			assert.Equal(t, c.field, r.Error.Field)
			assert.Contains(t, r.Error.Message, c.msg)
			assert.Empty(t, r.Events)
		})
	}
	assert.Equal(t, before, servertest.LastSeq(t, s), "a refused command appended something")
}

func TestConcurrentAddOfOneNameAcceptsExactlyOne(t *testing.T) {
	s := servertest.Start(t)
	nc := servertest.Client(t, s)
	require.True(t, servertest.Send(t, nc, "cluster.create", cluster).OK)

	const n = 50
	replies := make([]admission.Reply, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = servertest.SendAnswered(t, nc, "node.add", nodeBody("n1"))
		}()
	}
	wg.Wait()
	codes := map[string]int{}
	for _, r := range replies {
		if r.OK {
			codes["ok"]++
		} else {
			codes[r.Error.Code]++
		}
	}
	assert.Equal(t, map[string]int{"ok": 1, cairn.CodeAlreadyExists: n - 1}, codes)
	// cluster.created, then one node.add: node.added, its host's claim (failure domains)
	// and the command.checked carrying its read of the cluster.
	assert.Equal(t, uint64(4), servertest.LastSeq(t, s), "exactly cluster.created and one node.add")
}

// Without failure domains a node's commands depend on that node alone (its subject is
// the boundary), so commands on different nodes never contend. (With failure domains,
// TestCommandsThatLostTheSameBoundaryTakeTurns: 60 definitions created at once all
// decide on the whole stream. Each conditional append lets one through; the others
// lose, and from then on take turns on the boundary's retry lock, so every command
// lands within 3 attempts (without the lock most would race and lose again).
func TestCommandsThatLostTheSameBoundaryTakeTurns(t *testing.T) {
	s := servertest.Start(t, func(c *server.Config) { c.Admission.MaxAttempts = 3 })
	nc := servertest.Client(t, s)
	require.True(t, servertest.Send(t, nc, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`).OK)
	const n = 60
	var wg sync.WaitGroup
	replies := make([]admission.Reply, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i] = servertest.SendAnswered(t, nc, "rd.create", fmt.Sprintf(`{"name":"r%02d"}`, i))
		}()
	}
	close(start)
	wg.Wait()
	for i, r := range replies {
		assert.True(t, r.OK, "r%02d: %+v", i, r.Error)
	}
	assert.Equal(t, uint64(1+2*n), servertest.LastSeq(t, s), "each one rd.created and port.claimed")
}

// node.add reads every node and serializes on the stream; see the topology tests.)
func TestConcurrentCommandsOnDifferentNodesAllLand(t *testing.T) {
	s := servertest.Start(t)
	nc := servertest.Client(t, s)
	require.True(t, servertest.Send(t, nc, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":2,"parity_chunks":1}`).OK)

	const n = 50
	var wg sync.WaitGroup
	errs := make(chan string, 2*n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("n%02d", i)
			if r := servertest.SendAnswered(t, nc, "node.add", nodeBody(name)); !r.OK {
				errs <- name + ": " + r.Error.Message
				return
			}
			if r := servertest.SendAnswered(t, nc, "node.set-state", fmt.Sprintf(`{"name":%q,"state":"offline"}`, name)); !r.OK {
				errs <- name + ": " + r.Error.Message
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	v, err := s.DB.Read()
	require.NoError(t, err)
	defer v.Close()
	nodes, err := v.Nodes()
	require.NoError(t, err)
	require.Len(t, nodes, n)
	for _, node := range nodes {
		assert.Equal(t, "offline", node.Status.State, node.Spec.Name) // no lost update
	}
	assert.Equal(t, uint64(1+2*n), servertest.LastSeq(t, s))
}

func TestSameCommandIDAppendsOnceAndRepliesTheSame(t *testing.T) {
	s := servertest.Start(t)
	nc := servertest.Client(t, s)
	require.True(t, servertest.Send(t, nc, "cluster.create", cluster).OK)

	first := servertest.Send(t, nc, "node.add", nodeBody("n1"), admission.HeaderCommandID, "add-n1")
	require.True(t, first.OK)
	for range 2 {
		again := servertest.Send(t, nc, "node.add", nodeBody("n1"), admission.HeaderCommandID, "add-n1")
		assert.Equal(t, first, again)
	}
	// the body field is the same key as the header
	viaBody := servertest.Send(t, nc, "node.add", `{"command_id":"add-n1",`+nodeBody("n1")[1:])
	assert.Equal(t, first, viaBody)
	require.Len(t, first.Events, 3, "node.added, host.changed, command.checked")
	assert.Equal(t, uint64(4), servertest.LastSeq(t, s))

	// concurrent deliveries of one id: one append, one answer
	var wg sync.WaitGroup
	replies := make([]admission.Reply, 3)
	for i := range replies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = servertest.SendAnswered(t, nc, "node.add", nodeBody("n2"), admission.HeaderCommandID, "add-n2")
		}()
	}
	wg.Wait()
	for _, r := range replies {
		require.True(t, r.OK, "%+v", r.Error)
		assert.Equal(t, replies[0], r)
	}
	assert.Equal(t, uint64(7), servertest.LastSeq(t, s), "one more node.add of three events")

	// a refusal is remembered too: the retried id gets the first answer
	r1 := servertest.Send(t, nc, "node.remove", `{"name":"n9"}`, admission.HeaderCommandID, "rm-n9")
	require.Equal(t, cairn.CodeNotFound, r1.Error.Code)
	require.True(t, servertest.Send(t, nc, "node.add", nodeBody("n9")).OK)
	assert.Equal(t, r1, servertest.Send(t, nc, "node.remove", `{"name":"n9"}`, admission.HeaderCommandID, "rm-n9"))
}

func TestNodeLifecycle(t *testing.T) {
	s := servertest.Start(t)
	nc := servertest.Client(t, s)
	r := servertest.Send(t, nc, "node.add", nodeBody("n1"))
	require.Equal(t, cairn.CodePreconditionFailed, r.Error.Code, "node.add before cluster.create")
	require.True(t, servertest.Send(t, nc, "cluster.create", cluster).OK)
	require.True(t, servertest.Send(t, nc, "node.add", nodeBody("n1")).OK)

	r = servertest.Send(t, nc, "node.set-state", `{"name":"n1","state":"offline","reason":"maintenance"}`)
	require.True(t, r.OK)
	require.Len(t, r.Events, 1)
	assert.Equal(t, "node.state-changed", r.Events[0].Type)

	seq := servertest.LastSeq(t, s)
	r = servertest.Send(t, nc, "node.set-state", `{"name":"n1","state":"offline"}`)
	require.True(t, r.OK)
	assert.Empty(t, r.Events)
	assert.Contains(t, r.Warnings[0], "already offline")
	assert.Equal(t, seq, servertest.LastSeq(t, s))

	require.True(t, servertest.Send(t, nc, "node.remove", `{"name":"n1"}`).OK)
	assert.Equal(t, cairn.CodeNotFound, servertest.Send(t, nc, "node.remove", `{"name":"n1"}`).Error.Code)
	assert.Equal(t, cairn.CodeNotFound, servertest.Send(t, nc, "node.set-state", `{"name":"n1","state":"online"}`).Error.Code)
	// a removed name can join again
	r = servertest.Send(t, nc, "node.add", nodeBody("n1"))
	require.True(t, r.OK, "%+v", r.Error)
	v, err := s.DB.Read()
	require.NoError(t, err)
	defer v.Close()
	n, ok, err := v.Node("n1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "online", n.Status.State)
	assert.Equal(t, r.Events[0].Seq, n.Spec.AddedSeq)
}

// laggingAdmission is a second admission on s's stream whose own views start empty and
// only begin to follow the stream 300 ms later: its first decisions are on a stale view.
func laggingAdmission(t *testing.T, s *server.Server) (*admission.Admission, context.Context) {
	t.Helper()
	db, err := projections.OpenInMem()
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	proj, err := projections.NewProjector(db, s.JS, s.Store.Names(), zerolog.Nop())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = proj.Run(ctx, 0)
	}()
	return commands.New(s.Store, db, proj, zerolog.Nop(), commands.Options{}), ctx
}

// A refusal decided on a view that lags the stream must be decided again on current
// state, not returned. A second admission, whose projector starts late, sees node n1
// missing from its views while the stream already holds it.
func TestRefusalIsConfirmedAgainstTheStream(t *testing.T) {
	s := servertest.Start(t)
	require.True(t, servertest.Submit(s, "cluster.create", cluster).OK)
	require.True(t, servertest.Submit(s, "node.add", nodeBody("n1")).OK)

	lagging, ctx := laggingAdmission(t, s)
	r := lagging.Submit(ctx, admission.Request{Verb: "node.remove", Body: []byte(`{"name":"n1"}`)})
	require.True(t, r.OK, "refused on a stale view: %+v", r.Error)
	assert.Equal(t, "node.removed", r.Events[0].Type)
}

// The same for "no cluster yet": node.add on a view that has not seen cluster.create
// (another serve accepted it) must wait for it, not refuse. Its boundary was the node's
// subject, which cluster.create does not touch, so the stale refusal was confirmed.
func TestNoClusterRefusalIsConfirmedAgainstTheStream(t *testing.T) {
	s := servertest.Start(t)
	require.True(t, servertest.Submit(s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`).OK)

	lagging, ctx := laggingAdmission(t, s)
	r := lagging.Submit(ctx, admission.Request{Verb: "node.add", Body: []byte(`{"name":"n1","host":"h1","address":"10.0.0.1"}`)})
	require.True(t, r.OK, "refused on a stale view: %+v", r.Error)
	assert.Equal(t, "node.added", r.Events[0].Type)
}

func TestDecideNodeAdd(t *testing.T) {
	withFD := &projections.Cluster{Name: "c1", FailureDomains: true, DataChunks: 2, ParityChunks: 1}
	noFD := &projections.Cluster{Name: "c1", DataChunks: 1, ParityChunks: 1}
	cases := []struct {
		name     string
		cluster  *projections.Cluster
		existing *projections.NodeSpec
		cmd      nodes.NodeAdd
		code     string
		role     string
		warns    int
	}{
		{"no cluster", nil, nil, nodes.NodeAdd{Name: "n1"}, cairn.CodePreconditionFailed, "", 0},
		{"duplicate", withFD, &projections.NodeSpec{Name: "n1"}, nodes.NodeAdd{Name: "n1", FailureDomain: "R1"}, cairn.CodeAlreadyExists, "", 0},
		{"label required", withFD, nil, nodes.NodeAdd{Name: "n1"}, cairn.CodeInvalidArgument, "", 0},
		{"role defaults to storage", withFD, nil, nodes.NodeAdd{Name: "n1", FailureDomain: "R1"}, "", "storage", 0},
		{"secondary kept", withFD, nil, nodes.NodeAdd{Name: "n1", FailureDomain: "R1", Role: "secondary"}, "", "secondary", 0},
		{"label without failure domains warns", noFD, nil, nodes.NodeAdd{Name: "n1", FailureDomain: "R1"}, "", "storage", 1},
		{"no label, no failure domains", noFD, nil, nodes.NodeAdd{Name: "n1"}, "", "storage", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, warns, err := nodes.DecideNodeAdd(c.cluster, c.existing, c.cmd)
			assert.Equal(t, c.code, cairn.ErrorCode(err))
			assert.Len(t, warns, c.warns)
			if c.code == "" {
				require.NotNil(t, ev)
				assert.Equal(t, c.role, ev.Role)
				assert.Equal(t, c.cmd.Name, ev.Name)
			}
		})
	}
}

func TestDecideNodeSetState(t *testing.T) {
	online := &projections.Node{Spec: projections.NodeSpec{Name: "n1"}, Status: projections.NodeStatus{State: "online"}}
	cases := []struct {
		name     string
		existing *projections.Node
		state    string
		code     string
		event    bool
	}{
		{"unknown node", nil, "offline", cairn.CodeNotFound, false},
		{"change", online, "offline", "", true},
		{"same state is a no-op", online, "online", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, _, err := nodes.DecideNodeSetState(c.existing, nodes.NodeSetState{Name: "n1", State: c.state})
			assert.Equal(t, c.code, cairn.ErrorCode(err))
			assert.Equal(t, c.event, ev != nil)
			if ev != nil {
				assert.Equal(t, "online", ev.Previous)
			}
		})
	}
}

// TestCommandDeadlineBoundsEveryWait (issue 11): a command's whole handling is bounded
// by Options.Deadline. Here the views never apply anything (the projector does not
// run), so the accepted command's reply wait would last ReplyWait (5 s); the deadline
// ends it after 300 ms.
func TestCommandDeadlineBoundsEveryWait(t *testing.T) {
	s := servertest.Start(t)
	require.True(t, servertest.Submit(s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`).OK)
	stalled, err := projections.NewProjector(s.DB, s.JS, s.Store.Names(), zerolog.Nop()) // never Run
	require.NoError(t, err)
	a := commands.New(s.Store, s.DB, stalled, zerolog.Nop(), commands.Options{Options: admission.Options{Deadline: 300 * time.Millisecond, ReplyWait: 5 * time.Second}})
	start := time.Now()
	r := a.Submit(context.Background(), admission.Request{Verb: "node.add", Body: []byte(`{"name":"n1","host":"h1","address":"10.0.0.1"}`)})
	took := time.Since(start)
	assert.Less(t, took, 2*time.Second, "the reply waited past the deadline")
	assert.GreaterOrEqual(t, took, 250*time.Millisecond)
	require.True(t, r.OK, "%+v", r.Error) // stored: the reply says the views lag
	assert.Contains(t, r.Warnings, "events are stored but the views have not applied them yet")
}

// TestCommandIDsAreBoundToTheRequest (issue 11): a command id used again for another
// request (another body or verb) is refused idempotency_mismatch, for an accepted and
// for a refused command; the same request again gets the first answer.
func TestCommandIDsAreBoundToTheRequest(t *testing.T) {
	s := servertest.Start(t)
	nc := servertest.Client(t, s)
	require.True(t, servertest.Send(t, nc, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`).OK)
	id := []string{"Cairn-Command-Id", "add-n1"}
	first := servertest.Send(t, nc, "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`, id...)
	require.True(t, first.OK)
	again := servertest.Send(t, nc, "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`, id...)
	require.True(t, again.OK)
	assert.Equal(t, first.Events, again.Events, "the same request: the first answer")
	before := servertest.LastSeq(t, s)
	other := servertest.Send(t, nc, "node.add", `{"name":"n2","host":"h2","address":"10.0.0.2"}`, id...)
	require.False(t, other.OK)
	assert.Equal(t, cairn.CodeIdempotencyMismatch, other.Error.Code)
	verb := servertest.Send(t, nc, "node.remove", `{"name":"n1"}`, id...)
	require.False(t, verb.OK)
	assert.Equal(t, cairn.CodeIdempotencyMismatch, verb.Error.Code)
	assert.Equal(t, before, servertest.LastSeq(t, s), "nothing appended")

	rid := []string{"Cairn-Command-Id", "remove-ghost"}
	ref := servertest.Send(t, nc, "node.remove", `{"name":"ghost"}`, rid...)
	require.False(t, ref.OK)
	assert.Equal(t, cairn.CodeNotFound, ref.Error.Code)
	mis := servertest.Send(t, nc, "node.remove", `{"name":"n1"}`, rid...)
	require.False(t, mis.OK)
	assert.Equal(t, cairn.CodeIdempotencyMismatch, mis.Error.Code, "a refused id reused for another body")
}

// TestRefusalsAreSharedByEveryServe (issue 11): a command refused by one serve and
// retried with the same id on another gets the same refusal, though the state changed
// in between (before, the second serve accepted it).
func TestRefusalsAreSharedByEveryServe(t *testing.T) {
	s := servertest.Start(t)
	ctx := context.Background()
	require.True(t, servertest.Submit(s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`).OK)
	replies, err := admission.NewReplyKV(ctx, s.JS, "TEST_REPLIES", time.Minute, 1)
	require.NoError(t, err)
	serveA := commands.New(s.Store, s.DB, s.Projector, zerolog.Nop(), commands.Options{Options: admission.Options{Replies: replies}})
	serveB := commands.New(s.Store, s.DB, s.Projector, zerolog.Nop(), commands.Options{Options: admission.Options{Replies: replies}})
	remove := admission.Request{Verb: "node.remove", Body: []byte(`{"name":"n1"}`), CommandID: "remove-n1"}
	r := serveA.Submit(ctx, remove)
	require.False(t, r.OK)
	require.Equal(t, cairn.CodeNotFound, r.Error.Code)
	require.True(t, serveA.Submit(ctx, admission.Request{Verb: "node.add", Body: []byte(`{"name":"n1","host":"h1","address":"10.0.0.1"}`)}).OK)
	r = serveB.Submit(ctx, remove) // the retry lands on another serve
	require.False(t, r.OK, "the retry was accepted by another serve: %+v", r)
	assert.Equal(t, cairn.CodeNotFound, r.Error.Code)
}

func TestRequestDigest(t *testing.T) {
	d := admission.RequestDigest("node.add", []byte(`{"name":"n1","host":"h1"}`))
	assert.Equal(t, d, admission.RequestDigest("node.add", []byte(`{ "host": "h1", "name": "n1" }`)), "key order and spaces")
	assert.Equal(t, d, admission.RequestDigest("node.add", []byte(`{"command_id":"x","name":"n1","host":"h1"}`)), "the id in the body")
	assert.NotEqual(t, d, admission.RequestDigest("node.add", []byte(`{"name":"n2","host":"h1"}`)))
	assert.NotEqual(t, d, admission.RequestDigest("node.remove", []byte(`{"name":"n1","host":"h1"}`)))
	assert.NotEqual(t, admission.RequestDigest("x", []byte(`{"n":1.0}`)), admission.RequestDigest("x", []byte(`{"n":1}`)), "numbers as written")
}

// TestAPanickingCommandIsAnsweredAndTheProcessLives (issue 11): a handler that panics
// gets its command answered internal (over NATS, as clients send it), is logged and
// counted, and the next command is handled as usual.
func TestAPanickingCommandIsAnsweredAndTheProcessLives(t *testing.T) {
	s := servertest.Start(t)
	// The handler is replaced before any command reaches admission's workers, and the
	// commands go over serve's own in-process connection, so the race detector sees the
	// replacement happen before the workers read it.
	require.True(t, servertest.Submit(s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`).OK)
	nc := s.NC
	s.Admission.Register(decide.Handler{Verb: "node.set-state", Decide: func(*projections.View, events.Names, []byte) (decide.Decision, error) {
		var m map[string]int
		m["boom"]++ // a nil map: panics
		return decide.Decision{}, nil
	}})
	r := servertest.Send(t, nc, "node.set-state", `{"name":"n1","state":"offline"}`)
	require.False(t, r.OK)
	assert.Equal(t, cairn.CodeInternal, r.Error.Code)
	assert.Contains(t, r.Error.Message, "a bug, logged")
	require.True(t, servertest.Send(t, nc, "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`).OK, "the next command")
}

// Admission keeps the last 1,000 refusals, newest first, with verb, actor and error
// (LINSTOR's error reports show them); accepted commands are not among them.
func TestRecentRefusals(t *testing.T) {
	s := servertest.Start(t)
	ctx := context.Background()
	require.True(t, s.Admission.Submit(ctx, admission.Request{Verb: "cluster.create", Actor: "ops",
		Body: []byte(`{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)}).OK)
	for i := range 1005 {
		r := s.Admission.Submit(ctx, admission.Request{Verb: "node.remove", Actor: "ops", Body: []byte(fmt.Sprintf(`{"name":"ghost%d"}`, i))})
		require.False(t, r.OK)
	}
	got := s.Admission.RecentRefusals()
	require.Len(t, got, 1000, "bounded")
	assert.Equal(t, "node.remove", got[0].Verb)
	assert.Equal(t, "ops", got[0].Actor)
	assert.Contains(t, got[0].Error.Message, "ghost1004", "newest first")
	assert.Contains(t, got[999].Error.Message, "ghost5 ", "the oldest five are gone")
	assert.False(t, got[0].At.IsZero())
}

// A second node on an address another node has is accepted with a warning, never
// silently: replicas of one resource on both would share DRBD's endpoint.
func TestDuplicateNodeAddressWarns(t *testing.T) {
	s := servertest.Start(t)
	require.True(t, servertest.Submit(s, "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`).OK)
	r := servertest.Submit(s, "node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`)
	require.True(t, r.OK)
	assert.Empty(t, r.Warnings)
	r = servertest.Submit(s, "node.add", `{"name":"n2","host":"h2","address":"10.0.0.1"}`)
	require.True(t, r.OK)
	require.Len(t, r.Warnings, 1)
	assert.Contains(t, r.Warnings[0], "node n1 has the same address 10.0.0.1")
	// The address index follows removals: only n2 has it now.
	require.True(t, servertest.Submit(s, "node.remove", `{"name":"n1"}`).OK)
	r = servertest.Submit(s, "node.add", `{"name":"n3","host":"h3","address":"10.0.0.1"}`)
	require.True(t, r.OK)
	require.Len(t, r.Warnings, 1)
	assert.Contains(t, r.Warnings[0], "node n2 has the same address")
	// Many on one address: a few are named, not all (the cost of a node.add must not
	// grow with them).
	for i := 4; i <= 8; i++ {
		require.True(t, servertest.Submit(s, "node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.1"}`, i, i)).OK)
	}
	r = servertest.Submit(s, "node.add", `{"name":"n9","host":"h9","address":"10.0.0.1"}`)
	require.True(t, r.OK)
	require.Len(t, r.Warnings, 1)
	assert.Contains(t, r.Warnings[0], "nodes n2, n3, n4 and others have the same address 10.0.0.1")
}

// A refusal is confirmed with reads the events stream's leader answers (its message get
// API), never with a direct get, which any replica may answer: a follower that has not
// stored the latest event yet would confirm a refusal decided on stale views (seen on
// a cluster: pool.import refused 325 ms after the export it depended on was
// acknowledged). Observed on the wire: the confirmation of a refused node.add reads
// cairn.ev.node.n1 through $JS.API.STREAM.MSG.GET, not $JS.API.DIRECT.GET.
func TestRefusalsAreConfirmedByTheStreamLeader(t *testing.T) {
	s := servertest.Start(t)
	nc := servertest.Client(t, s)
	require.True(t, servertest.Send(t, nc, "cluster.create", cluster).OK)
	require.True(t, servertest.Send(t, nc, "node.add", nodeBody("n1")).OK)
	direct, err := nc.SubscribeSync("$JS.API.DIRECT.GET.CAIRN_EVENTS.>")
	require.NoError(t, err)
	leader, err := nc.SubscribeSync("$JS.API.STREAM.MSG.GET.CAIRN_EVENTS")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	r := servertest.Send(t, nc, "node.add", nodeBody("n1"))
	require.False(t, r.OK)
	require.Equal(t, cairn.CodeAlreadyExists, r.Error.Code)
	require.NoError(t, nc.Flush())
	m, err := leader.NextMsg(2 * time.Second)
	require.NoError(t, err, "the refusal was not confirmed through the stream leader's message get")
	assert.Contains(t, string(m.Data), `"last_by_subj":"cairn.ev.node.n1"`)
	if m, err := direct.NextMsg(200 * time.Millisecond); err == nil {
		t.Errorf("a direct get during the refusal: %s %s", m.Subject, m.Data)
	}
}
