package events

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamOptions are the deployment-wide settings of the three streams.
type StreamOptions struct {
	// Replicas is 1 on the embedded single node and 3 on a NATS cluster.
	Replicas int
	// StatusPerSubject is how many status messages CAIRN_STATUS keeps per subject.
	StatusPerSubject int64
	// Duplicates is the JetStream de-duplication window for Nats-Msg-Id (2 min default).
	Duplicates time.Duration
}

// StreamConfigs returns the configurations of CAIRN_EVENTS (the truth: limits retention,
// never trimmed, immutable, atomic batches allowed), CAIRN_NODES (one message per
// subject, atomic batches allowed) and CAIRN_STATUS (a few per subject).
func (n Names) StreamConfigs(o StreamOptions) []jetstream.StreamConfig {
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.StatusPerSubject <= 0 {
		o.StatusPerSubject = 5
	}
	if o.Duplicates <= 0 {
		o.Duplicates = 2 * time.Minute
	}
	return []jetstream.StreamConfig{
		{
			Name:               n.EventsStream(),
			Description:        "Cairn events: the immutable source of truth",
			Subjects:           []string{n.EventFilter("")},
			Retention:          jetstream.LimitsPolicy,
			Storage:            jetstream.FileStorage,
			Replicas:           o.Replicas,
			Duplicates:         o.Duplicates,
			DenyDelete:         true,
			DenyPurge:          true,
			AllowAtomicPublish: true,
			AllowDirect:        true,
		},
		{
			Name:              n.NodesStream(),
			Description:       "Cairn per-node desired state, latest per subject",
			Subjects:          []string{n.NodeFilter("")},
			Retention:         jetstream.LimitsPolicy,
			Storage:           jetstream.FileStorage,
			Replicas:          o.Replicas,
			MaxMsgsPerSubject: 1,
			AllowDirect:       true,
			// The dispatcher stores a round as atomic batches: one file store each.
			AllowAtomicPublish: true,
		},
		{
			Name:              n.StatusStream(),
			Description:       "Cairn observed state reported by agents",
			Subjects:          []string{n.StatusFilter("")},
			Retention:         jetstream.LimitsPolicy,
			Storage:           jetstream.FileStorage,
			Replicas:          o.Replicas,
			MaxMsgsPerSubject: o.StatusPerSubject,
			AllowDirect:       true,
		},
	}
}

// EnsureStreams creates the three streams, or brings an existing stream's
// configuration to the one above. It is idempotent and safe to run on every start.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, n Names, o StreamOptions) error {
	for _, cfg := range n.StreamConfigs(o) {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}
