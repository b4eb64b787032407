package main

import (
	"time"

	"github.com/cairn-io/cairn/server"
	"github.com/spf13/cobra"
)

func serveCmd() *cobra.Command {
	var cfg server.Config
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the control plane: embedded NATS (or --nats), admission, projector, watchdog, HTTP gateway",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Prefix = prefix
			cfg.Log = newLogger()
			s, err := server.Start(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			select {
			case <-cmd.Context().Done():
				cfg.Log.Info().Msg("shutting down")
			case err := <-s.Done():
				cfg.Log.Error().Err(err).Msg("projector stopped")
			}
			return s.Close()
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.DataDir, "data", "data", "data directory: views (Pebble) and the embedded JetStream store")
	f.StringVar(&cfg.NATSURL, "nats", "", "use this NATS server or cluster (e.g. nats://a:4222,nats://b:4222) instead of the embedded one")
	f.StringVar(&cfg.NATSCreds, "nats-creds", "", "credentials file for --nats")
	f.StringVar(&cfg.NATSListen, "nats-listen", "127.0.0.1:4222", "client listen address of the embedded NATS server")
	f.StringVar(&cfg.HTTPListen, "http", "127.0.0.1:3370", "HTTP gateway listen address (\"-\" for none)")
	f.IntVar(&cfg.Replicas, "replicas", 1, "stream replicas (3 on a NATS cluster)")
	f.DurationVar(&cfg.HeartbeatTimeout, "heartbeat-timeout", 15*time.Second, "mark a node offline after this long without a heartbeat")
	f.BoolVar(&cfg.NoSyncAlways, "no-sync-always", false, "do not fsync every JetStream write (benchmarks only: acknowledged commands may be lost on power loss)")
	f.BoolVar(&cfg.Auth, "auth", false, "require credentials on the embedded NATS server: a control user (<data>/auth/cairn.creds) and one user per node (cairn auth node-creds NODE)")
	f.IntVar(&cfg.Admission.MaxBody, "max-command-bytes", 64<<10, "largest accepted command body")
	return c
}
