package server

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/rs/zerolog"
)

// ReapEvery is how often the lease holder looks for consumers of nodes that left.
var ReapEvery = 2 * time.Second

// reapConsumers deletes, while this serve holds the lease, the desired-state consumer of
// every node that is not in the cluster (node.remove, node.lost) once no agent pulls
// from it (no pull request waiting: the agent stopped, or its requests expired). An
// agent that still runs keeps its consumer, as one started before its node.add does (it
// would only attach again). A consumer whose agent stops pulling goes by itself after
// --agent-consumer-idle (JetStream's inactive threshold) in any case.
func reapConsumers(ctx context.Context, db *projections.DB, js jetstream.JetStream, names events.Names, log zerolog.Logger) {
	t := time.NewTicker(ReapEvery)
	defer t.Stop()
	for {
		if err := reapOnce(ctx, db, js, names, log); err != nil && ctx.Err() == nil {
			log.Warn().Err(err).Msg("consumers: not reaped")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func reapOnce(ctx context.Context, db *projections.DB, js jetstream.JetStream, names events.Names, log zerolog.Logger) error {
	stream, err := js.Stream(ctx, names.NodesStream())
	if err != nil {
		return err
	}
	v, err := db.Read()
	if err != nil {
		return err
	}
	nodes, err := v.Nodes()
	v.Close()
	if err != nil {
		return err
	}
	want := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		want[names.AgentConsumer(n.Spec.Name)] = true
	}
	list := stream.ListConsumers(ctx)
	var gone []string
	for info := range list.Info() {
		if strings.HasPrefix(info.Name, "agent-") && !want[info.Name] && info.NumWaiting == 0 {
			gone = append(gone, info.Name)
		}
	}
	if err := list.Err(); err != nil {
		return err
	}
	for _, name := range gone {
		if err := stream.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return err
		}
		log.Info().Str("consumer", name).Msg("consumers: deleted the consumer of a node that left the cluster (no agent pulls from it)")
	}
	return nil
}
