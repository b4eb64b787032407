package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/commands/policy"
	"github.com/cairn-io/cairn/commands/replicas"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/spf13/cobra"
)

func serveCmd() *cobra.Command {
	var cfg server.Config
	var ports, minors string
	var retention time.Duration
	var memoryLimit int64
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the control plane: embedded NATS (or --nats), admission, projector, watchdog, HTTP gateway",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Prefix = prefix
			cfg.Log = newLogger()
			cfg.CommandRetention = retentionFlag(retention)
			softMemoryLimit(memoryLimit << 20)
			var err error
			if cfg.Admission.Ports, err = parseRange("--drbd-ports", ports, 1, 65535); err != nil {
				return err
			}
			if cfg.Admission.Minors, err = parseRange("--drbd-minors", minors, 0, 1048575); err != nil {
				return err
			}
			s, err := server.Start(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			select {
			case <-cmd.Context().Done():
				cfg.Log.Info().Msg("shutting down")
			case err := <-s.Done():
				if s.Projector.Stopped() == nil {
					cfg.Log.Error().Err(err).Msg("projector stopped")
					return s.Close()
				}
				// An event of a newer cairn: keep serving the reason (/readyz, every
				// command answers unavailable naming it) until an upgraded binary runs.
				cfg.Log.Error().Err(err).Msg("projector stopped: serving, not ready, until a cairn that reads the event runs")
				<-cmd.Context().Done()
				cfg.Log.Info().Msg("shutting down")
			}
			return s.Close()
		},
	}
	f := c.Flags()
	f.DurationVar(&retention, "command-retention", projections.DefaultCommandRetention, "how long accepted command ids stay in the views (a retry with the id is answered from its record); 0: for good; the same on every serve of a stream")
	f.StringVar(&cfg.Name, "name", "", "this serve's name in the side-effect lease; unique per NATS cluster (default: the host name; with --nats, host name and pid)")
	f.DurationVar(&cfg.LeaseTTL, "lease-ttl", 5*time.Second, "time to live of the side-effect lease: how long after a leading serve dies another takes over the dispatcher, watchdog and policies")
	f.DurationVar(&cfg.Admission.Deadline, "command-deadline", admission.DefaultDeadline, "how long admission may take over one command, every wait included; past it the command is answered unavailable (retry with the same command id)")
	f.DurationVar(&cfg.Admission.PoolFailoverTimeout, "pool-failover-timeout", 30*time.Second, "how long a pool's owner must be offline before pool.import may move its grant")
	f.StringVar(&ports, "drbd-ports", replicas.DefaultPorts.String(), "range DRBD TCP ports are allocated from, one per resource definition (MIN-MAX)")
	f.StringVar(&minors, "drbd-minors", replicas.DefaultMinors.String(), "range DRBD device minors are allocated from, unique per node (MIN-MAX)")
	f.StringVar(&cfg.DataDir, "data", "data", "data directory: views (Pebble) and the embedded JetStream store")
	f.Int64Var(&memoryLimit, "memory-limit", 352, "soft limit of the Go runtime's memory in MiB (the views' Pebble cache and memtables, up to 128 MiB, come on top): the collector works harder near it, so a catch-up of a big stream stays within it (0: none; GOMEMLIMIT, if set, wins)")
	f.StringVar(&cfg.NATSURL, "nats", "", "use this NATS server or cluster (e.g. nats://a:4222,nats://b:4222) instead of the embedded one")
	f.StringVar(&cfg.NATSCreds, "nats-creds", "", "credentials file for --nats")
	f.StringVar(&cfg.NATSListen, "nats-listen", "127.0.0.1:4222", "client listen address of the embedded NATS server")
	f.StringVar(&cfg.HTTPListen, "http", "127.0.0.1:3370", "HTTP gateway listen address (\"-\" for none)")
	f.BoolVar(&cfg.HTTPAuth, "http-auth", false, "require a bearer token (cairn auth token create) on every HTTP request but /healthz and /readyz; needed, with TLS, when --http is not on loopback")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "serve HTTPS with this certificate (PEM; with --tls-key)")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "private key of --tls-cert (PEM)")
	f.StringVar(&cfg.TLSClientCA, "tls-client-ca", "", "require HTTPS clients to present a certificate signed by this CA (PEM)")
	f.IntVar(&cfg.Replicas, "replicas", 1, "stream replicas (3 on a NATS cluster)")
	f.DurationVar(&cfg.HeartbeatTimeout, "heartbeat-timeout", 15*time.Second, "mark a node offline after this long without a heartbeat")
	f.DurationVar(&cfg.ScheduleInterval, "schedule-interval", policy.ScheduleCheckEvery, "look at the backup schedules this often (a run starts at the first look after its due time)")
	f.StringVar(&cfg.SecretsKey, "secrets-key", "", "file of the key remotes' secrets are sealed with (default DATA/secrets.key, created when missing; every serve of one cluster needs the same file)")
	f.DurationVar(&cfg.KeepCountInterval, "keep-count-interval", policy.DefaultKeepCountEvery, "check every definition against its group's place count this often (and at once when the online nodes change); negative: never")
	f.DurationVar(&cfg.AgentConsumerIdle, "agent-consumer-idle", events.AgentConsumerIdle, "a node's desired-state consumer goes this long after its agent's last pull (a removed node's at once)")
	f.IntVar(&cfg.MaxSyncingPerNode, "max-syncing-per-node", 4, "at most this many replacements sync to one node at once (0: no limit per node)")
	f.IntVar(&cfg.MaxSyncingReplacements, "max-syncing-replacements", policy.DefaultMaxSyncing, "at most this many replicas placed by evacuations and evictions sync at once across the cluster; the rest wait their turn")
	f.BoolVar(&cfg.NoSyncAlways, "no-sync-always", false, "do not fsync every JetStream write (benchmarks only: acknowledged commands may be lost on power loss)")
	f.BoolVar(&cfg.Auth, "auth", false, "require credentials on the embedded NATS server: a control user (<data>/auth/cairn.creds) and one user per node (cairn auth node-creds NODE)")
	f.IntVar(&cfg.Admission.MaxBody, "max-command-bytes", 64<<10, "largest accepted command body")
	return c
}

// parseRange reads MIN-MAX for flag and checks it lies within lo..hi.
func parseRange(flag, s string, lo, hi int) (replicas.Range, error) {
	var r replicas.Range
	if _, err := fmt.Sscanf(s, "%d-%d", &r.Min, &r.Max); err != nil {
		return r, fmt.Errorf("%s: %q is not a range MIN-MAX", flag, s)
	}
	return r, r.Validate(flag, lo, hi)
}

// softMemoryLimit sets the Go runtime's soft memory limit to bytes (0: leave it) unless
// GOMEMLIMIT is set: the environment is the operator's word.
func softMemoryLimit(bytes int64) {
	if bytes > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(bytes)
	}
}
