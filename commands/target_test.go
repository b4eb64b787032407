package commands_test

import (
	"slices"
	"testing"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/projections"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// target is what a property test drives: real admission on a serve (JetStream and
// Pebble), the in-memory decision seam (admission.Memory), or both in lockstep.
type target interface {
	Submit(verb, body string) admission.Reply
	Read() (*projections.View, error)
}

type serveTarget struct{ s *server.Server }

func (t serveTarget) Submit(verb, body string) admission.Reply {
	return servertest.Submit(t.s, verb, body)
}
func (t serveTarget) Read() (*projections.View, error) { return t.s.DB.Read() }

type memoryTarget struct{ m *admission.Memory }

func (t memoryTarget) Submit(verb, body string) admission.Reply {
	return t.m.Submit(admission.Request{Verb: verb, Body: []byte(body)})
}
func (t memoryTarget) Read() (*projections.View, error) { return t.m.Read() }

func newMemoryTarget(t testing.TB) memoryTarget {
	m, err := commands.NewMemory("cairn", commands.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return memoryTarget{m}
}

// conformance submits every command to a serve and to Memory and fails the check when
// they answer differently (accepted or not, the refusal's code, the events' types but
// the command.checked carriers only the stream's conditional append needs). Reads go to
// the serve.
type conformance struct {
	rt    *rapid.T
	serve serveTarget
	mem   memoryTarget
}

func (c conformance) Read() (*projections.View, error) { return c.serve.Read() }

func (c conformance) Submit(verb, body string) admission.Reply {
	want, got := c.serve.Submit(verb, body), c.mem.Submit(verb, body)
	if want.OK != got.OK || code(want) != code(got) || !slices.Equal(decidedTypes(want), decidedTypes(got)) {
		c.rt.Fatalf("%s %s: the serve answered ok=%t %s %v, Memory ok=%t %s %v", verb, body,
			want.OK, code(want), decidedTypes(want), got.OK, code(got), decidedTypes(got))
	}
	return want
}

func code(r admission.Reply) string {
	if r.Error == nil {
		return ""
	}
	return r.Error.Code
}

// decidedTypes are a reply's event types but the command.checked carriers.
func decidedTypes(r admission.Reply) []string {
	var out []string
	for _, e := range r.Events {
		if e.Type != "command.checked" {
			out = append(out, e.Type)
		}
	}
	return out
}
