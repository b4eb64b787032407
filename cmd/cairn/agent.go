package main

import (
	"time"

	"github.com/cairn-io/cairn/agents"
	"github.com/cairn-io/cairn/events"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
)

func agentCmd() *cobra.Command {
	var (
		opts    agents.Options
		natsURL string
		creds   string
	)
	var zpoolFlags *zpoolAgentFlags // zpool reconciler flags (cmd/cairn/agent_zpool.go)
	c := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent of one node: consume its desired state, send heartbeats",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Names = events.NewNames(prefix)
			opts.Log = newLogger()
			// Its own inbox prefix: with per-node users (serve --auth) an agent may
			// subscribe to _INBOX.<prefix>.node.<node>.> only.
			nc, err := connect(natsURL, creds, "cairn-agent-"+opts.Node, nats.CustomInboxPrefix(opts.Names.NodeInbox(opts.Node)))
			if err != nil {
				return err
			}
			defer nc.Close()
			// zpool reconciler (agents/zpoolagent): <prefix>.node.<node>.zpool.* go to it.
			stopZpool, err := zpoolFlags.wire(nc, &opts)
			if err != nil {
				return err
			}
			defer stopZpool()
			a, err := agents.New(nc, opts)
			if err != nil {
				return err
			}
			return a.Run(cmd.Context())
		},
	}
	f := c.Flags()
	f.StringVar(&opts.Node, "node", "", "name of the node this agent runs (required)")
	f.StringVar(&natsURL, "nats", defaultNATS, "NATS server URL")
	f.StringVar(&creds, "creds", "", "credentials file of this node's user (cairn auth node-creds NODE), or a NATS .creds file")
	f.DurationVar(&opts.HeartbeatInterval, "heartbeat-interval", 5*time.Second, "heartbeat period")
	zpoolFlags = addZpoolAgentFlags(f)
	_ = c.MarkFlagRequired("node")
	return c
}
