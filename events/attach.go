package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// AgentConsumerIdle is how long a node's consumer outlives its agent's last pull.
const AgentConsumerIdle = time.Hour

// AttachAgentConsumer (re)creates the desired-state consumer of node: a pull consumer
// on <PREFIX>_NODES named AgentConsumer(node), filtered to the node's subjects, that
// delivers the latest message of every subject first (a fresh start is level-triggered)
// and needs no acks. An existing one is deleted first, so every attach starts over. idle
// is how long it outlives its agent's last pull (0: AgentConsumerIdle). It returns the
// consumer's name.
func AttachAgentConsumer(ctx context.Context, js jetstream.JetStream, names Names, node string, idle time.Duration) (string, error) {
	if idle <= 0 {
		idle = AgentConsumerIdle
	}
	name := names.AgentConsumer(node)
	stream := names.NodesStream()
	if err := js.DeleteConsumer(ctx, stream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return "", fmt.Errorf("attach %s: delete the old consumer: %w", node, err)
	}
	_, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Name:              name,
		FilterSubject:     names.NodeFilter(node),
		DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: idle,
		Description:       "cairn agent of node " + node,
	})
	if err != nil {
		return "", fmt.Errorf("attach %s: create consumer %s: %w", node, name, err)
	}
	return name, nil
}
