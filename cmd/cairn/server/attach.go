package server

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cairn-io/cairn/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// AttachReply answers an agent's attach request: the consumer to pull from, or why not.
type AttachReply struct {
	Consumer string `json:"consumer,omitempty"`
	Error    string `json:"error,omitempty"`
	// Warning says what the agent should know, e.g. that its node is not in the cluster
	// (it runs, but nothing is meant for it until node.add).
	Warning string `json:"warning,omitempty"`
}

// attachAgents answers agents' attach requests (<prefix>.agent.<node>.attach) in a queue
// group, so any serve answers: it (re)creates the node's desired-state consumer
// (events.AttachAgentConsumer). Agents thus need no permission to create, delete or
// configure consumers; a node's user may only send its own attach request and pull
// from its own consumer (natsauth.NodePermissions).
func attachAgents(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, names events.Names, idle time.Duration, inCluster func(node string) (bool, error), log zerolog.Logger) (*nats.Subscription, error) {
	return nc.QueueSubscribe(names.AgentAttachFilter(), "cairn-attach", recovering(log, "attach", func(m *nats.Msg) {
		node, ok := names.ParseAgentAttach(m.Subject)
		if !ok {
			return
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var r AttachReply
		name, err := events.AttachAgentConsumer(actx, js, names, node, idle)
		if err != nil {
			r.Error = err.Error()
			log.Warn().Err(err).Str("node", node).Msg("agent attach failed")
		} else {
			r.Consumer = name
			if ok, err := inCluster(node); err == nil && !ok {
				r.Warning = fmt.Sprintf("node %s is not in the cluster: nothing is meant for it until node.add", node)
			}
			log.Info().Str("node", node).Str("consumer", name).Msg("agent attached")
		}
		body, _ := json.Marshal(r)
		_ = m.Respond(body)
	}))
}
