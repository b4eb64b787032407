package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server/lease"
	"github.com/cairn-io/cairn/events"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

// leaseCmd holds the side-effect lease's tools (docs/adr/0001-leader-lease.md).
func leaseCmd() *cobra.Command {
	c := &cobra.Command{Use: "lease", Short: "The side-effect lease of the serves on a NATS cluster"}
	var natsURL, creds string
	var replicas int
	set := &cobra.Command{
		Use:   "set-ttl TTL",
		Short: "Change the lease's TTL for every serve (stop them all first; then start them with --lease-ttl TTL)",
		Long: "Every serve of a cluster refuses to start while the lease bucket's TTL differs from its --lease-ttl. " +
			"This changes the bucket's TTL (it refuses while a serve holds the lease). A serve on the embedded NATS server changes it itself.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ttl, err := time.ParseDuration(args[0])
			if err != nil || ttl <= 0 {
				return fmt.Errorf("TTL %q: must be a positive duration such as 5s", args[0])
			}
			nc, err := connect(natsURL, creds, "cairn-lease")
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			bucket := events.NewNames(prefix).LeaseBucket()
			if err := lease.SetTTL(ctx, js, bucket, ttl, replicas); err != nil {
				return exitWith(1, "lease set-ttl: %v", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "lease bucket %s: TTL %s; start every serve with --lease-ttl %s\n", bucket, ttl, ttl)
			return nil
		},
	}
	set.Flags().StringVar(&natsURL, "nats", defaultNATS, "NATS server URL")
	set.Flags().StringVar(&creds, "creds", "", "credentials file (serve --auth: data/auth/cairn.creds)")
	set.Flags().IntVar(&replicas, "replicas", 1, "replicas of the bucket when it does not exist yet (serve's --replicas)")
	c.AddCommand(set)
	return c
}
