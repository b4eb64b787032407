package main

import (
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/commands/gateway"
	"github.com/cairn-io/cairn/events"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

func auditCmd() *cobra.Command {
	var (
		natsURL, creds, dataDir string
		asJSON                  bool
		q                       = map[string]*string{}
	)
	c := &cobra.Command{
		Use:   "audit",
		Short: "Print the event history, filtered, as a table or --json (one event per line)",
		Long: `Print stored events in stream order. Reads a running deployment over --nats, or a
stopped one's --data directory. Filters combine (AND).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rng, match, limit, err := gateway.ParseAuditQuery(func(k string) string { return *q[k] }, 0)
			if err != nil {
				return err
			}
			var store *events.Store
			if dataDir != "" {
				off, err := server.OpenData(dataDir, prefix)
				if err != nil {
					return err
				}
				defer off.Close()
				store = off.Store
			} else {
				nc, err := connect(natsURL, creds, "cairn-audit")
				if err != nil {
					return err
				}
				defer nc.Close()
				js, err := jetstream.New(nc)
				if err != nil {
					return err
				}
				store = events.NewStore(js, events.NewNames(prefix))
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			enc := json.NewEncoder(os.Stdout)
			if !asJSON {
				fmt.Fprintln(tw, "SEQ\tOCCURRED\tTYPE\tSUBJECT\tACTOR\tCOMMAND\tPAYLOAD")
			}
			rows := 0
			err = store.Audit(cmd.Context(), rng, match, limit, func(r events.Record) bool {
				if asJSON {
					_ = enc.Encode(r)
					return true
				}
				if rows++; rows%1000 == 0 {
					// The table is aligned per block of 1,000 rows: a history of millions
					// of events streams instead of waiting in memory for the last row.
					tw.Flush()
				}
				payload := string(r.Payload)
				if r.Invalid != "" {
					payload = "INVALID: " + r.Invalid
				}
				fmt.Fprintf(tw, "%d\t%s\t%s.v%d\t%s\t%s\t%s\t%s\n", r.Seq, r.OccurredAt.Format(time.RFC3339),
					r.Type, r.SchemaVersion, r.Subject, r.Actor, r.CommandID, payload)
				return true
			})
			tw.Flush()
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&natsURL, "nats", defaultNATS, "NATS server URL")
	f.StringVar(&creds, "creds", "", "NATS credentials file")
	f.StringVar(&dataDir, "data", "", "read a stopped deployment's data directory instead of --nats")
	f.BoolVar(&asJSON, "json", false, "print one JSON record per line")
	for _, p := range []struct{ name, flag, help string }{
		{"subject", "subject", "subject filter, wildcards allowed (e.g. cairn.ev.node.>)"},
		{"type", "type", "event type (e.g. node.added)"},
		{"actor", "actor", "actor that sent the command"},
		{"command_id", "command-id", "command id"},
		{"from_seq", "from-seq", "first sequence"},
		{"to_seq", "to-seq", "last sequence"},
		{"since", "since", "first time (RFC 3339)"},
		{"until", "until", "last time (RFC 3339)"},
		{"limit", "limit", "at most this many events (0 = all)"},
	} {
		q[p.name] = f.String(p.flag, "", p.help)
	}
	return c
}
