package commands_test

import (
	"testing"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Memory decides with Admission's handlers: schema errors, refusals and acceptances
// as a serve answers them; a refusal appends nothing; the events of an accepted command
// are in the log and the views at once; a repeated command id gets its first reply.
func TestMemoryAdmission(t *testing.T) {
	m, err := commands.NewMemory("cairn", commands.Options{})
	require.NoError(t, err)
	defer m.Close()
	submit := func(verb, body, id string) admission.Reply {
		return m.Submit(admission.Request{Verb: verb, Body: []byte(body), CommandID: id})
	}

	r := submit("node.add", `{"name":"n1","host":"h1"}`, "")
	require.False(t, r.OK)
	assert.Equal(t, cairn.CodeInvalidArgument, r.Error.Code, "schema: address is required")
	r = submit("node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`, "")
	require.False(t, r.OK, "no cluster yet")
	assert.Empty(t, m.Events(), "a refusal appended")

	r = submit("cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`, "")
	require.True(t, r.OK, "%+v", r.Error)
	first := submit("node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`, "add-n1")
	require.True(t, first.OK, "%+v", first.Error)
	assert.Equal(t, "node.added", first.Events[0].Type)
	log := m.Events()
	assert.Equal(t, first.Events[len(first.Events)-1].Seq, log[len(log)-1].Seq)
	for i, ev := range log {
		assert.Equal(t, uint64(i+1), ev.Seq, "the log's sequences have no gap")
	}

	v, err := m.Read()
	require.NoError(t, err)
	n, ok, err := v.Node("n1")
	v.Close()
	require.NoError(t, err)
	require.True(t, ok, "the views hold the accepted node")
	assert.Equal(t, first.Events[0].Seq, n.Spec.AddedSeq)

	again := submit("node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`, "add-n1")
	assert.Equal(t, first.Events, again.Events, "the same command id: the first reply")
	assert.Len(t, m.Events(), len(log), "a repeated command id appended")
	dup := submit("node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`, "")
	require.False(t, dup.OK)
	assert.Equal(t, cairn.CodeAlreadyExists, dup.Error.Code)
}
